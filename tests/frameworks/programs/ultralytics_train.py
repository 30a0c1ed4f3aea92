"""A YOLO detector trained, validated, reloaded and used for prediction with Ultralytics, as its documentation writes
it for a GPU.

``python ultralytics_train.py OUT_DIR [--cpu] [--workers N] [--spawn]``: writes a tiny detection data set under
``OUT_DIR`` (8 random 64x64 images with a rectangle each, their labels in YOLO's format, a data YAML), builds YOLOv8n
from its YAML (no weights downloaded) and trains it for 2 epochs with ``device=0`` (seed 0, ``deterministic=True``,
AMP left on, ``plots=False``, an optimizer step per batch of 4: ``nbs=4``, the data augmentations off, so that batches
are the same whatever process makes them), validating after each epoch. Then it reloads ``best.pt``, moves it to
``"cuda"``, validates it and predicts on an image (both through NMS, at a confidence threshold low enough for the
barely trained model to have boxes), and reloads ``last.pt``. ``--cpu`` spells the device ``"cpu"``; ``--workers N``
loads the training data in N DataLoader workers (default 0; Ultralytics itself uses none on the CPU and MPS);
``--spawn`` starts them as macOS does. Writes ``OUT_DIR/rank0.json``: the device, the workers, the learning rate
chosen, each epoch's mean losses, the validation losses and metrics logged per epoch, a digest of the trained weights
and of both checkpoints, the reloaded model's validation metrics and its predicted boxes.

It also records whether training ran with AMP (``trainer.amp``, its ``GradScaler`` enabled), what Ultralytics'
``check_amp`` answers for the trained model, and where the checkpoints are.

It runs as on a machine without internet: ``YOLO_OFFLINE=1`` (set here, as such a user sets it) tells Ultralytics
not to try downloads or online checks. ``check_amp`` answers False where the model's tensors say they are on ``cpu``
or ``mps`` (under the runtime on the CPU and on the simulated Mac: training in float32); on a CUDA device it would
download a model to compare float32 with AMP inference, cannot offline, and answers True, as on a GPU without
internet: training with AMP. Its settings go to ``OUT_DIR/config`` (``YOLO_CONFIG_DIR``).
"""

import argparse
import json
import multiprocessing
import os
from pathlib import Path

import numpy as np

IMAGES = 8
SIZE = 64
CLASSES = ("bright", "dark")
AUGMENTATIONS_OFF = {"mosaic": 0.0, "fliplr": 0.0, "hsv_h": 0.0, "hsv_s": 0.0, "hsv_v": 0.0, "translate": 0.0,
                     "scale": 0.0, "erasing": 0.0}


def write_dataset(root: Path) -> Path:
    """Random images, each with a bright or a dark rectangle (the two classes) and its label file; the data YAML."""
    import cv2

    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(IMAGES):
        image = rng.integers(60, 140, (SIZE, SIZE, 3), dtype=np.uint8)
        cls = i % len(CLASSES)
        w, h = rng.integers(16, 40, 2)
        x, y = rng.integers(0, SIZE - w), rng.integers(0, SIZE - h)
        image[y:y + h, x:x + w] = (250, 5)[cls]
        label = f"{cls} {(x + w / 2) / SIZE:.6f} {(y + h / 2) / SIZE:.6f} {w / SIZE:.6f} {h / SIZE:.6f}\n"
        cv2.imwrite(str(root / "images" / f"{i}.png"), image)
        (root / "labels" / f"{i}.txt").write_text(label)
    data = root / "data.yaml"
    names = "\n".join(f"  {i}: {name}" for i, name in enumerate(CLASSES))
    data.write_text(f"path: {root}\ntrain: images\nval: images\nnames:\n{names}\n")
    return data


def digest(module) -> list[list[float]]:
    """Per floating-point parameter and buffer: its mean and its first values."""
    return [[t.float().mean().item(), *t.flatten()[:3].tolist()] for t in module.state_dict().values()
            if t.is_floating_point()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--spawn", action="store_true")
    args = parser.parse_args()
    if args.spawn:
        multiprocessing.set_start_method("spawn")
    out = Path(args.out)
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ["YOLO_CONFIG_DIR"] = str(out / "config")
    from ultralytics import YOLO
    from ultralytics.utils.checks import check_amp

    device = "cpu" if args.cpu else 0
    data = write_dataset(out / "data")
    model = YOLO("yolov8n.yaml")
    epochs = []

    def log_losses(trainer) -> None:
        epochs.append({name: loss.item() for name, loss in trainer.tloss.items()})  # the epoch's mean losses

    model.add_callback("on_train_epoch_end", log_losses)
    model.train(data=str(data), epochs=2, imgsz=SIZE, batch=4, nbs=4, device=device, workers=args.workers, seed=0,
                deterministic=True, plots=False, project=str(out / "runs"), name="train", exist_ok=True,
                **AUGMENTATIONS_OFF)
    trainer = model.trainer
    with open(trainer.csv) as f:  # what each epoch logged
        header, *rows = (line.strip().split(",") for line in f)
    history = {key: [float(row[i]) for row in rows] for i, key in enumerate(header)
               if key.startswith(("val/", "metrics/"))}

    best = YOLO(trainer.best)
    best.to("cpu" if args.cpu else "cuda")
    metrics = best.val(data=str(data), imgsz=SIZE, batch=4, conf=1e-4, device=device, plots=False,
                       project=str(out / "runs"), name="val", exist_ok=True)
    image = out / "data" / "images" / "0.png"
    (predicted,) = best.predict(str(image), imgsz=SIZE, conf=1e-4, max_det=5, device=device)
    record = {
        "device": str(next(best.model.parameters()).device),
        "workers": trainer.train_loader.num_workers,
        "lr": trainer.optimizer.defaults["lr"],  # what optimizer="auto" chose
        "amp": bool(trainer.amp), "scaler": trainer.scaler.is_enabled(), "check_amp": check_amp(trainer.model),
        "checkpoints": {"best": str(trainer.best), "last": str(trainer.last)},
        "losses": epochs,
        "history": history,
        "trained": digest(trainer.model),
        "best": digest(best.model),
        "last": digest(YOLO(trainer.last).model),
        "val": {key: float(value) for key, value in metrics.results_dict.items()},
        "boxes": predicted.boxes.data.tolist(),
    }
    with open(out / "rank0.json", "w") as f:
        json.dump(record, f)
