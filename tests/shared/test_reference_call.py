"""The reference's forward in its timed batches (batches.reference_call): under no_grad, its
errors carried out as CallFailed for the judge to name as the problem's, running out of
memory as itself (the candidate's process shares the GPU)."""
import pytest
import torch

from harness.judge import timing
from harness.judge.task import Judge, ProblemFailed
from harness.records import Status
from harness.shared import batches


def test_the_reference_runs_without_autograd_and_its_errors_are_carried_out():
    w = torch.ones(3, requires_grad=True)
    call = batches.reference_call(lambda x: x * w)
    assert not call([torch.ones(3)]).requires_grad

    def broken(x):
        raise ValueError("bad shape")

    with pytest.raises(batches.CallFailed) as failed:
        batches.Eager(batches.reference_call(broken), [[torch.ones(1)]] * 3).run(3)
    assert isinstance(failed.value.error, ValueError)

    def out_of_memory(x):
        raise torch.OutOfMemoryError("CUDA out of memory")

    with pytest.raises(torch.OutOfMemoryError):
        batches.reference_call(out_of_memory)([torch.ones(1)])


def test_a_reference_that_raises_in_a_timed_batch_is_the_problems_failure(tmp_path):
    problem = tmp_path / "7_Broken.py"
    problem.write_text("def forward(x):\n    raise ValueError('only in timing')\n")
    t = object.__new__(timing.Timer)
    t.spent, t.holding = timing.Spent(), True
    t.j = object.__new__(Judge)
    t.j.spec = {"problem_path": str(problem)}

    def batch(*_):
        raise batches.CallFailed(ValueError("only in timing"))

    t._reference_batch = batch
    with pytest.raises(ProblemFailed) as failed:
        t._reference_and_compare(None, [], 1, False, True)
    assert failed.value.status is Status.PROBLEM_ERROR and str(problem) in failed.value.message
    assert "the reference Model's forward raised" in failed.value.message and "only in timing" in failed.value.message
