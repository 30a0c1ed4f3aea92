"""Load ``catalog/`` into the model: scanned entries, measured status and overlays, every field validated.

Errors are :class:`~codegen.schema.CatalogError`\\ s naming ``file:line (entry)`` and what is wrong.
The scanned files (5,000+ entries) are read with libyaml's fast loader and validated as plain
data; the line of a bad field is looked up in the text only when there is an error to report.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import yaml

from codegen import schema
from codegen.files import (
    AUTOCAST,
    CATALOG_DIR,
    CUDA_ALERTS,
    DEVICE_CHECKS,
    FACTS,
    MPS_MESSAGES,
    SPARSE_CSR_CUDA,
    SPARSE_MPS,
)
from codegen.model import (
    MEASURED,
    AlertRecord,
    AutocastRule,
    Catalog,
    DeviceCheck,
    Entry,
    Kernels,
    KernelStatus,
    Kind,
    LimitRecord,
    Measured,
    MlxRecord,
    Pattern,
    StandinRecord,
    Status,
)
from codegen.overlays.cuda import CudaRule
from codegen.overlays.cuda_kernels import AlertRule
from codegen.overlays.devices import DeviceRule
from codegen.overlays.gpus import GpuRule
from codegen.overlays.limits import LimitRule
from codegen.overlays.mlx import MlxOp
from codegen.overlays.packages import MODULE, PackageRule
from codegen.overlays.standins import StandinRule
from codegen.scan import release as scanned_release
from codegen.schema import CatalogError
from codegen.signatures import parse
from torchdevice.records import BACKENDS, PACKAGE_DIR, aten_entry, aten_op, is_aten_entry
from torchdevice.records.rewrite import RewriteRule

SCANNED_KEYS = ("name", "kind", "module", "signatures", "device_params", "aten", "kernels")
PER_ENTRY: dict[str, type] = {"cuda": CudaRule, "devices": DeviceRule}
"""Overlay files mapping torch names to records: stem -> record class, attached as ``Entry.<stem>``."""
GLOBS = ("devices",)
"""Overlays whose keys may be globs (``torch.nn.*``) as well as names."""


def load(catalog_dir: Path = CATALOG_DIR, release: str | None = None, scanned: Path | None = None) -> Catalog:
    """Read the scanned catalog, apply measured status and overlays; raise CatalogError on bad data.

    The overlays are written for every known release: a record may name an entry only another release has
    (``catalog/releases/``). With ``release`` (``"2.10.0"``), that release's view: its scanned files, with the
    overlays. An overlay record that does not hold there (an overload it lacks, a message its macOS wheel lacks, an
    alert its CUDA wheel does not raise) is named in ``Catalog.differs`` (see :class:`_View`). With ``scanned`` too,
    the release's scanned files are that folder's (a release the catalog does not know: :mod:`codegen.unknown`)."""
    others = _other_releases(catalog_dir / "releases")
    if release is None:
        return _load(catalog_dir, catalog_dir / "scanned", others, strict=True)
    _, own = _load_scanned(catalog_dir / "scanned")
    if scanned is not None:
        return _load(catalog_dir, scanned, [*others, *own], strict=False)
    try:
        with scanned_release.view(release, catalog_dir / "scanned", catalog_dir / "releases") as scanned:
            return _load(catalog_dir, scanned, [*others, *own], strict=False)
    except scanned_release.ReleaseError as exc:
        raise CatalogError(catalog_dir / "releases" / f"{release}.yaml", None, None, str(exc)) from None


def _other_releases(directory: Path) -> list[Entry]:
    """The entries only other known releases have (those their release files add), oldest release first."""
    found = []
    for version in scanned_release.known(directory):
        path = directory / f"{version}.yaml"
        for change in scanned_release.load(version, directory)["files"].values():
            for i, raw in enumerate(change.get("added", [])):
                if isinstance(raw, dict) and "kind" in raw:
                    found.append(_Scanned(path, "", i, raw).entry())
    return found


def _load(catalog_dir: Path, scanned: Path, others: list[Entry], strict: bool) -> Catalog:
    """The catalog of the scanned files in ``scanned``, its overlays checked against its entries and ``others`` (the
    other known releases'); ``strict``: the catalog's own release (see :class:`_View`)."""
    version, entries = _load_scanned(scanned)
    here = {e.name: e for e in entries}
    view = _View(strict=strict)
    status = _load_status(catalog_dir / "status.yaml", here)
    known = {**{e.name: e for e in others}, **here}
    attached: dict[str, dict[str, Any]] = {}
    patterns: tuple[Pattern, ...] = ()
    for stem, cls in PER_ENTRY.items():
        path = catalog_dir / "overlays" / f"{stem}.yaml"
        if not path.exists():
            continue
        records, globs = load_per_entry(path, cls, known, globs=stem in GLOBS)
        for name, record in records.items():
            attached.setdefault(name, {})[stem] = record
        if stem == "devices":
            patterns = globs
    path = catalog_dir / "overlays" / "rewrite.yaml"
    rules = load_list(path, RewriteRule, known) if path.exists() else ()
    path = catalog_dir / "overlays" / "mlx.yaml"
    mlx = load_mlx(path, known) if path.exists() else ()
    path = catalog_dir / "overlays" / "standins.yaml"
    standins = load_standins(path) if path.exists() else ()
    autocast = load_autocast(scanned / f"{AUTOCAST}.yaml", version, here)
    sparse_mps = load_sparse_kernels(scanned / f"{SPARSE_MPS}.yaml", version, here)
    sparse_csr_cuda = load_sparse_kernels(scanned / f"{SPARSE_CSR_CUDA}.yaml", version, here)
    device_checks = load_device_checks(scanned / f"{DEVICE_CHECKS}.yaml", version, here)
    path = catalog_dir / "overlays" / "packages.yaml"
    packages = load_packages(path, known) if path.exists() else ()
    path = catalog_dir / "overlays" / "gpus.yaml"
    gpus = load_gpus(path) if path.exists() else ()
    path = catalog_dir / "overlays" / "limits.yaml"
    limits = load_limits(path, known, scanned / f"{MPS_MESSAGES}.yaml", version, view) if path.exists() else ()
    path = catalog_dir / "overlays" / "cuda_kernels.yaml"
    alerts = load_alerts(path, known, scanned / f"{CUDA_ALERTS}.yaml", version, view) if path.exists() else ()
    if others:  # records naming what only another release has are this view's left-outs
        ops = {aten_op(name) for name in here if is_aten_entry(name)}
        lacks = lambda names: [n for n in names if aten_entry(n) not in here]  # noqa: E731
        mlx = view.present(mlx, "mlx.yaml", lambda r: lacks([r.key]) if "." in r.key else [r.key] * (r.key not in ops))
        limits = view.present(limits, "limits.yaml", lambda r: lacks(() if r.rule.generic else r.rule.overloads))
        alerts = view.present(alerts, "cuda_kernels.yaml", lambda r: lacks(r.rule.overloads))
    entries = [dataclasses.replace(e, status=status.get(e.name, e.status), **attached.get(e.name, {}))
               for e in entries]
    return Catalog(torch_version=version, entries=tuple(entries), device_patterns=patterns, mlx=mlx, rewrite=rules,
                   standins=standins, autocast=autocast, sparse_mps=sparse_mps,
                   sparse_csr_cuda=sparse_csr_cuda, device_checks=device_checks, packages=packages, gpus=gpus,
                   limits=limits,
                   alerts=alerts, differs=tuple(view.differs))


@dataclasses.dataclass
class _View:
    """How overlay records are judged: strictly (the catalog's own release: a record that does not hold is an error),
    or in another release's view, where what does not hold there is named in ``differs``: a record naming an entry
    the release lacks is left out; one whose words (a message piece, an alert's name) the release's wheels lack is
    kept as written, since a device that refuses more than it does is safer than one that refuses less."""

    strict: bool = True
    differs: list[str] = dataclasses.field(default_factory=list)

    @contextmanager
    def record(self) -> Iterator[None]:
        """Around one overlay record's checks: its error raised, or (another release's view) the record left out."""
        try:
            yield
        except CatalogError as exc:
            if self.strict:
                raise
            self.differs.append(f"left out: {exc.short()}")

    def words(self, error: CatalogError) -> None:
        """A record's words are not in the release's wheels: raised, or (another release's view) noted."""
        if self.strict:
            raise error
        self.differs.append(f"kept as written: {error.short()}")

    def present(self, records: tuple[Any, ...], file: str, absent: Callable[[Any], list[str]]) -> tuple[Any, ...]:
        """``records`` but those naming aten ops or overloads this release lacks (``absent``), which are left out."""
        kept = []
        for record in records:
            if missing := absent(record):
                key = getattr(record, "key", None) or record.name
                self.differs.append(f"left out: {file} ({key}): this release lacks {', '.join(missing)}")
            else:
                kept.append(record)
        return tuple(kept)


# -- scanned -----------------------------------------------------------------------------------------


def _load_scanned(directory: Path) -> tuple[str, list[Entry]]:
    files = sorted(p for p in directory.glob("*.yaml") if p.stem not in (*FACTS, MPS_MESSAGES, CUDA_ALERTS))
    if not files:
        raise CatalogError(directory, None, None, "no scanned catalog files; run `make catalog`")
    version = None
    entries: list[Entry] = []
    seen: dict[str, Path] = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            doc = yaml.load(text, Loader=schema.FastLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise CatalogError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list) or "torch_version" not in doc:
            raise CatalogError(path, 1, None, "expected a mapping with 'torch_version', 'group' and 'entries'")
        if version not in (None, str(doc["torch_version"])):
            raise CatalogError(path, 1, None, f"torch_version {doc['torch_version']} differs from {version}")
        version = str(doc["torch_version"])
        for i, raw in enumerate(doc["entries"]):
            entry = _Scanned(path, text, i, raw).entry()
            if entry.name in seen:
                raise CatalogError(path, _line_of_entry(text, i), entry.name,
                                   f"duplicate entry (also in {seen[entry.name].name})")
            seen[entry.name] = path
            entries.append(entry)
    return version or "", entries


@dataclasses.dataclass
class _Scanned:
    """One raw scanned entry being validated; errors name the line of the field at fault."""

    path: Path
    text: str
    index: int
    raw: Any

    def fail(self, message: str, key: str | None = None, item: int | None = None) -> CatalogError:
        """The error at ``key`` of this entry (at its ``item``-th element, for a block list)."""
        name = self.raw.get("name") if isinstance(self.raw, dict) else None
        line = _line_of_entry(self.text, self.index)
        if key is not None and line is not None:
            line = _line_of_key(self.text, line, key)
            if item is not None and self.text.splitlines()[line - 1].rstrip().endswith(":"):
                line += 1 + item
        return CatalogError(self.path, line, name if isinstance(name, str) else None, message)

    def entry(self) -> Entry:
        raw = self.raw
        if not isinstance(raw, dict):
            raise self.fail(f"expected a mapping with the keys {', '.join(SCANNED_KEYS)}")
        if set(raw) != set(SCANNED_KEYS):
            extra, missing = sorted(set(raw) - set(SCANNED_KEYS)), sorted(set(SCANNED_KEYS) - set(raw))
            raise self.fail(f"keys must be exactly {', '.join(SCANNED_KEYS)} (unknown: {extra}, missing: {missing})")
        kernels = raw["kernels"]
        if not isinstance(kernels, dict) or set(kernels) != set(BACKENDS):
            raise self.fail(f"kernels: expected a mapping of {', '.join(BACKENDS)}, got {kernels!r}", "kernels")
        for backend, value in kernels.items():
            self.choice("kernels", value, get_args(KernelStatus), f"kernels.{backend}")
        signatures = []
        for i, text in enumerate(self.strings("signatures")):
            try:
                signatures.append(parse(text))
            except ValueError as exc:
                raise self.fail(f"signatures: {exc}", "signatures", i) from None
        return Entry(
            name=self.string("name"),
            kind=self.choice("kind", raw["kind"], get_args(Kind)),
            module=self.string("module"),
            signatures=tuple(signatures),
            device_params=self.strings("device_params"),
            aten=self.strings("aten"),
            kernels=Kernels(**kernels),
        )

    def string(self, key: str) -> str:
        value = self.raw[key]
        if not isinstance(value, str) or not value:
            raise self.fail(f"{key}: expected a non-empty string, got {value!r}", key)
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{key}: expected a list of strings, got {value!r}", key)
        return tuple(value)

    def choice(self, key: str, value: Any, allowed: tuple[str, ...], label: str | None = None) -> Any:
        if value not in allowed:
            raise self.fail(f"{label or key}: {value!r} is not one of {', '.join(allowed)}", key)
        return value


def _line_of_entry(text: str, index: int) -> int | None:
    """The line of the ``index``-th ``- name:`` record of a scanned file (scanned files have one per entry)."""
    found = -1
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("- "):
            found += 1
            if found == index:
                return number
    return None


def _line_of_key(text: str, start: int, key: str) -> int:
    """The line of ``key`` within the record starting at line ``start`` (the record's line if absent)."""
    lines = text.splitlines()
    for number in range(start, len(lines) + 1):
        line = lines[number - 1]
        if number > start and line.startswith("- "):
            break
        if line.lstrip("- ").startswith(f"{key}:"):
            return number
    return start


def _facts(path: Path, version: str) -> list[yaml.Node]:
    """The records of a scanned file of facts about aten overloads, scanned from the same torch (none without the
    file)."""
    return _scanned_list(path, version, "entries", "'torch_version', 'group' and 'entries'") if path.exists() else []


def _scanned_list(path: Path, version: str, field: str, expected: str) -> list[yaml.Node]:
    """The list ``field`` of a scanned file of this torch ``version`` (``expected``: its fields, for the error)."""
    root = schema.compose(path)
    fields = {k.value: v for k, v in root.value} if isinstance(root, yaml.MappingNode) else {}
    node = fields.get(field)
    if not isinstance(node, yaml.SequenceNode) or "torch_version" not in fields:
        raise CatalogError(path, 1, None, f"expected a mapping with {expected}")
    if fields["torch_version"].value != version:
        raise CatalogError(path, 1, None, f"torch_version {fields['torch_version'].value} differs from {version}")
    return list(node.value)


def load_sparse_kernels(path: Path, version: str, known: dict[str, Entry]) -> tuple[str, ...]:
    """The overloads a backend has a sparse kernel of (``sparse_mps.yaml``, ``sparse_csr_cuda.yaml``), as
    ``torch.ops.aten`` names them: ``{name: add.Tensor}``, one per aten overload of the scanned catalog."""
    names: dict[str, int] = {}
    for item in _facts(path, version):
        named = {k.value: v.value for k, v in item.value} if isinstance(item, yaml.MappingNode) else {}
        line = schema.line_of(item)
        name = named.get("name")
        if set(named) != {"name"} or not isinstance(name, str):
            raise CatalogError(path, line, None, "expected a record {name: <aten overload>}")
        if name in names:
            raise CatalogError(path, line, name, f"duplicate entry (first at line {names[name]})")
        if aten_entry(name) not in known:
            raise CatalogError(path, line, name, f"{name} is not an aten overload of the scanned catalog")
        names[name] = line
    return tuple(names)


def load_device_checks(path: Path, version: str, known: dict[str, Entry]) -> tuple[DeviceCheck, ...]:
    """The overloads whose CUDA kernel wrapper checks its tensors' devices (``cuda_device_checks.yaml``): ``{name:
    mm.default, wrapper: wrapper_CUDA_mm, arguments: [self, mat2]}``, one per aten overload of the scanned catalog,
    each argument one of its schema's."""
    checks: list[DeviceCheck] = []
    lines: dict[str, int] = {}
    for item in _facts(path, version):
        named = dict(item.value) if isinstance(item, yaml.MappingNode) else {}
        fields = {k.value: v for k, v in named.items()}
        line = schema.line_of(item)
        name, wrapper, arguments = (fields.get(k) for k in ("name", "wrapper", "arguments"))
        if (set(fields) != {"name", "wrapper", "arguments"} or not isinstance(name, yaml.ScalarNode)
                or not isinstance(wrapper, yaml.ScalarNode) or not isinstance(arguments, yaml.SequenceNode)
                or not all(isinstance(a, yaml.ScalarNode) for a in arguments.value)):
            raise CatalogError(path, line, None, "expected a record {name: <aten overload>, wrapper: <name>, "
                                                 "arguments: [<argument>, ...]}")
        if name.value in lines:
            raise CatalogError(path, line, name.value, f"duplicate entry (first at line {lines[name.value]})")
        entry = known.get(aten_entry(name.value))
        if entry is None:
            raise CatalogError(path, line, name.value, f"{name.value} is not an aten overload of the scanned catalog")
        given = tuple(a.value for a in arguments.value)
        params = _parameters(entry)
        unknown = [a for a in given if a not in params]
        if unknown:
            raise CatalogError(path, line, name.value, f"{', '.join(unknown)}: not an argument of {name.value} "
                                                       f"({', '.join(params)})")
        lines[name.value] = line
        checks.append(DeviceCheck(name.value, wrapper.value, given))
    return tuple(checks)


def _parameters(entry: Entry) -> tuple[str, ...]:
    """The argument names of an aten overload's entry (its one signature's)."""
    return tuple(p.name for p in entry.signatures[0].params) if entry.signatures else ()


def load_autocast(path: Path, version: str, known: dict[str, Entry]) -> tuple[AutocastRule, ...]:
    """CUDA's autocast policy: one record per aten overload of the scanned catalog, scanned from the same torch
    (none without the file)."""
    rules: list[AutocastRule] = []
    lines: dict[str, int] = {}
    for item in _facts(path, version):
        named = {k.value: v.value for k, v in item.value} if isinstance(item, yaml.MappingNode) else {}
        rule = schema.build(AutocastRule, item, path, named.get("name"))
        line = schema.line_of(item)
        if rule.name in lines:
            raise CatalogError(path, line, rule.name, f"duplicate entry (first at line {lines[rule.name]})")
        for name in filter(None, (rule.name, rule.redispatch)):
            if aten_entry(name) not in known:
                raise CatalogError(path, line, rule.name, f"{name} is not an aten overload of the scanned catalog")
        lines[rule.name] = line
        rules.append(rule)
    return tuple(rules)


# -- measured status ---------------------------------------------------------------------------------


def _load_status(path: Path, known: dict[str, Entry]) -> dict[str, Status]:
    """Measured status written by ``make status``: ``{name: {cpu: pass, mlx: fail}}``.

    Names no longer in the catalog are skipped (the next ``make status`` drops them)."""
    root = schema.compose(path) if path.exists() else None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise CatalogError(path, schema.line_of(root), None, "expected a mapping from entry names to measurements")
    out: dict[str, Status] = {}
    for key_node, value_node in root.value:
        name = key_node.value
        if name not in known:
            continue
        fields = {k.value: v for k, v in value_node.value} if isinstance(value_node, yaml.MappingNode) else None
        if fields is None:
            raise CatalogError(path, schema.line_of(value_node), name, f"expected a mapping of {', '.join(MEASURED)}")
        for field, node in fields.items():
            value = node.value if isinstance(node, yaml.ScalarNode) else None
            if field not in MEASURED:
                raise CatalogError(path, schema.line_of(node), name,
                                   f"unknown measurement {field!r}; expected {', '.join(MEASURED)}")
            if value not in get_args(Measured):
                raise CatalogError(path, schema.line_of(node), name, f"{field}: {value!r} is not pass or fail")
        out[name] = Status(**{field: node.value for field, node in fields.items()})
    return out


# -- overlays ----------------------------------------------------------------------------------------


def _keyed(path: Path, what: str) -> Iterator[tuple[str, int, yaml.Node]]:
    """``(key, line, value node)`` of an overlay that maps keys to records; duplicate keys are errors."""
    root = schema.compose(path)
    if root is None:
        return
    if not isinstance(root, yaml.MappingNode):
        raise CatalogError(path, schema.line_of(root), None, f"expected a mapping from {what} to records")
    lines: dict[str, int] = {}
    for key_node, value_node in root.value:
        key, line = str(key_node.value), schema.line_of(key_node)
        if key in lines:
            raise CatalogError(path, line, key, f"duplicate entry (first at line {lines[key]})")
        lines[key] = line
        yield key, line, value_node


def load_per_entry(path: Path, cls: type, known: dict[str, Entry],
                   globs: bool = False) -> tuple[dict[str, Any], tuple[Pattern, ...]]:
    """Records of an overlay mapping torch names (or, with ``globs``, glob patterns) to ``cls`` records."""
    records: dict[str, Any] = {}
    patterns: list[Pattern] = []
    aliases: list[tuple[str, int]] = []
    for name, line, node in _keyed(path, "torch names"):
        record = schema.build(cls, node, path, name)
        if globs and "*" in name:
            matcher = re.compile(fnmatch.translate(name))
            if not any(matcher.match(n) for n in known):
                raise CatalogError(path, line, name, "the pattern matches no torch name of the scanned catalog")
            patterns.append(Pattern(name, record, line))
        elif name not in known:
            raise CatalogError(path, line, name, "unknown torch name: not in the scanned catalog")
        else:
            records[name] = record
            if getattr(record, "same_as", ""):
                aliases.append((name, line))
    for name, line in aliases:
        records[name] = _same_as(path, line, name, records)
    return records, tuple(patterns)


def _same_as(path: Path, line: int, name: str, records: dict[str, Any]) -> Any:
    """The record of ``name`` that says ``same_as: OTHER``: OTHER's record, with ``name``'s own sample if it has one."""
    record = records[name]
    other = records.get(record.same_as)
    if other is None or other.same_as:
        raise CatalogError(path, line, name, f"same_as: {record.same_as!r} has no record of its own in this file")
    return dataclasses.replace(other, sample=record.sample or other.sample)


def load_mlx(path: Path, known: dict[str, Entry]) -> tuple[MlxRecord, ...]:
    """The MLX records, keyed by an aten op (``abs``) or overload (``max.dim``) of the scanned catalog."""
    ops = {aten_op(name) for name in known if is_aten_entry(name)}
    records: list[MlxRecord] = []
    for key, line, node in _keyed(path, "aten ops"):
        op, _, overload = key.partition(".")
        if (aten_entry(key) not in known) if overload else (op not in ops):
            raise CatalogError(path, line, key, "unknown aten op or overload: not in the scanned catalog")
        records.append(MlxRecord(key, schema.build(MlxOp, node, path, key), line))
    return tuple(records)


def load_packages(path: Path, known: dict[str, Entry]) -> tuple[tuple[str, PackageRule], ...]:
    """The packages that need CUDA or choose a CUDA backend, keyed by module name (``apex.normalization``); the
    probes of those told the truth are torch names of the catalog."""
    records = []
    for key, line, node in _keyed(path, "module names"):
        if not MODULE.fullmatch(key):
            raise CatalogError(path, line, key, "not a module name")
        rule = schema.build(PackageRule, node, path, key)
        for probe in rule.probes:
            if probe not in known:
                raise CatalogError(path, line, key, f"probe {probe!r}: unknown torch name, not in the scanned catalog")
        records.append((key, rule))
    return tuple(records)


def load_messages(path: Path, version: str) -> tuple[str, ...]:
    """The strings scanned from torch's macOS wheel (``catalog/scanned/mps_messages.yaml``)."""
    if not path.exists():
        raise CatalogError(path, None, None, "no scanned MPS messages; `make mps-messages` scans torch's macOS wheel")
    return tuple(str(node.value) for node in _scanned_list(path, version, "strings",
                                                            "'torch_version', 'wheel' and 'strings'"))


def load_limits(path: Path, known: dict[str, Entry], messages: Path, version: str,
                view: _View | None = None) -> tuple[LimitRecord, ...]:
    """MPS's limits: overloads of the scanned catalog, the arguments each clause reads parameters of every one of
    them, each literal piece of a message a string scanned from torch's macOS wheel (or part of one)."""
    scanned = "\0".join(load_messages(messages, version))
    records = []
    for key, line, node in _keyed(path, "limit names"):
        with (view or _View()).record():
            records.append(_limit(path, key, line, node, known, scanned, messages, version, view or _View()))
    return tuple(records)


def _limit(path: Path, key: str, line: int, node: yaml.Node, known: dict[str, Entry], scanned: str, messages: Path,
           version: str, view: _View) -> LimitRecord:
    """One limit of ``limits.yaml``, checked against the scanned catalog and the macOS wheel's strings."""
    rule = schema.build(LimitRule, node, path, key)
    overloads = () if rule.generic else rule.overloads
    for name in (*overloads, *filter(None, (rule.instead, rule.probe.op))):
        if aten_entry(name) not in known:
            raise CatalogError(path, line, key, f"{name}: not an aten overload of the scanned catalog")
    for name in overloads:
        params = {p.name for s in known[aten_entry(name)].signatures for p in s.params}
        missing = sorted(rule.arguments() - params)
        if missing:
            raise CatalogError(path, line, key, f"{name} has no argument {', '.join(missing)}")
    for piece in rule.pieces:
        if not (piece.startswith("{") and piece.endswith("}")) and piece not in scanned:
            view.words(CatalogError(path, line, key, f"message piece {piece!r} is none of the strings of torch "
                                    f"{version}'s macOS wheel ({messages.name})"))
            break
    return LimitRecord(key, rule, line)


def load_alert_calls(path: Path, version: str) -> dict[str, tuple[str, ...]]:
    """The calls of ``alertNotDeterministic`` scanned from torch's CUDA wheel: alert name -> the functions making it."""
    if not path.exists():
        raise CatalogError(path, None, None, "no scanned CUDA alerts; `make cuda-alerts` scans torch's CUDA wheel")
    calls: dict[str, tuple[str, ...]] = {}
    for node in _scanned_list(path, version, "calls", "'torch_version', 'wheel' and 'calls'"):
        named = {k.value: v.value for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}
        if set(named) != {"library", "function", "alert"}:
            raise CatalogError(path, schema.line_of(node), None, "expected a record {library, function, alert}")
        calls[named["alert"]] = (*calls.get(named["alert"], ()), named["function"])
    return calls


def _makes(function: str, made_by: str) -> bool:
    """Whether ``function`` (as a source names it) is the scanned ``made_by``: ``put_`` of ``at::native::put_``,
    ``avg_pool3d_backward_out_cuda`` of its structured kernel ``at::native::structured_avg_pool3d_backward_out_cuda::
    impl``, a template's name of its instances."""
    pattern = rf"(^|::)(structured_)?{re.escape(function)}(::impl|<.*>)?$"
    return re.search(pattern, made_by) is not None


def load_alerts(path: Path, known: dict[str, Entry], scanned: Path, version: str,
                view: _View | None = None) -> tuple[AlertRecord, ...]:
    """CUDA's determinism alerts: each a call scanned from torch's CUDA wheel (its name, made by the function its
    source names), on overloads of the scanned catalog, the arguments each clause reads parameters of every one."""
    calls = load_alert_calls(scanned, version)
    records = []
    for key, line, node in _keyed(path, "alert names"):
        with (view or _View()).record():
            records.append(_alert(path, key, line, node, known, calls, scanned, version, view or _View()))
    return tuple(records)


def _alert(path: Path, key: str, line: int, node: yaml.Node, known: dict[str, Entry],
           calls: dict[str, tuple[str, ...]], scanned: Path, version: str, view: _View) -> AlertRecord:
    """One alert of ``cuda_kernels.yaml``, checked against the scanned catalog and the CUDA wheel's calls."""
    rule = schema.build(AlertRule, node, path, key)
    function = rule.source.split()[-1]
    if rule.alert not in calls:
        view.words(CatalogError(path, line, key, f"alert {rule.alert!r}: no call of torch {version}'s CUDA wheel "
                                f"hands alertNotDeterministic that name ({scanned.name})"))
    elif not any(_makes(function, made_by) for made_by in calls[rule.alert]):
        view.words(CatalogError(path, line, key, f"source: {function} does not make the call; "
                                f"{', '.join(calls[rule.alert])} does"))
    for name in rule.overloads:
        entry = known.get(aten_entry(name))
        if entry is None or entry.kind != "op_overload":
            raise CatalogError(path, line, key, f"{name}: not an aten overload of the scanned catalog")
        params = {p.name for s in entry.signatures for p in s.params}
        missing = sorted(rule.arguments() - params)
        if missing:
            raise CatalogError(path, line, key, f"{name} has no argument {', '.join(missing)}")
    if len(set(rule.overloads)) != len(rule.overloads):
        raise CatalogError(path, line, key, "overloads: an overload is named twice")
    return AlertRecord(key, rule, line)


def load_list(path: Path, cls: type, known: dict[str, Entry]) -> tuple[Any, ...]:
    """Load an overlay list of ``cls`` records; each record's ``name`` is unique, its torch names known."""
    root = schema.compose(path)
    if root is None:
        return ()
    if not isinstance(root, yaml.SequenceNode):
        raise CatalogError(path, schema.line_of(root), None, "expected a list of records")
    records: list[Any] = []
    lines: dict[str, int | None] = {}
    codes: dict[str, str] = {}
    for node in root.value:
        named = dict((k.value, v.value) for k, v in node.value if isinstance(v, yaml.ScalarNode)) \
            if isinstance(node, yaml.MappingNode) else {}
        record = schema.build(cls, node, path, named.get("name"))
        line = schema.line_of(node)
        if record.name in lines:
            raise CatalogError(path, line, record.name, f"duplicate entry (first at line {lines[record.name]})")
        code = getattr(record, "code", None)
        if code is not None and code in codes:
            raise CatalogError(path, line, record.name, f"code {code} is also rule {codes[code]!r}'s")
        for name in record.torch_names():
            if name not in known:
                raise CatalogError(path, line, record.name, f"unknown torch name {name!r}: not in the scanned catalog")
        lines[record.name] = line
        if code is not None:
            codes[code] = record.name
        records.append(record)
    return tuple(records)


STANDIN_PACKAGES = PACKAGE_DIR / "standins" / "packages"


def load_gpus(path: Path) -> tuple[tuple[str, GpuRule], ...]:
    """The cards a simulated GPU can be, by ``--gpu`` name in file order; exactly one is the default."""
    cards = tuple((key, schema.build(GpuRule, node, path, key)) for key, _, node in _keyed(path, "card names"))
    defaults = [key for key, card in cards if card.default]
    if len(defaults) != 1:
        raise CatalogError(path, None, None, f"exactly one card is the default (default: true), not "
                                             f"{', '.join(defaults) or 'none'}")
    return cards


def load_standins(path: Path, packages_dir: Path = STANDIN_PACKAGES) -> tuple[StandinRecord, ...]:
    """The stand-in records: every name under a package record, every covered name defined by its stand-in
    module in ``packages_dir`` (read as source, not imported)."""
    records = [StandinRecord(key, schema.build(StandinRule, node, path, key), line)
               for key, line, node in _keyed(path, "names of stood-in packages")]
    packages = {r.name for r in records if r.rule.policy == "package"}
    for record in records:
        top = record.name.partition(".")[0]
        if record.rule.policy == "package" and "." in record.name:
            raise CatalogError(path, record.line, record.name, "a package record names a top-level package")
        if top not in packages:
            raise CatalogError(path, record.line, record.name, f"{top!r} is not a package of this file "
                               f"(declared: {', '.join(sorted(packages)) or 'none'})")
        if record.rule.policy == "standin":
            module, _, attr = record.name.rpartition(".")
            source = _standin_source(packages_dir, module)
            if source is None:
                raise CatalogError(path, record.line, record.name, f"no stand-in module {module} in {packages_dir}")
            if attr not in _defined(source):
                raise CatalogError(path, record.line, record.name, f"{source} does not define {attr}")
    return tuple(records)


def _standin_source(packages_dir: Path, module: str) -> Path | None:
    base = packages_dir.joinpath(*module.split("."))
    return next((p for p in (base / "__init__.py", base.with_suffix(".py")) if p.is_file()), None)


def _defined(source: Path) -> set[str]:
    """Top-level names a module defines or imports."""
    names: set[str] = set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names
