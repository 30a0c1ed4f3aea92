"""Files written whole or not at all: a complete temporary file beside the target, renamed over it.

A reader sees the old content or the new one, never a part; a writer that fails or is interrupted
leaves the old file and no temporary file behind (only a killed one may leave a hidden
``.NAME.*.tmp``, which no later write minds).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path


def write(path: Path, data: bytes | str) -> None:
    """Replace ``path``'s content with ``data`` (``str``: UTF-8), keeping its mode; a new file gets the
    mode ``open()`` gives one."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
