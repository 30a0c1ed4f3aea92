"""A LoRA adapter merged into a half-precision base layer on the GPU with peft, as a deployment script writes it.

``python peft_merge.py OUT_DIR [--cpu]``: for float16 and bfloat16, a linear layer in that dtype on ``"cuda"``, a
LoRA adapter kept in the base's dtype (``autocast_adapter_dtype=False``; ``init_lora_weights=False``: a nonzero
update, as after training; ``lora_alpha / r`` = 0.75) and ``merge_and_unload()``. Writes ``OUT_DIR/rank0.json``:
per dtype, the base weight before the merge, the adapter's ``A`` and ``B``, its scaling, the merged weight and its
device. ``--cpu`` spells the device ``"cpu"``.
"""

import argparse
import json
import os

import torch
from peft import LoraConfig, get_peft_model
from torch import nn


class Projection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def merged(device: str, dtype: torch.dtype) -> dict:
    torch.manual_seed(0)
    base = Projection().to(device, dtype)
    before = base.proj.weight.detach().clone()
    config = LoraConfig(r=4, lora_alpha=3, target_modules=["proj"], init_lora_weights=False)
    model = get_peft_model(base, config, autocast_adapter_dtype=False)
    layer = model.base_model.model.proj
    a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
    adapter = {"A": a.detach().float().cpu().tolist(), "B": b.detach().float().cpu().tolist(),
               "adapter_dtype": str(b.dtype), "scaling": layer.scaling["default"]}
    weight = model.merge_and_unload().proj.weight
    return {**adapter, "before": before.float().cpu().tolist(), "merged": weight.detach().float().cpu().tolist(),
            "device": str(weight.device), "dtype": str(weight.dtype)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    record = {str(dtype): merged(device, dtype) for dtype in (torch.float16, torch.bfloat16)}
    with open(os.path.join(args.out, "rank0.json"), "w") as out:
        json.dump(record, out)
