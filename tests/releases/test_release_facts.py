"""The runtime uses the installed release's own facts: its generated tables are that release's (each known release's
kept as what differs from the catalog's), and the simulated Mac runs and refuses as that release's MPS does."""

from __future__ import annotations

import importlib

import torch
from fallback_support import Fallbacks
from mac_runs import on_both
from torchdevice_generated import TORCH_VERSION
from torchdevice_generated.releases import CHANGES

from torchdevice import releases
from torchdevice.records.releases import changed


def test_each_table_holds_the_installed_releases_values():
    version = releases.facts_of()
    for key, change in CHANGES.get(version, {}).items():
        module_name, _, name = key.partition(".")
        module = importlib.import_module(f"torchdevice_generated.{module_name}")
        ours = releases.value(module, name, TORCH_VERSION)
        assert getattr(module, name) == changed(ours, change) != ours, key
    for other in releases.known().values():  # every other release's view, as its own change makes it
        for key, change in CHANGES.get(other, {}).items():
            module_name, _, name = key.partition(".")
            module = importlib.import_module(f"torchdevice_generated.{module_name}")
            assert releases.value(module, name, other) == changed(
                releases.value(module, name, TORCH_VERSION), change), key


def test_the_simulated_mac_takes_where_this_releases_mps_does():
    """``Tensor.take``: torch 2.13's MPS has no kernel of it (the simulated Mac computes it elsewhere and counts a
    fallback), 2.15's has one (computed on the device)."""
    from torchdevice_generated.fallback_table import MISSING_ON_MPS

    def work() -> torch.Tensor:
        x = torch.arange(12.0, device="cuda").reshape(3, 4)
        return x.take(torch.tensor([0, 5, 11], device="cuda"))

    fallbacks = Fallbacks()
    native, mac = on_both(work)
    torch.testing.assert_close(mac, native)
    lacks = "aten::take" in MISSING_ON_MPS
    assert (sum(fallbacks["aten::take", route] for route in ("cpu", "mlx")) > 0) == lacks
