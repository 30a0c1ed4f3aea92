"""The one way to run an aten call on the host (``torchdevice.device.host_call``), through a way that copies: each
tensor reaches the kernel once per call, ``out=self`` runs in place, what the op wrote is written back into the
caller's tensors (resized where the kernel resized them) and nothing else is, arguments returned are the caller's
own tensors, new results are placed by the way, and the device's name becomes the host."""

from __future__ import annotations

import torch

from torchdevice.device.host_call import Way, call

aten = torch.ops.aten


class Copying(Way):
    """The caller's tensors reach the host as copies (the fallback engine's way with a device's tensors)."""

    devices = ("cuda",)

    def __init__(self) -> None:
        super().__init__()
        self.made: list[torch.Tensor] = []
        self.placed_results: list[torch.Tensor] = []

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        host = x.clone()
        self.made.append(host)
        self.own[id(host)] = x
        self.copies.append((x, host))
        return host

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        self.placed_results.append(x)
        return x


def test_a_tensor_given_twice_is_one_tensor_to_the_kernel_and_in_place_returns_the_callers():
    x = torch.tensor([1.0, 2.0])
    way = Copying()
    result = call(aten.add_.Tensor, (x, x), {}, way)
    assert len(way.made) == 1  # one host copy for both arguments
    assert result is x and x.tolist() == [2.0, 4.0]  # written back, and the caller's own tensor returned


def test_out_self_runs_as_the_in_place_overload():
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([10.0, 20.0])
    way = Copying()
    result = call(aten.add.out, (x, y), {"out": x}, way)
    assert result is x and x.tolist() == [11.0, 22.0]
    assert len(way.made) == 2 and way.placed_results == []  # x given as self and out: one copy, no new result


def test_what_the_op_wrote_is_written_back_resized_and_nothing_else_is():
    x, y, out = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 2.0, 2.0]), torch.empty(0)
    versions = (x._version, y._version)
    result = call(aten.mul.out, (x, y), {"out": out}, Copying())
    assert result is out and out.tolist() == [2.0, 4.0, 6.0]  # resized from 0 elements, as the kernel resized it
    assert (x._version, y._version) == versions  # the inputs' copies were not written back


def test_new_results_are_placed_by_the_way_and_structures_kept():
    x = torch.tensor([[3.0, 1.0], [2.0, 4.0]])
    way = Copying()
    values, indices = call(aten.max.dim, (x, 1), {}, way)
    assert values.tolist() == [3.0, 4.0] and indices.tolist() == [0, 1]
    assert [id(t) for t in way.placed_results] == [id(values), id(indices)]
    assert isinstance(call(aten.max.dim, (x, 1), {}, Copying()), tuple)


def test_the_devices_name_becomes_the_host():
    way = Copying()
    made = call(aten.ones.default, ([2],), {"device": torch.device("cuda")}, way)
    assert made.device.type == "cpu" and made.tolist() == [1.0, 1.0] and way.placed_results == [made]
