"""The tables of a torch release the catalog does not know (newer than the newest known), made at its first use.

``python -m codegen.unknown OUT [--messages-of VERSION]`` is run by the runtime (:mod:`torchdevice.releases`) with the
installed torch. What that torch itself holds is scanned as ``make catalog`` scans the catalog's release: its entry
points, ``native_functions.yaml``'s kernels, ``autocast_mode.h``'s lists, its sparse kernels. What only its other
wheels hold (MPS's messages, CUDA's determinism alerts) is a known release's, the newest by default. The chain
``make generate`` runs for a known release (:mod:`codegen.releases`) runs on that view, against the generated package
installed beside it; OUT gets the release's changes, a Python module of ``VERSION``, ``CHANGES``, ``DIFFERS`` and
``ROWS`` read as ``torchdevice_generated.releases`` is read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

from codegen.files import CUDA_ALERTS, MPS_MESSAGES, SCANNED_DIR
from codegen.releases import Release, changes_of
from codegen.render import render_all
from codegen.scan import cuda_alerts, mps_messages, scan, torch_version
from codegen.scan import release as scanned_release
from codegen.schema import CatalogError
from torchdevice import atomic


def changes(messages_of: str) -> Release:
    """The installed torch's changes, its other wheels' facts those of known release ``messages_of``."""
    import torchdevice_generated

    package = Path(torchdevice_generated.__file__).parent
    files = {f"torchdevice_generated/{p.name}": p.read_text(encoding="utf-8")
             for p in package.iterdir() if p.suffix in (".py", ".jsonl")}
    with tempfile.TemporaryDirectory(prefix=f"torch-{torch_version()}-") as tmp:
        out = Path(tmp)
        scan(out)
        if messages_of == torchdevice_generated.TORCH_VERSION:  # the catalog's own release
            _copy(SCANNED_DIR, out)
        else:
            with scanned_release.view(messages_of) as theirs:
                _copy(theirs, out)
        return changes_of(torch_version(), files, render_all, scanned=out)


def _copy(source: Path, out: Path) -> None:
    """``source``'s MPS messages and CUDA alerts into ``out``, as the installed release's (their wheels named)."""
    with (source / f"{MPS_MESSAGES}.yaml").open(encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    text = mps_messages.render(torch_version(), doc["wheel"], doc["strings"])
    (out / f"{MPS_MESSAGES}.yaml").write_text(text, encoding="utf-8")
    with (source / f"{CUDA_ALERTS}.yaml").open(encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    calls = [(c["library"], c["function"], c["alert"]) for c in doc["calls"]]
    (out / f"{CUDA_ALERTS}.yaml").write_text(cuda_alerts.render(torch_version(), doc["wheel"], calls),
                                              encoding="utf-8")


def module_text(release: Release, messages_of: str) -> str:
    """The Python module :mod:`torchdevice.releases` reads ``release``'s changes from."""
    lines = [f'"""torch {release.version}\'s tables, made at its first use by torchdevice (`python -m codegen.unknown`'
             f'): its own files scanned, MPS\'s messages and CUDA\'s alerts torch {messages_of}\'s."""', ""]
    lines += [f"from {module} import {name}" for module, name in release.imports]
    lines += ["", f"VERSION = {release.version!r}", f"MESSAGES_OF = {messages_of!r}", "CHANGES = {"]
    lines += [f"    {key!r}: {text}," for key, text in release.changes]
    lines += ["}", f"DIFFERS = {release.differs!r}", "ROWS = {"]
    lines += [f"    {name!r}: {row!r}," for name, row in release.rows]
    return "\n".join([*lines, "}", ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen.unknown", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the module to write")
    parser.add_argument("--messages-of", metavar="VERSION", help="the known release whose MPS messages and CUDA "
                        "alerts are used (default: the newest known)")
    args = parser.parse_args(argv)
    from torchdevice_generated.releases import KNOWN

    messages_of = args.messages_of or KNOWN[-1]
    try:
        release = changes(messages_of)
    except (CatalogError, scanned_release.ReleaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic.write(args.out, module_text(release, messages_of))
    return 0


if __name__ == "__main__":
    sys.exit(main())
