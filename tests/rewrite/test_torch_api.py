"""The rewritten code needs the torch release the rewriter states (``REQUIRES_TORCH``) and no later one: every
API the rewrites write is in that release and one is missing from the release before (``torch-api.json``,
read from each release's sources by ``torch_api.py``); that reading agrees with the installed torch."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import torch
from torch_api import DATA, TorchSource
from torchdevice_generated.rewrite_rules import RULES

from torchdevice.rewrite import REQUIRES_TORCH
from torchdevice.rewrite.forms import apis

RECORDED = json.loads(DATA.read_text())
INSTALLED = TorchSource.directory(Path(torch.__file__).resolve().parents[1])
SAMPLES = {"device": None, "priority": 0, "enable_timing": False, "blocking": False, "interprocess": False}
"""Arguments for the parameters of torch's C classes, which have no signature to read."""


def test_the_stated_release_is_the_first_with_everything_the_rewrites_write():
    needed = apis(RULES)
    assert needed <= set(RECORDED["apis"]), "run `python tests/rewrite/torch_api.py`: the rules write new APIs"
    releases = list(RECORDED["releases"])
    first = next(r for r in releases if all(RECORDED["releases"][r][api] for api in needed))
    assert tuple(map(int, first.split(".")[:2])) == REQUIRES_TORCH


def _introspected(api: str) -> bool:
    name, _, param = api.rstrip(")").partition("(")
    obj = torch
    for attr in name.split(".")[1:]:
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    if not param:
        return True
    try:
        return param in inspect.signature(obj).parameters
    except ValueError:  # a C class: call it with the parameter
        try:
            obj(**{param: SAMPLES[param]})
        except TypeError:
            return False
        return True


@pytest.mark.parametrize("api", sorted(apis(RULES)) + ["torch.accelerator.no_such_api", "torch.Stream.no_such_method",
                                                     "torch.accelerator.synchronize(no_such_parameter)"])
def test_reading_the_sources_agrees_with_the_installed_torch(api):
    assert INSTALLED.has(api) == _introspected(api)
    if api in RECORDED["apis"] and torch.__version__.split("+")[0] in RECORDED["releases"]:
        assert RECORDED["releases"][torch.__version__.split("+")[0]][api] == INSTALLED.has(api)
