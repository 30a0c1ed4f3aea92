"""Hugging Face transformers on tiny models built from their configs (no download): ``Trainer`` on GPT-2 in
float32 and with ``fp16=True``, and a checkpoint loaded with ``from_pretrained(device_map="cuda")``, under the
runtime on the CPU and on the simulated GPU."""

from __future__ import annotations

import pytest
from framework_runs import assert_numbers_close

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_trainer_fp32_on_cuda_gives_the_cpu_losses(native, redirected, target):
    (cpu,) = native("hf_trainer.py", "--cpu")
    (gpu,) = redirected("hf_trainer.py", target=target)
    assert (gpu["device"], cpu["device"]) == ("cuda:0", "cpu")  # TrainingArguments.device
    if target == "cuda-sim":
        assert gpu["on"] == "cuda:0"  # the model's parameters are the GPU's (the CPU target's say "cpu")
    assert len(gpu["losses"]) == 6
    assert_numbers_close(gpu["losses"], cpu["losses"])
    assert not gpu["forward"]["lm_head"]["autocast"]


@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_trainer_fp16_runs_under_cuda_autocast(native, redirected, target):
    (cpu,) = native("hf_trainer.py", "--cpu")
    (gpu,) = redirected("hf_trainer.py", "--fp16", target=target)
    # The head's matmul in float16, the final layer norm in float32 (CUDA's policy), under autocast("cuda").
    assert gpu["forward"] == {
        "ln_f": {"dtype": "torch.float32", "autocast": True, "autocast_dtype": "torch.float16"},
        "lm_head": {"dtype": "torch.float16", "autocast": True, "autocast_dtype": "torch.float16"}}
    # Within a few float16 epsilons (9.8e-4) of the float32 losses.
    assert_numbers_close(gpu["losses"], cpu["losses"], rtol=5e-3, atol=0)


@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_from_pretrained_onto_cuda_gives_the_cpu_logits(native, redirected, target):
    # transformers builds the model under torch.device("meta") and computes what the checkpoint lacks (the
    # rotary inv_freq buffer) on the target: real memory left uninitialised would show here.
    (cpu,) = native("hf_pretrained.py", "--device", "cpu")
    (gpu,) = redirected("hf_pretrained.py", target=target)
    if target == "cuda-sim":
        assert gpu["on"] == "cuda:0"
    assert_numbers_close(gpu["inv_freq"], cpu["inv_freq"])
    assert_numbers_close(gpu["logits"], cpu["logits"])
