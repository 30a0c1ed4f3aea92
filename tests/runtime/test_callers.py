"""Who is told what (``torchdevice.callers``): every answer point of ``callers.POINTS``, asked by every kind of
caller, on every target where the point exists. Code of torch's modules and of the packages told the truth gets the
machine as it is; the program and the libraries it uses get the target's CUDA; torch's modules told as the program is
get the program's answers. The asker is the first frame past torchdevice's own and past frames that only pass a call
on (``functools``, ``contextlib``, torch's ``no_grad()`` as a decorator), however many sit between; a wrapper of
another module is that module's code asking. The callers are real frames of functions whose module is the one named
(compiled with that ``__name__``), as a torch module's or a library's would be."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.distributed as dist

import torchdevice
from torchdevice import callers
from torchdevice.device.aten import cpp_device, true_device
from torchdevice.patching import Patcher

TARGETS = ("cpu", "mps-sim", "cuda-sim")


@dataclass
class Scene:
    """A target installed, with what the points are asked about: a tensor the program put on ``"cuda"`` and the
    default process group, asked for NCCL."""

    target: str
    x: torch.Tensor


@pytest.fixture(scope="module", params=TARGETS)
def scene(request: pytest.FixtureRequest) -> Iterator[Scene]:
    with torchdevice.installed(request.param):
        dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
        try:
            yield Scene(request.param, torch.ones(2, device="cuda"))
        finally:
            dist.destroy_process_group()


@dataclass(frozen=True)
class Probe:
    """How a point is asked (``gate(*args)``), on which targets it exists, and what the program and the truthful
    audiences are told there."""

    gate: Callable[[Scene], tuple[Callable[..., Any], tuple[Any, ...]]]
    program: Callable[[Scene], Any]
    truth: Callable[[Scene], Any]
    targets: tuple[str, ...] = TARGETS


def _shown(s: Scene) -> torch.device:
    return torch.device("mps:0" if s.target == "mps-sim" else "cuda:0")


PROBES = {
    # the machine has no CUDA: torch's own code is told so (the runtime gets out of the way where CUDA is there)
    "cuda.is_available": Probe(lambda s: (torch.cuda.is_available, ()), lambda s: True, lambda s: False),
    "cuda.is_initialized": Probe(lambda s: (torch.cuda.is_initialized, ()), lambda s: True, lambda s: False),
    "cuda.device_count": Probe(lambda s: (torch.cuda.device_count, ()), lambda s: 1, lambda s: 0),
    "accelerator.current_accelerator": Probe(lambda s: (torch.accelerator.current_accelerator, ()),
                                             lambda s: torch.device("cuda"), lambda s: None),
    "Tensor.is_cuda": Probe(lambda s: (getattr, (s.x, "is_cuda")), lambda s: True,
                            lambda s: torch._C.TensorBase.is_cuda.__get__(s.x)),
    "Tensor.is_cpu": Probe(lambda s: (getattr, (s.x, "is_cpu")), lambda s: False,
                           lambda s: torch._C.TensorBase.is_cpu.__get__(s.x)),
    "Tensor.device": Probe(lambda s: (getattr, (s.x, "device")), _shown, lambda s: cpp_device(s.x),
                           ("mps-sim", "cuda-sim")),
    "UntypedStorage.device": Probe(lambda s: (getattr, (s.x.untyped_storage(), "device")), _shown,
                                   lambda s: torch._C.StorageBase.device.__get__(s.x.untyped_storage()),
                                   ("mps-sim", "cuda-sim")),
    "_C._get_accelerator": Probe(lambda s: (torch._C._get_accelerator, ()), lambda s: torch.device("cuda"),
                                 lambda s: torch.device(torch._C._get_privateuse1_backend_name()), ("cuda-sim",)),
    "distributed.backend": Probe(lambda s: (dist.get_backend, ()), lambda s: "nccl",
                                 lambda s: dist.distributed_c10d._world.pg_map[dist.group.WORLD][0]),
}


def _function(module: str, source: str, **names: Any) -> Callable[..., Any]:
    """The function ``source`` defines (its first ``def``), compiled as code of module ``module``."""
    scope = {"__name__": module, "functools": functools, "contextlib": contextlib, "torch": torch, **names}
    exec(compile(source, f"<{module}>", "exec"), scope)
    return scope[source.partition("def ")[2].partition("(")[0]]


def decorator_of(module: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator whose wrapper is code of ``module``."""
    return _function(module, "def wrap(f):\n    @functools.wraps(f)\n    def wrapper(*a, **k):\n"
                             "        return f(*a, **k)\n    return wrapper\n")


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


CALLERS = {
    # kind of caller: (module of the asking function, how it calls gate(*args), who is told: program or truth)
    "the program": ("__main__", "gate(*args)", "program"),
    "a library the program uses": ("mylab.train", "gate(*args)", "program"),
    "torch's own code": ("torch.nn.parallel.fake_internal", "gate(*args)", "truth"),
    "a package told the truth": ("bitsandbytes.functional", "gate(*args)", "truth"),
    "torch told as the program is": ("torch.random", "gate(*args)", "program"),
    "the program through its decorator": ("__main__", "decorator_of('__main__')(gate)(*args)", "program"),
    "the program through functools.partial": ("__main__", "functools.partial(gate, *args)()", "program"),
    "the program through a contextlib decorator": ("__main__", "_nothing()(gate)(*args)", "program"),
    "the program through torch's no_grad()": ("__main__", "torch.no_grad()(gate)(*args)", "program"),
    "the program through torchdevice's code": ("__main__", "decorator_of('torchdevice.x')(gate)(*args)", "program"),
    "torch through a torch-side wrapper": ("torch.nn.fake", "decorator_of('torch._fake')(gate)(*args)", "truth"),
    "torch through functools.partial": ("torch.nn.fake", "functools.partial(gate, *args)()", "truth"),
    "torch through torchdevice's code": ("torch.nn.fake", "decorator_of('torchdevice.x')(gate)(*args)", "truth"),
    "torch through the program's wrapper": ("torch.nn.fake", "decorator_of('mylab.helpers')(gate)(*args)",
                                            "program"),  # the program's code asks on torch's behalf
}


def asked(module: str, call: str, gate: Callable[..., Any], args: tuple[Any, ...] = ()) -> Any:
    """What a function of ``module`` is told when it calls ``gate(*args)`` as ``call`` says."""
    ask = _function(module, f"def ask():\n    return {call}\n", gate=gate, args=args, decorator_of=decorator_of,
                    _nothing=_nothing)
    return ask()


def test_every_point_is_probed():
    assert PROBES.keys() == callers.POINTS.keys()


@pytest.mark.parametrize("kind", CALLERS)
@pytest.mark.parametrize(("scene", "point"), [(t, p) for p, probe in PROBES.items() for t in probe.targets],
                         indirect=["scene"], scope="module")
def test_each_point_tells_each_kind_of_caller_its_own(scene, point, kind):
    probe = PROBES[point]
    module, call, told = CALLERS[kind]
    expected = probe.program(scene) if told == "program" else probe.truth(scene)
    assert asked(module, call, *probe.gate(scene)) == expected


def test_the_program_and_the_truth_differ_where_a_point_exists(scene):
    """Each probe tells two answers apart (``is_cpu`` only where the target's tensors are the host's)."""
    for point, probe in PROBES.items():
        if scene.target in probe.targets and not (point == "Tensor.is_cpu" and scene.target != "cpu"):
            assert probe.program(scene) != probe.truth(scene), point


def test_an_unregistered_point_is_an_error(scene):
    with pytest.raises(KeyError):
        callers.told_the_truth("cuda.not_a_point")


def test_modules_told_as_the_program_for_a_while_are_told_the_truth_again_after(scene):
    """Registrations change the verdicts already kept for the modules that asked."""
    ask = torch.cuda.is_available
    assert asked("torch.nn.parallel.fake_internal", "gate()", ask) is False
    patcher = Patcher()
    callers.tell_as_program(patcher, ("torch.nn.parallel.fake_internal",))
    assert asked("torch.nn.parallel.fake_internal", "gate()", ask) is True
    assert asked("torch.nn.parallel.other", "gate()", ask) is False
    patcher.restore()
    assert asked("torch.nn.parallel.fake_internal", "gate()", ask) is False


def test_a_package_told_as_the_program_brings_every_module_below_it(scene):
    """``packages``: the package's modules are read from its folder (nothing imported)."""
    patcher = Patcher()
    callers.tell_as_program(patcher, packages=("torch.distributed.elastic",))
    try:
        assert asked("torch.distributed.elastic.agent.server.api", "gate()", torch.cuda.is_available) is True
        assert asked("torch.distributed.elastic", "gate()", torch.cuda.is_available) is True
        assert asked("torch.distributed.other", "gate()", torch.cuda.is_available) is False
    finally:
        patcher.restore()
    assert asked("torch.distributed.elastic.agent.server.api", "gate()", torch.cuda.is_available) is False


@pytest.mark.parametrize("module", ["deepspeed", "deepspeed.accelerator.real_accelerator"])
def test_deepspeed_is_told_the_truth_but_on_a_simulated_gpu(scene, module):
    """On ``cuda-sim`` its CUDA accelerator runs (``torchdevice.simulated.deepspeed_gpu``) where DeepSpeed is
    installed; elsewhere it takes the machine's."""
    installed = importlib.util.find_spec("deepspeed") is not None
    assert asked(module, "gate()", torch.cuda.is_available) is (scene.target == "cuda-sim" and installed)


def test_torchdevice_code_asks_the_truth_of_a_device_through_true_device(scene):
    """torchdevice's own code called by the program: ``.device`` answers the program, ``true_device`` what torch's
    code is told (a FakeTensor's own ``device`` included)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake = FakeTensorMode().from_tensor(scene.x)
    for tensor in (scene.x, torch.nn.Parameter(scene.x), fake):
        truth = asked("torch.nn.fake", "gate(*args)", getattr, (tensor, "device"))
        assert asked("torchdevice.x", "gate(*args)", true_device, (tensor,)) == truth
    assert true_device(scene.x) == cpp_device(scene.x)
