"""The user cache directory torchdevice keeps what it learns and builds in: ``$TORCHDEVICE_CACHE_DIR``, else the one
``platformdirs`` names (``~/Library/Caches/torchdevice`` on macOS, ``$XDG_CACHE_HOME/torchdevice`` or
``~/.cache/torchdevice`` on Linux, ``%LOCALAPPDATA%/torchdevice/Cache`` on Windows); none without a usable home
directory (``HOME`` empty, relative, or the root directory)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path | None:
    """The cache directory, None for nowhere (see the module docstring)."""
    explicit = os.environ.get("TORCHDEVICE_CACHE_DIR")
    return Path(explicit) if explicit else user_cache_dir()


def user_cache_dir() -> Path | None:
    """The user cache directory of this system, whatever ``$TORCHDEVICE_CACHE_DIR`` says."""
    home = os.path.expanduser("~")  # $HOME (the root directory when it is empty), else the password database's
    if not os.path.isabs(home) or Path(home) == Path(home).parent:
        return None  # not /.cache, nor a folder in the working directory
    path = platformdirs.user_cache_path("torchdevice", appauthor=False)
    return path if path.is_absolute() else None
