"""The test environment's torchvision on a CPU-only torch: ``torchvision.ops.nms`` computed in plain torch.

The package registry's torchvision for this torch (0.28.0, which ultralytics needs) is a CUDA build: its ``_C``
extension cannot load beside a CPU torch, and ``import torchvision`` then fails at its fake registration of
``torchvision::nms``, an operator that only ``_C`` defines (so would ``import timm``, which imports torchvision
when it is installed). ``make venv`` puts this folder on the path of every process of the test environment, natively
and under the runtime alike (``cpu_torchvision.pth`` in its site-packages, which imports this module); the
torchdevice package knows nothing of it.

Importing this module costs a finder on ``sys.meta_path`` and nothing else. When ``torchvision.extension`` has run
and found no loadable ``_C``, the finder defines ``torchvision::nms`` with a CPU kernel (the semantics of
torchvision's own CPU kernel: boxes by descending score, stable for ties; a box suppressed where its IoU with a kept
one exceeds the threshold) and ``torchvision::qnms`` without one, so that the package's import succeeds, and lets
``torchvision.ops`` call its operators (``_assert_has_ops``). ``_has_ops()`` stays False, so torchvision registers
nothing for its other operators and ``roi_align`` takes its Python path; ``roi_pool``, ``deform_conv2d`` and the
others fail, naming the missing operator. Nothing happens where torchvision's ``_C`` loads.
"""

from __future__ import annotations

import sys
from importlib.machinery import PathFinder

EXTENSION = "torchvision.extension"
_library = None
"""The ``torchvision`` operator library defined here (kept alive: its operators live as long as it does)."""


def _nms(dets, scores, iou_threshold):  # type: ignore[no-untyped-def]
    import torch

    order = scores.sort(stable=True, descending=True).indices
    x1, y1, x2, y2 = dets[order].unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    width = (torch.minimum(x2[:, None], x2) - torch.maximum(x1[:, None], x1)).clamp(min=0)
    height = (torch.minimum(y2[:, None], y2) - torch.maximum(y1[:, None], y1)).clamp(min=0)
    inter = width * height
    overlaps = (inter / (areas[:, None] + areas - inter) > iou_threshold).tolist()
    suppressed = [False] * len(overlaps)
    keep = []
    for i, row in enumerate(overlaps):
        if not suppressed[i]:
            keep.append(i)
            suppressed = [gone or over for gone, over in zip(suppressed, row, strict=True)]
    return order[keep]


def _define_ops(extension) -> None:  # type: ignore[no-untyped-def]
    global _library
    import torch

    _library = torch.library.Library("torchvision", "DEF")
    _library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _library.impl("nms", _nms, "CPU")
    _library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    extension._assert_has_ops = lambda: None


def _completing(run):  # type: ignore[no-untyped-def]
    """``exec_module`` that runs the module as ``run`` does, then defines the operators if ``_C`` did not load."""

    def exec_module(module):  # type: ignore[no-untyped-def]
        run(module)
        if not module._has_ops():
            _define_ops(module)

    return exec_module


class ExtensionFinder:
    """Finds ``torchvision.extension`` as the other finders do, and completes it after it has run."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname != EXTENSION:
            return None
        for finder in sys.meta_path:
            spec = None if finder is cls else getattr(finder, "find_spec", lambda *_: None)(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module = _completing(spec.loader.exec_module)
                return spec
        return None


if ExtensionFinder not in sys.meta_path:  # where the path's finder would find it, after the finders put first
    sys.meta_path.insert(sys.meta_path.index(PathFinder) if PathFinder in sys.meta_path else len(sys.meta_path),
                         ExtensionFinder)
