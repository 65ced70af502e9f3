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
