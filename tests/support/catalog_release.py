"""Tests that compare the installed torch with the catalog's scanned facts hold on the release the catalog was scanned
from; on another (``make test-torch``) they skip, saying so."""

from __future__ import annotations

import pytest
from torchdevice_generated import TORCH_VERSION

from torchdevice.releases import release

scanned_here = pytest.mark.skipif(release() != release(TORCH_VERSION),
                                  reason=f"compares this torch with the catalog, scanned from torch {TORCH_VERSION}")
