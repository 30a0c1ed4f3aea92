"""Fixtures of the simulated Apple-silicon target's tests."""

from __future__ import annotations

import pytest

import torchdevice


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own capability cache directory (and the programs it starts inherit it)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("TORCHDEVICE_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def mac():
    """The simulated Mac installed for the test."""
    with torchdevice.installed("mps-sim") as device:
        yield device
