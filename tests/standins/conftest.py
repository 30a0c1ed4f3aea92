"""The stand-in modules, imported once through the runtime (they stay imported after ``uninstall()``)."""

from __future__ import annotations

import importlib

import pytest

import torchdevice


@pytest.fixture(scope="module")
def standin():
    """``standin("flash_attn.flash_attn_func")``: the stand-in object of that name."""
    with torchdevice.installed("cpu"):
        for package in ("flash_attn", "xformers", "apex", "selective_scan_cuda", "causal_conv1d_cuda"):
            module = importlib.import_module(package)
            assert module.__file__ and "standins" in module.__file__, f"a real {package} is installed here"

    def find(name: str):
        module, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(module), attr)

    with torchdevice.installed("cpu"):
        yield find
