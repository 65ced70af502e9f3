"""Which GPU a kbench GPU index names (harness/run/gpus.py): under CUDA_VISIBLE_DEVICES=2,3,
`--gpus 0` is the host's GPU 2, for the judges kbench pins to it and in results."""
import pytest

from harness.run import gpus


def test_indices_count_the_gpus_kbench_sees(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpus.visible_device(0) == "2" and gpus.visible_device(1) == "3"
    assert gpus.gpu_number(1) == 3 and gpus.gpu_number(None) == 2
    with pytest.raises(IndexError, match="not among the 2 GPUs"):
        gpus.visible_device(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5d1f")  # by UUID: results give the index kbench used
    assert gpus.visible_device(0) == "GPU-5d1f" and gpus.gpu_number(0) == 0


def test_without_cuda_visible_devices_an_index_is_the_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.visible_device(3) == "3" and gpus.gpu_number(3) == 3 and gpus.gpu_number(None) == 0


# ---- which GPUs a run uses: every visible one unless --gpus narrows -------------------

def test_a_run_uses_every_visible_gpu_unless_told_which():
    from harness.records import UserError

    assert gpus.choose((), 4) == (0, 1, 2, 3)  # a bare `kbench run` on a 4-GPU host
    assert gpus.choose((0,), 4) == (0,)  # --gpus 0: GPU 0 only
    assert gpus.choose((3, 1), 4) == (3, 1)
    with pytest.raises(UserError, match="GPU 4 is not one of the 4 kbench sees"):
        gpus.choose((4,), 4)
    with pytest.raises(UserError, match="repeated"):
        gpus.choose((1, 1), 4)
    with pytest.raises(UserError, match="no CUDA GPU is visible"):
        gpus.choose((), 0)


def test_gpus_flag_all_and_empty_mean_every_gpu():
    from harness.records import UserError

    assert gpus.parse("") == () and gpus.parse("all") == () and gpus.parse("0") == (0,)
    assert gpus.parse("0,2") == (0, 2)
    with pytest.raises(UserError, match="--gpus takes indices"):
        gpus.parse("first")


def test_visible_count_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpus.visible_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hides every GPU
    assert gpus.visible_count() == 0


def test_the_first_line_names_the_gpus_and_their_cards():
    h100 = "NVIDIA H100 80GB HBM3"
    four = [gpus.Gpu(i, i, h100) for i in range(4)]
    assert gpus.describe(four, 4) == f"using 4 of 4 visible GPUs (0, 1, 2, 3): {h100}"
    assert gpus.describe([gpus.Gpu(0, 2, h100)], 2) == f"using GPU 2 (1 of 2 visible): {h100}"
    mixed = [gpus.Gpu(0, 0, h100), gpus.Gpu(1, 1, "NVIDIA A100-SXM4-80GB")]
    assert gpus.describe(mixed, 2) == f"using 2 of 2 visible GPUs: 0: {h100}, 1: NVIDIA A100-SXM4-80GB"


def test_the_pipeline_resolves_the_default_to_every_gpu_and_says_so_first(monkeypatch, tmp_path):
    """With fake GPUs (torch's count and names): no --gpus gives all four, under
    CUDA_VISIBLE_DEVICES=4,5,6,7 named as nvidia-smi numbers them; the reporter hears it."""
    import torch

    from harness.run import pipeline

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
    heard = []
    reporter = type("R", (), {"devices": lambda self, text: heard.append(text)})()
    dev = pipeline.DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", "13.0", torch.__version__)
    cfg = pipeline.RunConfig(tmp_path, tmp_path, options=pipeline.Options(device="cuda"))
    assert pipeline._with_gpus(cfg, dev, reporter).gpus == (0, 1, 2, 3)
    assert heard == ["using 4 of 4 visible GPUs (4, 5, 6, 7): NVIDIA H100 80GB HBM3"]
    narrowed = pipeline.RunConfig(tmp_path, tmp_path, options=pipeline.Options(device="cuda"), gpus=(1,))
    assert pipeline._with_gpus(narrowed, dev, reporter).gpus == (1,)
    assert heard[-1] == "using GPU 5 (1 of 4 visible): NVIDIA H100 80GB HBM3"
    cpu = pipeline.RunConfig(tmp_path, tmp_path, options=pipeline.Options(device="cpu"))
    assert pipeline._with_gpus(cpu, dev, reporter) is cpu and len(heard) == 2  # the CPU path as it was


def test_the_report_header_names_the_card_and_the_gpus():
    from harness.records import RunInfo
    from harness.report.write import device_line

    info = RunInfo("r", "0", "NVIDIA H100 80GB HBM3", "2.11", "13.0",
                   gpus=tuple(f"{i}: NVIDIA H100 80GB HBM3" for i in range(4)))
    assert device_line(info) == "NVIDIA H100 80GB HBM3 x4 (GPUs 0, 1, 2, 3)"
    assert device_line(RunInfo("r", "0", "cpu", "2.11", None)) == "cpu"
    one = RunInfo("r", "0", "NVIDIA H100 80GB HBM3", "2.11", "13.0", gpus=("2: NVIDIA H100 80GB HBM3",))
    assert device_line(one) == "NVIDIA H100 80GB HBM3 (GPU 2)"
