"""peft merging a LoRA adapter into a half-precision base layer takes the GPU's path on the simulated GPU.

``LoraLayer.get_delta_weight`` (peft/tuners/lora/layer.py) casts ``A`` and ``B`` to float32 when the adapter's weight
is float16 or bfloat16 *and its device type is* ``"cpu"`` ("some CPUs have slow bf16/fp16 matmuls"), computes
``B @ A * scaling`` and casts back once; on a GPU it computes ``B @ A`` in the half-precision dtype, rounded, then
the product with ``scaling``, rounded again. The base weight then gets ``+= delta`` in its dtype either way. The two
differ in the last bit of many elements, so the merged weight tells which path ran: here each is computed from the
recorded base weight and adapter, in plain torch on the CPU."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.processes

PROGRAM = "peft_merge.py"
DTYPES = {"torch.float16": torch.float16, "torch.bfloat16": torch.bfloat16}


def merges(record: dict, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The merged weight the program got, the GPU's merge and the CPU's (float32) merge of its base and adapter."""
    before, a, b, merged = (torch.tensor(record[k], dtype=dtype) for k in ("before", "A", "B", "merged"))
    gpu = before + (b @ a) * record["scaling"]
    cpu = before + ((b.float() @ a.float()) * record["scaling"]).to(dtype)
    return merged, gpu, cpu


@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_half_precision_merge_takes_the_devices_path(redirected, target):
    record = redirected(PROGRAM, target=target)[0]
    for name, dtype in DTYPES.items():
        mine = record[name]
        assert (mine["adapter_dtype"], mine["dtype"], mine["scaling"]) == (name, name, 0.75)
        merged, gpu, cpu = merges(mine, dtype)
        assert (gpu != cpu).sum() > 10  # the paths differ: the comparison below can tell them apart
        if target == "cuda-sim":
            # peft read device type "cuda": no float32 cast, the GPU's merge
            assert mine["device"] == "cuda:0"
            assert torch.equal(merged, gpu)
        else:
            # the CPU target's tensors are the CPU's to peft: its float32 merge
            assert torch.equal(merged, cpu)
