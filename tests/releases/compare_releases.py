"""The table of torch releases in docs/releases.md: for each release's environment (``make venv-torch TORCH=...``; the
project's own ``.venv`` for its release), the example GPT under ``torchdevice run`` on each target against its
CPU-written twin run plainly, ``torchrun --nproc_per_node=2`` of the DDP example, and what ``rewrite`` and ``check``
print. One JSON line per release:

    python tests/releases/compare_releases.py 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
from dist_jobs import free_port  # noqa: E402  (the suite's support modules, as pytest's pythonpath has them)

EXAMPLES = ROOT / "examples"
OWN = "2.13.0"
"""The release of the project's own environment (constraints.txt)."""


def python(release: str) -> str:
    return str(ROOT / (".venv" if release == OWN else f".venv-torch/{release}-cuda") / "bin" / "python")


def run(command: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    return subprocess.run(command, cwd=ROOT, env={**environment, "OMP_NUM_THREADS": "1", **env}, capture_output=True,
                          text=True, timeout=600)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def compare(release: str) -> dict[str, object]:
    py = python(release)
    native = [float(x) for x in run([py, str(EXAMPLES / "gpt_train_cpu.py"), "--steps", "4"]).stdout.split()]
    out: dict[str, object] = {"torch": release, "native_losses": native}
    for target in ("default", "cpu", "mps-sim"):
        env = {} if target == "default" else {"TORCHDEVICE_TARGET": target}
        done = run([py, "-m", "torchdevice", "run", str(EXAMPLES / "gpt_train.py"), "--steps", "4"], **env)
        losses = [float(x) for x in done.stdout.split()] if done.returncode == 0 else []
        out[f"{target}_max_loss_difference"] = (max(abs(a - b) for a, b in zip(losses, native, strict=True))
                                                if losses else done.stderr[-300:])
    ddp = run([py, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}", "-m",
               "torchdevice", "run", str(EXAMPLES / "ddp_train.py"), "--global-batch", "8"], TORCHDEVICE_TARGET="cpu")
    out["torchrun_ddp"] = ddp.returncode == 0 and "optimizer steps on 2 process" in ddp.stdout
    out["rewrite_diff"] = digest(run([py, "-m", "torchdevice", "rewrite", str(EXAMPLES / "gpt_train.py"),
                                      "--diff"]).stdout)
    out["check_json"] = digest(run([py, "-m", "torchdevice", "check", str(EXAMPLES), "--json", "--target",
                                    "mps"]).stdout)
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or [OWN]:
        print(json.dumps(compare(name)), flush=True)
