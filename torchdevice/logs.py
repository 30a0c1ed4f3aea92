"""The ``torchdevice`` logger: shown on stderr with ``TORCHDEVICE_LOG=info`` (:func:`configure_logging`); work that
takes seconds said as it happens (:func:`say`).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

log = logging.getLogger("torchdevice")

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging() -> None:
    """``TORCHDEVICE_LOG=info`` (any level name, any case): print the ``torchdevice`` logger's records
    of that level and above on stderr, once, not also through the root logger. An unknown level is
    warned about and ignored: a setting must never stop the program."""
    name = os.environ.get("TORCHDEVICE_LOG", "").strip().upper()
    if not name:
        return
    if name not in _LEVELS:
        from torchdevice.callers import outside

        warnings.warn(f"torchdevice: TORCHDEVICE_LOG={os.environ['TORCHDEVICE_LOG']!r} is not a logging level "
                      f"({', '.join(level.lower() for level in _LEVELS)}); ignored", stacklevel=outside())
        return
    log.setLevel(name)
    log.propagate = False
    if not any(getattr(h, "torchdevice", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("torchdevice: %(message)s"))
        handler.torchdevice = True  # type: ignore[attr-defined]
        log.addHandler(handler)


def say(message: str) -> None:
    """``message`` at INFO (``TORCHDEVICE_LOG`` read first: a build's or a scan's tens of seconds may come before the
    runtime is installed), and on a terminal's stderr where INFO is not shown."""
    configure_logging()
    log.info("%s", message)
    if sys.stderr is not None and sys.stderr.isatty() and not log.isEnabledFor(logging.INFO):
        print(f"torchdevice: {message}", file=sys.stderr, flush=True)
