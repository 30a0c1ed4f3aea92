"""Every public ``torch.cuda`` entry does, with the runtime installed on the CPU, what its record in
``catalog/overlays/cuda.yaml`` says: emulated by the named word, refused naming the reason, or left as is."""

from __future__ import annotations

import contextlib
import importlib
import re
from typing import Any

import pytest
import torch
from planned import catalog, planned

import torchdevice
from torchdevice.runtime import activation

STATUS_FIELD = "cpu"

CUDA_RULED = [e for e in catalog().entries if e.cuda is not None]


def owner_of(module: str, path: tuple[str, ...]) -> Any:
    owner: Any = importlib.import_module(module)
    for part in path:
        owner = getattr(owner, part)
    return owner


@pytest.mark.parametrize("name", [e.name for e in CUDA_RULED])
def test_entry_does_what_its_record_says(name):
    entry = catalog()[name]
    rule = entry.cuda
    policy, does, value, why = rule.policy, rule.does, rule.value, rule.why
    call = eval(f"lambda f: f({rule.sample})")  # the record gives the arguments as source text
    owner = owner_of(entry.module, entry.path[:-1])
    original = getattr(owner, entry.attr)
    with torchdevice.installed("cpu"):
        installed = getattr(owner, entry.attr)
        if policy == "passthrough":
            assert installed is original
            return
        assert installed is not original
        if policy == "unsupported":
            with pytest.raises(NotImplementedError, match=re.escape(f"{name} is not supported on target 'cpu'")
                               + ".*" + re.escape(why)):
                call(installed)
            return
        built = activation.emulation().build(does, value, name)
        if entry.kind == "attribute":  # a data value: read, not called
            assert installed == built and type(installed) is type(built)
            return
        result = call(installed)
        if does == "constant":
            assert result == value and type(result) is type(value)
        else:
            assert installed is built
        if does == "noop":
            assert result is None
        if isinstance(result, contextlib.AbstractContextManager):
            with result:
                pass


@pytest.mark.parametrize("name", [m.entry.name for m in planned().members])
def test_emulated_class_has_the_member(name):
    member = catalog()[name]
    owner = catalog()[member.namespace]
    with torchdevice.installed("cpu"):
        assert hasattr(getattr(owner_of(owner.module, owner.path[:-1]), owner.attr), member.attr)


def test_the_device_the_emulation_stands_for_is_the_target():
    with torchdevice.installed("cpu"):
        assert torch.cuda.Event().device == torch.cuda.Stream().device == torch.device("cpu")
