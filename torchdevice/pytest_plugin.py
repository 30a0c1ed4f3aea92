"""The pytest plugin: ``pytest --torchdevice[=TARGET]`` runs a test suite as on a machine with an NVIDIA GPU.

Off unless asked (``--torchdevice``, or ``torchdevice = TARGET`` in the ini file). It installs the runtime before
the initial ``conftest.py`` files are imported and before collection, so module-level ``torch.cuda`` queries see the
target; pytest-xdist workers install it too (they get the same arguments and ini file, and the controller's
``TORCHDEVICE_INSTALL``). A test marked ``torchdevice_native`` runs with the runtime uninstalled. At the end, the
report of every process of the session (:mod:`torchdevice.reporting.program`) is summed up in the terminal summary,
and written to ``--torchdevice-report FILE`` where asked.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER = "torchdevice_native"
OFF = ("", "0", "false", "no", "off")
DEFAULT = ("1", "true", "yes", "on", "default")
"""Ini values that turn the plugin off, or on with the default target."""
OPTIONS = (("devices", "N", "emulate N CUDA devices (default: $TORCHDEVICE_DEVICES, else 1)"),
           ("gpu", "NAME", "cuda-sim: the card simulated (T4, A100-40GB, H100 ...; default: $TORCHDEVICE_GPU, "
                            "else T4)"),
           ("gpu_memory", "SIZE", "cuda-sim: each GPU's memory (16GB, 1GiB ...)"),
           ("report", "FILE", "write the session's report (every process) to FILE: JSON, or a page when it ends in "
                              ".html"))


@dataclass
class Settings:
    """What the session installs: ``install()``'s arguments, resolved and checked."""

    target: str
    devices: int | None
    gpu: str | None
    gpu_memory: str | None
    report: str | None
    warned: list[str]
    started_report: bool = False


_settings: Settings | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchdevice", "torchdevice: run CUDA tests without a GPU")
    group.addoption("--torchdevice", nargs="?", const="default", default=None, metavar="TARGET",
                    help="install torchdevice for the session: \"cuda\" means TARGET (cpu, mps, mps-sim, cuda-sim; "
                         "default: the target `torchdevice run` chooses here). Ini: torchdevice = TARGET")
    for name, metavar, text in OPTIONS:
        group.addoption(f"--torchdevice-{name.replace('_', '-')}", dest=f"torchdevice_{name}", metavar=metavar,
                        help=f"{text}. Ini: torchdevice_{name}")
    parser.addini("torchdevice", "torchdevice's target for the session (default: the plugin is off; true: the "
                  "default target)", default="")
    for name, _, text in OPTIONS:
        parser.addini(f"torchdevice_{name}", text, default="")


def _setting(config: pytest.Config, name: str) -> str | None:
    """The command line's value of option ``name``, else the ini file's (None: neither); a path (the report) from
    the ini file is relative to its directory."""
    value = getattr(config.known_args_namespace, name, None)
    if value is not None:
        return str(value)
    value = str(config.getini(name)).strip() or None
    if value is not None and name == "torchdevice_report" and config.inipath is not None:
        return str(config.inipath.parent / value)
    return value


def _said(caught: list[warnings.WarningMessage]) -> list[str]:
    return [f"{w.category.__name__}: {str(w.message).removeprefix('torchdevice: ')}" for w in caught]


def _resolve(config: pytest.Config) -> Settings | None:
    """The session's settings, None when the plugin is off; a bad one is a :class:`pytest.UsageError`."""
    asked = _setting(config, "torchdevice")
    if asked is None or asked.lower() in OFF:
        return None
    from torchdevice.runtime.activation import resolve_for

    devices, gpu, gpu_memory, report = (_setting(config, f"torchdevice_{name}") for name, _, _ in OPTIONS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            target = resolve_for(None if asked.lower() in DEFAULT else asked, gpu, gpu_memory,
                                 "--torchdevice-gpu and --torchdevice-gpu-memory")
            if devices is not None and not (devices.isdigit() and int(devices) >= 1):
                raise ValueError(f"--torchdevice-devices must be a positive whole number, not {devices!r}")
        except (ValueError, RuntimeError) as exc:
            why = str(exc).removeprefix("torchdevice: ")
            if why.startswith("unknown target"):
                why += " (write --torchdevice=TARGET, or test paths before --torchdevice)"
            raise pytest.UsageError(f"torchdevice: {why}") from None
    return Settings(target, None if devices is None else int(devices), gpu, gpu_memory, report, _said(caught))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Install before the initial conftest.py files are imported (and so before collection)."""
    global _settings
    settings = _resolve(early_config)
    if settings is None:
        return
    import torchdevice

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torchdevice.install(settings.target, devices=settings.devices, gpu=settings.gpu,
                            gpu_memory=settings.gpu_memory)
    settings.warned += _said(caught)
    _settings = settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: run this test with torchdevice uninstalled (plain torch, as "
                                       "without the plugin), reinstalled after it")
    if _settings is None:
        return
    from torchdevice.reporting import program

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: its entry goes into the controller's report
        if workerinput.get("torchdevice_report"):
            program.join(workerinput["torchdevice_report"])
        return
    if _settings.report is not None or program.directory() is None:  # else part of a report already being made
        program.start(None if _settings.report is None else Path(config.invocation_params.dir, _settings.report))
        _settings.started_report = True
        from torchdevice.runtime import processes

        processes.join_report()  # processes started from now on (xdist workers too) add their entries
    for text in _settings.warned:
        program.note_warning(text)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: tell each worker where its report entry goes (also with ``TORCHDEVICE_INSTALL=0``)."""
    if _settings is not None:
        from torchdevice.reporting import program

        node.workerinput["torchdevice_report"] = program.directory()


def pytest_report_header(config: pytest.Config) -> list[str]:
    if _settings is None:
        return []
    from torchdevice.runtime import activation

    options = activation.options() or {}
    card = options.get("gpu")
    lines = [f"torchdevice: \"cuda\" is {_settings.target}" + (f" ({card.name})" if card is not None else "")
             + f", {options.get('devices', 1)} device{'s' if options.get('devices', 1) != 1 else ''}"]
    return lines + [f"torchdevice: {text}" for text in _settings.warned]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, None]:
    """A test marked ``torchdevice_native`` runs (setup, call, teardown) with the runtime uninstalled, however it was
    installed (the plugin, ``torchdevice run -m pytest``); the current CUDA device is the same after it."""
    installed = "torchdevice.runtime.activation" in sys.modules and item.get_closest_marker(MARKER) is not None
    if installed:
        from torchdevice.runtime import activation

        options = activation.options()
        installed = options is not None and options["target"] != "cuda"  # passing through: nothing to undo
    if not installed:
        yield
        return
    import torch

    current = torch.cuda.current_device()
    activation.uninstall()
    try:
        yield
    finally:
        activation.install(**options)  # type: ignore[arg-type]
        torch.cuda.set_device(current)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The report's summary: the target, the calls redirected, the fallbacks (the slowest first), warnings."""
    if _settings is None or hasattr(terminalreporter.config, "workerinput"):
        return
    from torchdevice.reporting import program

    terminalreporter.write_sep("=", "torchdevice")

    def say(text: str) -> None:
        for line in text.splitlines():
            terminalreporter.write_line(line)

    if _settings.started_report:
        program.finish(say)
    else:
        say(program.summary(program.so_far(), ""))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Finish the report (where no terminal summary did) and uninstall."""
    global _settings
    if _settings is None:
        return
    if _settings.started_report and not hasattr(config, "workerinput"):
        from torchdevice.reporting import program

        program.finish()
    import torchdevice

    torchdevice.uninstall()
    _settings = None
