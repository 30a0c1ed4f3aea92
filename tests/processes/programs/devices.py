"""A program written for a machine with several GPUs: it counts them and uses each, here and in a spawned
process, then names one too many. Prints what both processes saw as one JSON line."""

import json
import multiprocessing

import torch


def survey() -> dict:
    count = torch.cuda.device_count()
    seen: dict = {"count": count, "current": [], "devices": []}
    for index in range(count):
        torch.cuda.set_device(index)
        seen["current"].append(torch.cuda.current_device())
        seen["devices"].append(str(torch.ones(1, device=f"cuda:{index}").device))
    try:
        torch.ones(1, device=f"cuda:{count}")
    except RuntimeError as exc:
        seen["beyond"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return seen


if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        child = pool.apply(survey)
    print(json.dumps({"parent": survey(), "child": child}))
