"""What a program written for an NVIDIA GPU sees of its card, here, in a spawned process and in a ``subprocess``
python; one JSON line."""

import json
import multiprocessing
import subprocess
import sys

import torch


def card() -> dict:
    return {"name": torch.cuda.get_device_name(), "total": torch.cuda.mem_get_info()[1],
            "count": torch.cuda.device_count()}


if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        spawned = pool.apply(card)
    code = "import json, card; print(json.dumps(card.card()))"
    child = subprocess.run([sys.executable, "-c", code], cwd=sys.path[0], capture_output=True, text=True, check=True)
    print(json.dumps({"parent": card(), "spawned": spawned, "subprocess": json.loads(child.stdout)}))
