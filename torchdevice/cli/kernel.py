"""``torchdevice kernel install [--target T] [--devices N] [--name NAME] [--user | --sys-prefix | --prefix DIR]``,
``torchdevice kernel uninstall [--name NAME]``, ``torchdevice kernel list``: the Jupyter kernel that runs notebooks
under the runtime (:mod:`torchdevice.notebooks.kernelspec`)."""

from __future__ import annotations

import argparse
import re
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    from torchdevice.cli.run import _positive

    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = actions.add_parser("install", help="register the kernel \"Python 3 (torchdevice)\" with Jupyter")
    install.add_argument("--target", metavar="{cpu,mps,mps-sim,cuda-sim,cuda}",
                         help="where \"cuda\" goes in the kernel (default: $TORCHDEVICE_TARGET where the kernel "
                              "starts, else the best device there)")
    install.add_argument("--devices", type=_positive, metavar="N", help="emulate N CUDA devices (default: 1)")
    install.add_argument("--name", default="torchdevice", help="the kernelspec's name (default: torchdevice)")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user (the default)")
    where.add_argument("--sys-prefix", action="store_true", help="in this Python environment (sys.prefix)")
    where.add_argument("--prefix", metavar="DIR", help="under DIR/share/jupyter/kernels")
    uninstall = actions.add_parser("uninstall", help="remove a kernelspec of torchdevice's")
    uninstall.add_argument("--name", default="torchdevice", help="its name (default: torchdevice)")
    actions.add_parser("list", help="the kernelspecs of torchdevice's that Jupyter finds")


def run(args: argparse.Namespace) -> int:
    from torchdevice.notebooks import MissingExtra, kernelspec

    try:
        if args.action == "install":
            from torchdevice.device.target import TARGETS

            if args.target is not None and args.target not in TARGETS:
                print(f"torchdevice kernel: error: unknown target {args.target!r}; expected one of "
                      f"{', '.join(TARGETS)}", file=sys.stderr)
                return 2
            if not re.fullmatch(r"[A-Za-z0-9._-]+", args.name):
                print(f"torchdevice kernel: error: {args.name!r}: a kernel's name is made of letters, digits, "
                      "'.', '_' and '-'", file=sys.stderr)
                return 2
            prefix = sys.prefix if args.sys_prefix else args.prefix
            directory = kernelspec.install(args.name, args.target, args.devices, prefix is None, prefix)
            print(f"installed the kernel {args.name!r} in {directory}")
        elif args.action == "uninstall":
            print(f"removed the kernel {args.name!r} from {kernelspec.uninstall(args.name)}")
        else:
            for kernel in kernelspec.installed():
                print(f"{kernel.name}  {kernel.display_name}  TORCHDEVICE_INSTALL={kernel.install}  {kernel.directory}")
    except MissingExtra as exc:
        print(f"torchdevice kernel: {exc}", file=sys.stderr)
        return 1
    except (LookupError, OSError) as exc:
        print(f"torchdevice kernel: error: {exc}", file=sys.stderr)
        return 1
    return 0
