"""``launcher.py`` written for the CPU."""

import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import torch


def evaluate(seed: int) -> dict:
    torch.manual_seed(seed)
    x = torch.randn(4, 4)
    return {"seed": seed, "device": x.device.type, "value": (x @ x).sum().item()}


if __name__ == "__main__":
    trained = subprocess.run([sys.executable, sys.argv[1]], capture_output=True, text=True, check=True)
    print(json.dumps({"trained": json.loads(trained.stdout)}))
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        for result in pool.map(evaluate, [1, 2]):
            print(json.dumps(result))
