"""The ``torchdevice`` command line: each subcommand lives in its own module.

A subcommand module exposes ``configure(parser)`` and ``run(args) -> int`` and imports heavy
dependencies (torch, libcst) only inside ``run``, so ``torchdevice --help`` is quick.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = {
    "run": ("torchdevice.cli.run", "run a Python program or a Jupyter notebook with torchdevice active"),
    "rewrite": ("torchdevice.cli.rewrite", "rewrite CUDA-specific source into device-agnostic PyTorch"),
    "check": ("torchdevice.cli.check", "say what will not run on the target, from the sources (nothing is run)"),
    "kernel": ("torchdevice.cli.kernel", "install, remove or list the Jupyter kernel that runs under the runtime"),
    "catalog": ("torchdevice.cli.catalog", "statistics and look-ups in the torch API catalog"),
    "doctor": ("torchdevice.cli.doctor", "what this machine offers and what the runtime would do"),
    "probe": ("torchdevice.cli.probe", "measure MPS's missing kernels and limits here against the tables"),
}


def parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The command-line parser; only the ``chosen`` subcommand's module is imported to configure it."""
    from torchdevice import __version__

    top = argparse.ArgumentParser(prog="torchdevice", description="Run CUDA-written PyTorch code anywhere.")
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).configure(command)
        command.set_defaults(module=module)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)
    try:
        code = importlib.import_module(args.module).run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
    except BrokenPipeError:
        # The reader went away (``torchdevice catalog stats | head``): end quietly, as POSIX tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code
