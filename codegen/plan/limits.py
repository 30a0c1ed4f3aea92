"""MPS's limits as the runtime reads them (``limits_table.py.j2``): one :class:`~torchdevice.records.limits.LimitRow`
per record of ``catalog/overlays/limits.yaml``, overloads by their dispatcher names, the condition in normal form.
"""

from __future__ import annotations

from codegen.model import Catalog
from torchdevice.records import aten_entry, dispatcher_name
from torchdevice.records.limits import ANY, LimitRow, ProbeRow


def rows(catalog: Catalog) -> tuple[LimitRow, ...]:
    out = []
    for record in catalog.limits:
        rule = record.rule
        overloads = (ANY,) if rule.generic else tuple(dispatcher_name(aten_entry(o)) for o in rule.overloads)
        probe_op = rule.probe.op or ("" if rule.generic else rule.overloads[0])
        probe = ProbeRow(dispatcher_name(aten_entry(probe_op)) if probe_op else "", tuple(rule.probe.args),
                         dict(rule.probe.kwargs), rule.probe.skip)
        out.append(LimitRow(
            name=record.name, overloads=overloads, when=rule.clauses(),
            raises="" if rule.raises == "none" else rule.raises, message=rule.pieces, reason=rule.reason,
            why=rule.why, source=rule.source, cuda_runs=rule.cuda_runs, routed=rule.routed, cpu=rule.cpu,
            instead=dispatcher_name(aten_entry(rule.instead)) if rule.instead else "", probe=probe,
        ))
    return tuple(out)
