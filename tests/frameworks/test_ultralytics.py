"""Ultralytics: YOLOv8n trained with ``device=0``, validated, reloaded from its checkpoints and used for prediction
(NMS: torchvision's operator on the device), under the runtime on the CPU and on the simulated Mac, against the
program on the CPU natively; on the simulated Mac also with its DataLoader workers spawned, as macOS starts them; on
the simulated GPU with AMP, as Ultralytics trains on a GPU, its checkpoints loaded by a CPU-only process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from framework_runs import PROGRAMS, Records, assert_numbers_close

PROGRAM = "ultralytics_train.py"


@pytest.fixture
def in_this_process(monkeypatch, tmp_path):
    """Ultralytics imported in the test's own process: offline, its settings in ``tmp_path`` (read at its import),
    and ``torch.save``, which its import replaces with its own, given back to the tests that follow in this worker."""
    monkeypatch.setenv("YOLO_OFFLINE", "1")
    monkeypatch.setenv("YOLO_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(torch, "save", torch.save)


def assert_cpu_numbers(gpu: Records, cpu: Records) -> None:
    ((gpu_record,), (cpu_record,)) = gpu, cpu
    # On a CUDA device Ultralytics lays the model out channels-last (NHWC), on the CPU it does not: other kernels, whose
    # float32 rounding differs in the last bits from the first batch on (a part in 10^5 of the second epoch's losses).
    assert_numbers_close(gpu_record["losses"], cpu_record["losses"], rtol=2e-4)
    assert_numbers_close(gpu_record["history"], cpu_record["history"], rtol=1e-4)  # logged to 6 digits
    assert gpu_record["lr"] == cpu_record["lr"]
    # rtol: the checkpoints hold float16 weights, which that rounding can move across a float16 rounding boundary
    # (float16's epsilon); atol: weights near zero, where four AdamW steps carry it (5e-6 here).
    for weights in ("trained", "best", "last"):
        assert_numbers_close(gpu_record[weights], cpu_record[weights], rtol=1e-3, atol=1e-4)
    # Zero for a model this little trained (no box overlaps a label enough), reached through NMS and box matching on
    # the device all the same.
    assert_numbers_close(gpu_record["val"], cpu_record["val"])
    assert len(gpu_record["boxes"]) == len(cpu_record["boxes"]) == 5
    assert_numbers_close(gpu_record["boxes"], cpu_record["boxes"], rtol=1e-4, atol=1e-7)


def test_the_environments_torchvision_nms_keeps_the_boxes_ultralytics_own_nms_keeps(in_this_process):
    """The test environment's ``torchvision::nms`` (tests/environment) against Ultralytics' NMS in torch, which it
    writes to keep what torchvision keeps (scores without ties: their order is the only freedom either has)."""
    torchvision = pytest.importorskip("torchvision")  # not in another release's environment (make test-torch)
    from ultralytics.utils.nms import TorchNMS

    generator = torch.Generator().manual_seed(0)
    for count in (0, 1, 7, 200):
        corners = torch.rand(count, 2, generator=generator) * 50
        boxes = torch.cat((corners, corners + torch.rand(count, 2, generator=generator) * 30 + 1), 1)
        scores = torch.rand(count, generator=generator)
        for threshold in (0.1, 0.5, 0.7):
            kept = torchvision.ops.nms(boxes, scores, threshold)
            assert kept.dtype == torch.int64
            assert kept.tolist() == TorchNMS.nms(boxes, scores, threshold).tolist()


@pytest.mark.processes
@pytest.mark.parametrize("target", ["cpu", "mps-sim"])
def test_training_validation_and_prediction_give_the_cpu_numbers(native, redirected, target):
    cpu = native(PROGRAM, "--cpu")
    gpu = redirected(PROGRAM, target=target)
    assert gpu[0]["device"] == {"cpu": "cpu", "mps-sim": "mps:0"}[target]
    assert gpu[0]["workers"] == cpu[0]["workers"] == 0
    assert_cpu_numbers(gpu, cpu)


@pytest.mark.processes
def test_spawned_data_loader_workers_on_the_simulated_mac_give_the_cpu_numbers(native, redirected):
    cpu = native(PROGRAM, "--cpu")  # Ultralytics loads the data in the main process on the CPU
    gpu = redirected(PROGRAM, "--workers", "1", "--spawn", target="mps-sim")
    assert gpu[0]["device"] == "mps:0"
    assert gpu[0]["workers"] == 1
    assert_cpu_numbers(gpu, cpu)


@pytest.mark.processes
def test_on_the_simulated_gpu_it_trains_with_amp_and_its_checkpoints_load_on_a_cpu(native, redirected, monkeypatch,
                                                                                   in_this_process):
    (cpu,) = native(PROGRAM, "--cpu")
    (gpu,) = redirected(PROGRAM, target="cuda-sim")
    assert gpu["device"] == "cuda:0"
    # check_amp reads the model's device: the GPU's path (AMP, a GradScaler), where the CPU trains in float32.
    assert (gpu["check_amp"], gpu["amp"], gpu["scaler"]) == (True, True, True)
    assert (cpu["check_amp"], cpu["amp"], cpu["scaler"]) == (False, False, False)
    # The first epoch's losses and validation losses, under autocast to float16: within a few of its epsilons
    # (9.8e-4) of float32. Later the GradScaler's skipped steps and float16 gradients take the weights elsewhere.
    assert_numbers_close(gpu["losses"][0], cpu["losses"][0], rtol=5e-3, atol=0)
    first = {key: values[0] for key, values in gpu["history"].items()}
    assert_numbers_close(first, {key: values[0] for key, values in cpu["history"].items()}, rtol=5e-3, atol=1e-6)

    # A process with plain torch and no GPU loads the checkpoints (Ultralytics' strip_optimizer rewrote them from the
    # CPU at the end of training, as on a GPU), with torch.load and through YOLO(path): the weights the program read.
    monkeypatch.syspath_prepend(str(PROGRAMS))
    from ultralytics import YOLO
    from ultralytics_train import digest

    best, last = gpu["checkpoints"]["best"], gpu["checkpoints"]["last"]
    for checkpoint in (best, last):
        weights = torch.load(checkpoint, weights_only=False)["model"].state_dict()
        assert {(str(t.device), t.dtype) for t in weights.values() if t.is_floating_point()} == {("cpu", torch.float16)}
    assert_numbers_close(digest(YOLO(last).model), gpu["last"])  # the means summed in another order
    image = Path(best).parents[3] / "data" / "images" / "0.png"  # OUT_DIR/runs/train/weights/best.pt
    (predicted,) = YOLO(best).predict(str(image), imgsz=64, conf=1e-4, max_det=5, device="cpu")
    # The top box and its confidence (a model this little trained scores two classes of some anchors within float32
    # rounding of each other: the channels-last layout on the GPU can pick the other class, a box NMS then keeps).
    assert len(predicted.boxes) == len(gpu["boxes"]) == 5
    assert_numbers_close(predicted.boxes.data[0, :5].tolist(), gpu["boxes"][0][:5], rtol=1e-4, atol=1e-7)
