"""What a simulated GPU costs a whole program against the cpu target: the choice of what ``"cuda"`` means on a
machine without a GPU.

Each program is run whole (``torchdevice run --target T PROGRAM``: start-up, imports, training, writing) under the
cpu target and under ``cuda-sim``, alternating, ``ROUNDS`` times each; the result is the median wall time of each and
their ratio. The programs are the repository's own, written as their libraries' examples write them: the GPT training
example (nanoGPT's shape), Hugging Face ``Trainer`` on a tiny GPT-2, a diffusers UNet training step with sampling,
and an Ultralytics YOLO training, validation and prediction, each writing into a fresh directory.
``TORCHDEVICE_BENCH_ROUNDS`` sets the rounds, ``TORCHDEVICE_BENCH_PROGRAMS=yolo`` chooses the programs by name.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "frameworks" / "programs"
ROUNDS = int(os.environ.get("TORCHDEVICE_BENCH_ROUNDS", "3"))
ENV = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}


OUT = "{out}"
"""Where a program writes: a fresh directory for each run."""
PROGRAMS_RUN = {
    "GPT training (examples/gpt_train.py, 20 steps)": [str(ROOT / "examples" / "gpt_train.py"), "--steps", "20"],
    "HF Trainer, tiny GPT-2": [str(PROGRAMS / "hf_trainer.py"), OUT],
    "diffusers UNet training and sampling": [str(PROGRAMS / "diffusers_train.py"), OUT],
    "Ultralytics YOLO train/val/predict": [str(PROGRAMS / "ultralytics_train.py"), OUT],
}


def _run(target: str, program: list[str]) -> float:
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "out"
        out.mkdir()
        command = [part.replace(OUT, str(out)) for part in program]
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "torchdevice", "run", "--target", target, *command],
                              cwd=directory, env=ENV, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(program)} on {target} failed:\n{done.stderr[-2000:]}")
    return elapsed


def run() -> Iterator[dict[str, Any]]:
    chosen = os.environ.get("TORCHDEVICE_BENCH_PROGRAMS", "")
    for name, program in PROGRAMS_RUN.items():
        if chosen and chosen.lower() not in name.lower():
            continue
        _run("cuda-sim", program)  # warm the caches (the compiled backend, downloads, bytecode)
        cpu, sim = [], []
        for _ in range(ROUNDS):
            cpu.append(_run("cpu", program))
            sim.append(_run("cuda-sim", program))
        base, cand = statistics.median(cpu), statistics.median(sim)
        yield {"name": f"{name}: cuda-sim vs cpu target, whole program", "candidate_s": cand, "baseline_s": base,
               "ratio": cand / base, "rounds": ROUNDS, "target_ratio": 1.3}
