"""``%load_ext torchdevice``: the runtime installed in a running IPython or Jupyter session, and the ``%torchdevice``
line magic.

Loading installs the runtime (target: ``$TORCHDEVICE_TARGET``, else the best device here), as
``torchdevice.install()`` does: cells run after it see ``"cuda"`` as the target, and so does every process the
session starts from then on. Torch functions that earlier cells bound by name (``from torch import zeros``) keep
the originals, as ``install()`` warns. Unloading (``%unload_ext torchdevice``) uninstalls.

``%torchdevice report``: what the runtime did in this session so far (the summary of a report, this process
alone); ``%torchdevice install [TARGET]``: (re)install, for another target; ``%torchdevice uninstall``.
"""

from __future__ import annotations

from typing import Any

USAGE = "usage: %torchdevice report | install [TARGET] | uninstall"


def load(ipython: Any) -> None:
    from torchdevice.runtime import activation

    device = activation.install()
    ipython.register_magic_function(magic, magic_kind="line", magic_name="torchdevice")
    _say(device)


def unload(ipython: Any) -> None:
    from torchdevice.runtime import activation

    activation.uninstall()


def magic(line: str) -> None:
    """``%torchdevice report | install [TARGET] | uninstall``."""
    from torchdevice.reporting import counts, program
    from torchdevice.runtime import activation

    words = line.split()
    if words == ["report"]:
        counts.flush()
        print(program.summary(program.so_far(), ""))
    elif words[:1] == ["install"] and len(words) <= 2:
        _say(activation.install(words[1] if len(words) == 2 else None))
    elif words == ["uninstall"]:
        activation.uninstall()
        print("torchdevice: uninstalled")
    else:
        print(USAGE)


def _say(device: Any) -> None:
    """What ``"cuda"`` means now, and the target's name where the device does not say it (``cuda:0 (cuda-sim)``)."""
    from torchdevice.runtime import activation

    name = (activation.options() or {}).get("target", device.type)
    print(f"torchdevice: \"cuda\" means {device}{f' ({name})' if name != device.type else ''} in this session")
