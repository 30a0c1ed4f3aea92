"""The installed distribution's name and version (a source tree on ``sys.path`` says ``0+unknown``)."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "torchdevice-toolkit"
"""The name this package is installed under (``pip install torchdevice-toolkit``)."""

try:
    __version__ = metadata.version(DISTRIBUTION)
except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"
