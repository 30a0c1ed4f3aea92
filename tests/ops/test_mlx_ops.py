"""Each MLX shim against torch on the same inputs (``tests/support/mlx_samples.py`` says which)."""

from __future__ import annotations

import functools

import mlx_samples
import pytest
import torch
from planned import planned
from torchdevice_generated.mlx_shims import SHIMS

STATUS_FIELD = "mlx"


@pytest.mark.parametrize("name", [s.name for s in planned().shims])
def test_shim_matches_torch(name):
    shim = next(s for s in planned().shims if s.name == name)
    reference = functools.reduce(getattr, name.split(".")[1:], torch)  # the torch entry the shim stands for
    mlx_samples.check(SHIMS[name], reference, opinfo=shim.opinfo_names, recipe=shim.mapping.sample,
                      dtypes=shim.sample_dtypes, tolerance=shim.mapping.tolerance, inplace=shim.mapping.inplace)
