"""The toolchain's files, each named once: the folders (under the repository, or under the toolchain an installed
wheel carries as ``torchdevice/_toolchain``), and the scanned files that hold facts rather than catalog entries."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = ROOT / "catalog"
SCANNED_DIR = CATALOG_DIR / "scanned"
RELEASES_DIR = CATALOG_DIR / "releases"
"""Each other known release's own facts, as what differs from ``SCANNED_DIR`` (``make catalog-release``)."""
STATUS_FILE = CATALOG_DIR / "status.yaml"
TEMPLATES = ROOT / "codegen" / "templates"
GENERATED = ROOT / "generated"
WHEELS = ROOT / ".cache" / "wheels"
"""torch's wheels, downloaded (never installed) to be scanned: the macOS wheel's messages, the CUDA wheel's alerts."""

AUTOCAST = "autocast"
"""The scanned file of CUDA's autocast policy (``autocast_mode.h``): facts about aten overloads, not entries."""
MPS_MESSAGES = "mps_messages"
"""The scanned file of MPS's messages, from torch's macOS wheel (not the installed torch): the texts limits.yaml's
messages are made of."""
CUDA_ALERTS = "cuda_alerts"
"""The scanned file of CUDA's determinism alerts, from torch's CUDA wheel: the calls cuda_kernels.yaml curates."""
SPARSE_MPS = "sparse_mps"
"""The scanned file of the overloads MPS has a sparse COO kernel of: facts about aten overloads, not entries."""
SPARSE_CSR_CUDA = "sparse_csr_cuda"
"""The scanned file of the overloads CUDA has a sparse compressed kernel of (``SparseCsrCUDA``)."""
DEVICE_CHECKS = "cuda_device_checks"
"""The scanned file of the overloads whose CUDA kernel wrapper checks its tensors' devices (``RegisterCUDA.cpp``)."""
FACTS = (AUTOCAST, SPARSE_MPS, SPARSE_CSR_CUDA, DEVICE_CHECKS)
"""The scanned files of facts about aten overloads rather than catalog entries."""
