"""Scan the installed torch into ``catalog/scanned/*.yaml``: one record per public API object.

``scan(out_dir)`` writes the files and returns the entry count per group; ``entries()`` gives the
records without writing. :mod:`~codegen.scan.walk` decides what is public,
:mod:`~codegen.scan.aten` adds the aten overloads and maps entries to aten ops,
:mod:`~codegen.scan.signatures`, :mod:`~codegen.scan.devices` and :mod:`~codegen.scan.kernels`
fill in each record, :mod:`~codegen.scan.write` emits the YAML. :mod:`~codegen.scan.autocast` adds CUDA's autocast
policy (``autocast.yaml``) and :mod:`~codegen.scan.kernels` the overloads MPS has a sparse kernel of
(``sparse_mps.yaml``), those CUDA has a sparse compressed kernel of (``sparse_csr_cuda.yaml``) and those whose CUDA
kernel checks its tensors' devices (``cuda_device_checks.yaml``): facts about aten overloads rather than entries.
MPS's messages (``mps_messages.yaml``) come from torch's macOS wheel, not the installed torch:
:mod:`~codegen.scan.mps_messages`; CUDA's determinism alerts (``cuda_alerts.yaml``) from torch's CUDA wheel:
:mod:`~codegen.scan.cuda_alerts`.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from torchgen.model import DispatchKey

from codegen.files import AUTOCAST, CUDA_ALERTS, DEVICE_CHECKS, MPS_MESSAGES, SCANNED_DIR, SPARSE_CSR_CUDA, SPARSE_MPS
from codegen.scan import aten, autocast, kernels, walk, write
from codegen.scan.records import record


def torch_version() -> str:
    """The release the catalog describes, without a local build tag (``2.13.0+cpu`` -> ``2.13.0``)."""
    return torch.__version__.split("+")[0]


def entries() -> dict[str, list[dict[str, Any]]]:
    """Catalog records by group, groups and records sorted by name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated aliases warn when touched
        found = [*walk.walk(), *aten.overloads()]
        groups: dict[str, list[dict[str, Any]]] = {}
        for item in sorted(found, key=lambda f: f.name):
            groups.setdefault(item.group, []).append(record(item))
    return dict(sorted(groups.items()))


def scan(out_dir: Path = SCANNED_DIR) -> dict[str, int]:
    """Write the catalog files into ``out_dir``; return the entry count per group."""
    groups = {**entries(), AUTOCAST: autocast.records(), SPARSE_MPS: kernels.sparse_records(DispatchKey.SparseMPS),
              SPARSE_CSR_CUDA: kernels.sparse_records(DispatchKey.SparseCsrCUDA),
              DEVICE_CHECKS: kernels.device_check_records()}
    write.write_files(Path(out_dir), torch_version(), groups, keep=(MPS_MESSAGES, CUDA_ALERTS))
    return {group: len(records) for group, records in groups.items()}
