"""Load ``catalog/`` into the model: scanned entries, overlays and measured status, validated on load."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from codegen import model, schema
from codegen.model import Catalog, Entry, Kernels, Status
from codegen.overlays import LISTS, PER_ENTRY, OverlaySet
from codegen.schema import CatalogError

ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = ROOT / "catalog"

_ENTRY_KEYS = ("name", "kind", "module", "category", "signatures", "device_params", "aten", "kernels", "policy")


def load(catalog_dir: Path = CATALOG_DIR) -> Catalog:
    """Read the scanned catalog, apply overlays and measured status; raise CatalogError on bad data."""
    version, entries = _load_scanned(catalog_dir / "scanned")
    known = {e.name for e in entries}
    overlays: dict[str, dict[str, Any]] = {}
    for stem, cls in PER_ENTRY.items():
        path = catalog_dir / "overlays" / f"{stem}.yaml"
        if path.exists():
            for name, record in load_per_entry(path, cls, known).items():
                overlays.setdefault(name, {})[stem] = record
    status = _load_status(catalog_dir / "status.yaml", known)
    rules: tuple[Any, ...] = ()
    for stem, cls in LISTS.items():
        path = catalog_dir / "overlays" / f"{stem}.yaml"
        if path.exists():
            rules += load_list(path, cls, known)
    entries = [
        dataclasses.replace(e, overlays=OverlaySet(**overlays[e.name]) if e.name in overlays else e.overlays,
                            status=status.get(e.name, e.status))
        for e in entries
    ]
    return Catalog(torch_version=version, entries=tuple(entries), rewrite=rules)


def _load_scanned(directory: Path) -> tuple[str, list[Entry]]:
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise CatalogError(directory, None, None, "no scanned catalog files; run `make catalog`")
    version = None
    entries: list[Entry] = []
    seen: dict[str, Path] = {}
    for path in files:
        try:
            doc = yaml.load(path.read_text(encoding="utf-8"), Loader=schema.FastLoader)
        except yaml.YAMLError as exc:
            raise CatalogError(path, None, None, f"invalid YAML: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise CatalogError(path, None, None, "expected a mapping with 'torch_version' and 'entries'")
        if version not in (None, doc.get("torch_version")):
            raise CatalogError(path, None, None, f"torch_version {doc.get('torch_version')} differs from {version}")
        version = str(doc.get("torch_version"))
        for raw in doc["entries"]:
            entry = _entry(raw, path)
            if entry.name in seen:
                raise CatalogError(path, None, entry.name, f"duplicate entry (also in {seen[entry.name].name})")
            seen[entry.name] = path
            entries.append(entry)
    return version or "", entries


def _entry(raw: Any, path: Path) -> Entry:
    name = raw.get("name") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or tuple(raw) != _ENTRY_KEYS:
        raise CatalogError(path, None, name, f"scanned entry must have exactly the keys {', '.join(_ENTRY_KEYS)}")
    kernels = raw["kernels"]
    if raw["kind"] not in model.KINDS or raw["policy"] not in model.POLICIES:
        raise CatalogError(path, None, name, f"bad kind {raw['kind']!r} or policy {raw['policy']!r}")
    if not isinstance(kernels, dict) or set(kernels) != set(model.BACKENDS) or not all(
        v in model.KERNEL_STATUSES for v in kernels.values()
    ):
        raise CatalogError(path, None, name, f"bad kernels {kernels!r}")
    return Entry(
        name=raw["name"],
        kind=raw["kind"],
        module=raw["module"],
        category=raw["category"],
        signatures=tuple(raw["signatures"]),
        device_params=tuple(raw["device_params"]),
        aten=tuple(raw["aten"]),
        kernels=Kernels(**kernels),
        scanned_policy=raw["policy"],
    )


def load_per_entry(path: Path, cls: type, known: set[str]) -> dict[str, Any]:
    """Load an overlay mapping ``torch name -> record`` of ``cls``; names must be catalog entries."""
    root = schema.compose(path)
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise CatalogError(path, schema.line_of(root), None, "expected a mapping from torch names to records")
    records: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for key_node, value_node in root.value:
        name, line = key_node.value, schema.line_of(key_node)
        if name in records:
            raise CatalogError(path, line, name, f"duplicate entry (first at line {lines[name]})")
        if name not in known:
            raise CatalogError(path, line, name, "unknown torch name: not in the scanned catalog")
        records[name], lines[name] = schema.build(cls, value_node, path, name), line
    return records


def load_list(path: Path, cls: type, known: set[str]) -> tuple[Any, ...]:
    """Load an overlay list of ``cls`` records; each record's ``name`` is unique, its torch names known."""
    root = schema.compose(path)
    if root is None:
        return ()
    if not isinstance(root, yaml.SequenceNode):
        raise CatalogError(path, schema.line_of(root), None, "expected a list of records")
    records: list[Any] = []
    lines: dict[str, int | None] = {}
    for node in root.value:
        record = schema.build(cls, node, path)
        line = schema.line_of(node)
        if record.name in lines:
            raise CatalogError(path, line, record.name, f"duplicate entry (first at line {lines[record.name]})")
        for name in record.torch_names():
            if name not in known:
                raise CatalogError(path, line, record.name, f"unknown torch name {name!r}: not in the scanned catalog")
        lines[record.name] = line
        records.append(record)
    return tuple(records)


def _load_status(path: Path, known: set[str]) -> dict[str, Status]:
    """Measured status written by ``make status``: ``{name: {resolves: pass, cpu: pass, mlx: fail}}``."""
    if not path.exists():
        return {}
    raw = yaml.load(path.read_text(encoding="utf-8"), Loader=schema.Loader) or {}
    out: dict[str, Status] = {}
    for name, fields in raw.items():
        if name not in known:
            continue  # an entry that left the catalog since the last measurement
        try:
            out[name] = Status(**fields)
        except TypeError as exc:
            raise CatalogError(path, None, name, str(exc)) from None
    return out
