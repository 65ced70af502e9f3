"""The run folder: a default one per run, even for runs started in the same second, and
never an earlier run's replaced without --resume."""
import threading
from datetime import datetime

import pytest

from harness.run import pipeline
from harness.records import UserError


@pytest.fixture
def one_second(monkeypatch):
    """Every run starts in the same second."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 11, 26, 14, 0, 0, tzinfo=tz)

    monkeypatch.setattr(pipeline, "datetime", Frozen)


def test_two_runs_in_the_same_second_get_distinct_folders(tmp_path, one_second):
    first = pipeline.new_run_folder(tmp_path / "results")
    second = pipeline.new_run_folder(tmp_path / "results")
    assert (first.name, second.name) == ("20261126-140000", "20261126-140000-2")
    assert first.is_dir() and second.is_dir()


def test_runs_started_together_never_share_a_folder(tmp_path, one_second):
    """mkdir decides, not a look first: 8 threads at once get 8 folders."""
    got, start = [], threading.Barrier(8)

    def take():
        start.wait()
        got.append(pipeline.new_run_folder(tmp_path / "results"))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8


def test_the_api_refuses_an_earlier_runs_folder_too(tmp_path):
    """pipeline.run, not only the CLI, leaves an earlier run alone without resume."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.jsonl").write_text("{}\n")
    cfg = pipeline.RunConfig(tmp_path / "problems", tmp_path / "solutions", out_dir=tmp_path / "r")
    with pytest.raises(UserError, match=f"continue it with --resume {tmp_path / 'r'}"):
        pipeline.run(cfg, reporter=None)
