"""Fine-tuning code with bitsandbytes and DeepSpeed installed, as it is in fine-tuning environments: peft LoRA
(a loop, ``Trainer``, trl's SFT and DPO), QLoRA 4-bit and 8-bit loading onto ``"cuda"``, bitsandbytes' layers
and 8-bit optimizers, DeepSpeed ZeRO 1 and 2 in one process, in two under ``torchrun -m torchdevice run`` and
through ``Trainer``. Under the runtime, bitsandbytes and DeepSpeed are told the truth about CUDA and take their
CPU backend and accelerator, as they do natively: every number is the CPU run's. On simulated GPUs DeepSpeed takes
its CUDA accelerator (with its CPU ops), with the same numbers."""

from __future__ import annotations

import sys

import pytest
import torch
from framework_runs import PROGRAMS, assert_numbers_close, records

TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2")
BUILDS = 900
"""Seconds for a DeepSpeed run: on a machine that has not built them yet, the first one compiles DeepSpeed's
CPU ops (its shared-memory collectives and FusedAdam, 2.5 min of CPU here; kept in the environment's
torch_extensions, tests/conftest.py)."""

pytestmark = pytest.mark.slow


def test_peft_lora_loop_trainer_and_trl_give_the_cpu_numbers(native, redirected):
    (cpu,) = native("peft_lora.py", "--cpu")
    (gpu,) = redirected("peft_lora.py")
    loop = gpu["loop"]
    assert loop["merged_on_cuda"] and not cpu["loop"]["merged_on_cuda"]
    assert loop["losses"][-1] < loop["losses"][0]  # it learns
    # The adapter saved and loaded onto a fresh base, and merged into it, computes what the trained model does.
    torch.testing.assert_close(torch.tensor(loop["reloaded"]), torch.tensor(loop["logits"]))
    torch.testing.assert_close(torch.tensor(loop["merged"]), torch.tensor(loop["logits"]), rtol=1e-5, atol=1e-5)
    for name in ("losses", "logits", "reloaded", "merged"):
        assert_numbers_close(loop[name], cpu["loop"][name], rtol=1e-5, atol=1e-5)
    assert loop["generated"] == cpu["loop"]["generated"]
    for part in ("trainer", "sft", "dpo"):
        assert_numbers_close(gpu[part], cpu[part], rtol=1e-5, atol=1e-5)
    # Mixed precision: the adapted projection computed in the low precision under autocast("cuda"), the losses
    # those of the CPU's autocast and within a few units of the dtype's epsilon of float32.
    for part, dtype, rtol in (("loop_bf16", "torch.bfloat16", 4e-2), ("loop_fp16", "torch.float16", 5e-3)):
        assert gpu[part]["q_proj"] == dtype
        assert_numbers_close(gpu[part]["losses"], cpu[part]["losses"], rtol=rtol, atol=0)
        assert_numbers_close(gpu[part]["losses"], cpu["loop"]["losses"], rtol=rtol, atol=0)
    assert_numbers_close(gpu["trainer_bf16"], cpu["trainer"], rtol=4e-2, atol=0)


def test_qlora_and_bitsandbytes_run_their_cpu_backend_with_the_cpu_numbers(native, redirected):
    (cpu,) = native("bnb_qlora.py", "--cpu")
    (gpu,) = redirected("bnb_qlora.py")
    assert (gpu["4bit"]["layer"], gpu["8bit"]["layer"]) == ("Linear4bit", "Linear8bitLt")
    assert gpu["linear8bitlt"]["dtype"] == "torch.int8" and gpu["linear8bitlt"]["out_dtype"] == "torch.float16"
    for part in ("4bit", "8bit"):
        assert gpu[part]["losses"][-1] < gpu[part]["losses"][0]  # the adapter learns on the quantized model
        assert gpu[part]["generated"] == cpu[part]["generated"]
        for name in ("losses", "logits"):
            assert_numbers_close(gpu[part][name], cpu[part][name], rtol=1e-5, atol=1e-5)
    for name in ("out", "grad"):
        assert_numbers_close(gpu["linear8bitlt"][name], cpu["linear8bitlt"][name], rtol=1e-5, atol=1e-5)
    assert_numbers_close(gpu["paged_adamw"], cpu["paged_adamw"], rtol=1e-5, atol=1e-5)


@pytest.mark.release
@pytest.mark.timeout(2 * BUILDS)  # its runs, each allowed BUILDS, one after the other
@pytest.mark.parametrize("target, accelerator", [
    ("cpu", "cpu"),  # told the truth: not its CUDA accelerator, which needs nvcc
    ("cuda-sim", "cuda"),  # a GPU: its CUDA accelerator, building its CPU ops
])
def test_deepspeed_zero_in_one_process_with_trainer_and_in_two_under_torchrun_give_the_cpu_numbers(
        native, redirected, tmp_path, target, accelerator):
    (cpu,) = native("deepspeed_zero.py", "--cpu", "--trainer", timeout=BUILDS)
    (gpu,) = redirected("deepspeed_zero.py", "--trainer", target=target, timeout=BUILDS)
    assert (gpu["accelerator"], cpu["accelerator"]) == (accelerator, "cpu")
    for stage in ("stage1", "stage2"):
        assert gpu[stage]["optimizer"] == "FusedAdam"  # its CPU build, compiled with the host's compiler
        for name in ("losses", "weights"):
            assert_numbers_close(gpu[stage][name], cpu[stage][name], rtol=1e-5, atol=1e-5)
    assert len(gpu["trainer"]) == 4
    assert_numbers_close(gpu["trainer"], cpu["trainer"], rtol=1e-5, atol=1e-5)

    # Two ranks of 8 samples step as one process of 16: the CPU's one-process numbers, on each rank.
    command = [sys.executable, *TORCHRUN, "-m", "torchdevice", "run", "--target", target,
               str(PROGRAMS / "deepspeed_zero.py"), str(tmp_path)]
    ranks = records(tmp_path, command, timeout=BUILDS)
    assert [(r["rank"], r["world"], r["accelerator"]) for r in ranks] == [(0, 2, accelerator), (1, 2, accelerator)]
    for rank in ranks:
        for stage in ("stage1", "stage2"):
            for name in ("losses", "weights"):
                assert_numbers_close(rank[stage][name], cpu[stage][name], rtol=1e-5, atol=1e-5)


@pytest.mark.timeout(2 * BUILDS)  # its runs, each allowed BUILDS, one after the other
def test_deepspeed_zero_on_the_simulated_mac_takes_its_mps_accelerator_and_gives_the_cpu_numbers(native,
                                                                                              redirected):
    # torch's AdamW: DeepSpeed's MPS FusedAdam reads a Metal source its installed package lacks (on a Mac too)
    (cpu,) = native("deepspeed_zero.py", "--cpu", "--torch-adam", timeout=BUILDS)
    (mac,) = redirected("deepspeed_zero.py", "--torch-adam", target="mps-sim", timeout=BUILDS)
    assert mac["accelerator"] == "mps" and cpu["accelerator"] == "cpu"
    for stage in ("stage1", "stage2"):
        assert mac[stage]["optimizer"] == cpu[stage]["optimizer"] == "AdamW"
        for name in ("losses", "weights"):
            assert_numbers_close(mac[stage][name], cpu[stage][name], rtol=1e-5, atol=1e-5)
