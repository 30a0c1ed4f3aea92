"""A launcher that starts its work in other Python processes: ``subprocess`` and ``ProcessPoolExecutor``.

``python launcher.py TRAIN_SCRIPT``: runs the training script in a fresh interpreter, then evaluates
two seeds in a process pool started with ``spawn``, and prints what each process reported.
"""

import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch


def evaluate(seed: int) -> dict:
    torch.manual_seed(seed)
    x = torch.randn(4, 4, device="cuda")
    return {"seed": seed, "device": x.device.type, "gpus": torch.cuda.device_count(), "value": (x @ x).sum().item()}


if __name__ == "__main__":
    trained = subprocess.run([sys.executable, sys.argv[1]], capture_output=True, text=True, check=True)
    print(json.dumps({"trained": json.loads(trained.stdout)}))
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        for result in pool.map(evaluate, [1, 2]):
            print(json.dumps(result))
