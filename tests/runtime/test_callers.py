"""Who is told what (``torchdevice.callers``): each answer point asks who calls. Code of torch's modules and of the
packages told the truth gets the machine as it is (no CUDA here); the program and the libraries it uses get the
target's CUDA; torch's modules told as the program is get the program's answers; frames that only pass a call on
(``functools``, ``contextlib``) are looked through to the code above them. The callers are real frames of functions
whose module is the one named (compiled with that ``__name__``), as a torch module's or a library's would be."""

from __future__ import annotations

import pytest
import torch

from torchdevice import callers
from torchdevice.patching import Patcher

ANSWERS = {
    # each answer point: what the program is told, what torch's own code is told (the CPU target, no CUDA here)
    "torch.cuda.is_available()": (True, False),
    "torch.cuda.is_initialized()": (True, False),
    "torch.cuda.device_count()": (1, 0),
    "torch.accelerator.current_accelerator()": (torch.device("cuda"), None),
    "torch.ones(2, device='cuda').is_cuda": (True, False),
}


def asked_from(module: str, expression: str, through: str | None = None):
    """``expression`` asked by a function of module ``module``: evaluated there, or by a function of module
    ``through`` that it calls (a frame between the asker and the answer point)."""
    if through is None:
        scope = {"__name__": module, "torch": torch}
        exec(compile(f"def ask():\n    return {expression}\n", f"<{module}>", "exec"), scope)
        return scope["ask"]()
    passing = {"__name__": through, "torch": torch}
    exec(compile(f"def pass_on():\n    return {expression}\n", f"<{through}>", "exec"), passing)
    scope = {"__name__": module, "pass_on": passing["pass_on"]}
    exec(compile("def ask():\n    return pass_on()\n", f"<{module}>", "exec"), scope)
    return scope["ask"]()


@pytest.mark.parametrize("expression", ANSWERS)
@pytest.mark.parametrize(("module", "told"), [
    ("__main__", "program"),
    ("mylab.train", "program"),  # another library the program uses
    ("torch.nn.parallel.fake_internal", "truth"),  # torch's own code
    ("torchdevice.fake_internal", "truth"),
    ("bitsandbytes.functional", "truth"),  # a package told the truth (catalog/overlays/packages.yaml)
    ("deepspeed.accelerator.real_accelerator", "truth"),
    ("torch.random", "program"),  # a module of torch told as the program is
    ("torch.utils.data.dataloader", "program"),
])
def test_each_answer_point_tells_each_kind_of_caller_its_own(on_cpu, expression, module, told):
    program, truth = ANSWERS[expression]
    assert asked_from(module, expression) == (program if told == "program" else truth)


@pytest.mark.parametrize("expression", ANSWERS)
def test_frames_that_only_pass_a_call_on_are_looked_through(on_cpu, expression):
    program, truth = ANSWERS[expression]
    for passing in ("functools", "contextlib"):
        assert asked_from("torch.fake_internal", expression, through=passing) == truth
        assert asked_from("mylab.train", expression, through=passing) == program
    assert asked_from("torch.fake_internal", expression, through="mylab.helpers") == program  # not a passing frame


def test_modules_told_as_the_program_for_a_while_are_told_the_truth_again_after(on_cpu):
    patcher = Patcher()
    callers.tell_as_program(patcher, ("torch.nn.parallel.fake_internal",))
    assert asked_from("torch.nn.parallel.fake_internal", "torch.cuda.is_available()") is True
    assert asked_from("torch.nn.parallel.other", "torch.cuda.is_available()") is False
    patcher.restore()
    assert asked_from("torch.nn.parallel.fake_internal", "torch.cuda.is_available()") is False


def test_a_package_told_as_the_program_brings_every_module_below_it(on_cpu):
    """``packages``: the package's modules are read from its folder (nothing imported)."""
    patcher = Patcher()
    callers.tell_as_program(patcher, packages=("torch.distributed.fsdp",))
    try:
        assert asked_from("torch.distributed.fsdp._runtime_utils", "torch.cuda.is_available()") is True
        assert asked_from("torch.distributed.fsdp", "torch.cuda.is_available()") is True
        assert asked_from("torch.distributed.other", "torch.cuda.is_available()") is False
    finally:
        patcher.restore()
    assert asked_from("torch.distributed.fsdp._runtime_utils", "torch.cuda.is_available()") is False
