"""CUDA's kernel table as the simulated GPU reads it (``cuda_kernels_table.py.j2``).

- **missing on CUDA**: overloads whose entry (``torch.ops.aten.<op>.<overload>``) has no CUDA kernel while the CPU
  has one, its own or a CompositeExplicitAutograd one (``kernels.cuda == "missing"``, ``kernels.cpu`` ``native``
  or ``composite``): a GPU refuses them, the CPU runs them;
- **sparse compressed on CUDA**: overloads CUDA has a ``SparseCsrCUDA`` kernel of (``catalog/scanned/
  sparse_csr_cuda.yaml``): a GPU's sparse CSR/CSC/BSR/BSC tensors run them, and no other;
- **device checks**: overloads whose CUDA kernel wrapper checks its tensors' devices (``catalog/scanned/
  cuda_device_checks.yaml``), by dispatcher name: the wrapper's name and the arguments it checks, in its order;
- **alerts**: one :class:`~torchdevice.records.determinism.AlertRow` per record of
  ``catalog/overlays/cuda_kernels.yaml``, overloads by their dispatcher names, the condition in normal form.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.model import Catalog
from torchdevice.records import aten_entry, dispatcher_name, is_aten_entry
from torchdevice.records.determinism import AlertRow

CPU_RUNS = ("native", "composite")


@dataclass(frozen=True)
class CudaKernels:
    missing_on_cuda: tuple[str, ...] = ()
    """Dispatcher names, sorted."""
    alerts: tuple[AlertRow, ...] = ()
    sparse_csr: tuple[str, ...] = ()
    """Dispatcher names, sorted."""
    device_checks: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """``(dispatcher name, wrapper, arguments)``, sorted."""

    @classmethod
    def of(cls, catalog: Catalog) -> CudaKernels:
        missing = sorted(dispatcher_name(e.name) for e in catalog.entries
                         if e.kind == "op_overload" and is_aten_entry(e.name)
                         and e.kernels.cuda == "missing" and e.kernels.cpu in CPU_RUNS)
        alerts = tuple(
            AlertRow(name=r.name, overloads=tuple(dispatcher_name(aten_entry(o)) for o in r.rule.overloads),
                     alert=r.rule.alert, when=r.rule.clauses(), source=r.rule.source, note=r.rule.note)
            for r in catalog.alerts)
        sparse = sorted(dispatcher_name(aten_entry(name)) for name in catalog.sparse_csr_cuda)
        checks = sorted((dispatcher_name(aten_entry(c.name)), c.wrapper, c.arguments) for c in catalog.device_checks)
        return cls(tuple(missing), alerts, tuple(sparse), tuple(checks))
