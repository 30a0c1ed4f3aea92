"""Fixtures of the fallback engine's tests."""

from __future__ import annotations

import pytest
from fallback_support import Fallbacks


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own capability cache directory."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("TORCHDEVICE_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def fallbacks() -> Fallbacks:
    """Fallback counts since the test started."""
    return Fallbacks()
