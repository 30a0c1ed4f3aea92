"""``install()`` after modules bound torch functions by name: the warning names the modules and the names."""

from __future__ import annotations

import sys

import pytest
import torch

import torchdevice

BOUND = "import torch\nfrom torch import zeros\nfrom torch.cuda import is_available as gpu_ok\nfrom torch import add\n"


@pytest.fixture
def bound_module(tmp_path, monkeypatch):
    """A user module that imported torch functions by name before torchdevice was installed."""
    (tmp_path / "td_user_model.py").write_text(BOUND)
    monkeypatch.syspath_prepend(str(tmp_path))
    import td_user_model

    yield td_user_model
    del sys.modules["td_user_model"]


def test_names_bound_before_install_are_named_in_a_warning(bound_module):
    with pytest.warns(UserWarning, match="installed after these modules imported torch functions by name") as warned:
        torchdevice.install("cpu")
    try:
        message = str(warned[0].message)
        assert "td_user_model: zeros (torch.zeros), gpu_ok (torch.cuda.is_available)" in message
        assert "add" not in message  # not replaced: it has no device to translate
        assert warned[0].filename == __file__  # points at the install() call
        assert bound_module.zeros is not torch.zeros and not bound_module.gpu_ok()  # why it matters
    finally:
        torchdevice.uninstall()


@pytest.mark.processes
def test_no_warning_when_nothing_was_bound_before(python):
    code = ("import warnings; warnings.simplefilter('error'); import torchdevice; torchdevice.install('cpu'); "
            "import torch; from torch import zeros; print(zeros(1, device='cuda').device)")
    done = python("-c", code)
    assert done.returncode == 0 and done.stdout.strip() == "cpu", done.stderr

