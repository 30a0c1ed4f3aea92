"""``python -m codegen.scan [OUT_DIR]``: write the scanned catalog and print counts per file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from codegen.scan import SCANNED_DIR, scan


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0]) if argv else SCANNED_DIR
    start = time.perf_counter()
    counts = scan(out_dir)
    width = max(map(len, counts)) + len(".yaml")
    for group, count in counts.items():
        print(f"{group + '.yaml':<{width}} {count:>6}")
    print(f"{'total':<{width}} {sum(counts.values()):>6}  ({time.perf_counter() - start:.1f} s, {out_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
