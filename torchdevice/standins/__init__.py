"""Stand-ins for flash-attn 2, xformers and apex, and CUDA's attention backend choices, on the target.

Under the runtime, ``import flash_attn`` (``xformers``, ``apex``) finds the stand-in in ``packages/`` when
the real package is not installed (:mod:`.finder`): the libraries' documented API, computed with PyTorch
(:mod:`.attention`, ``torch.nn.functional.layer_norm``, ...), so it runs on the target and falls back like
any op. What the stand-ins cover is ``catalog/overlays/standins.yaml`` (the generated
``torchdevice_generated.standins``); anything else fails at import (:mod:`.missing`). ``uninstall()`` takes
the finder away; stand-in modules already imported stay. :mod:`.sdpa` makes ``sdpa_kernel`` choices run.
"""

from __future__ import annotations

import sys
from typing import Any

from torchdevice.device.target import Target
from torchdevice.patching import Patcher
from torchdevice.standins import sdpa
from torchdevice.standins.finder import StandinFinder


def activate(patcher: Patcher, target: Target, options: dict[str, Any]) -> None:
    """Serve the stand-ins and map SDPA backend choices until ``patcher.restore()``."""
    from torchdevice_generated.standins import PACKAGES

    finder = StandinFinder(PACKAGES)
    sys.meta_path.append(finder)
    patcher.defer(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
    sdpa.activate(patcher, target.name)
