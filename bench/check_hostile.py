"""How long `autoscaler check` takes to refuse hostile files, and how much memory it uses.

    .venv/bin/python bench/check_hostile.py

Runs ``python -m autoscaler check`` in a child on each input of ``tests/config/hostile.py``
(/dev/zero, a FIFO, arrays nested 100,000 deep, a 100 MB file, ...) and on a small valid
config as the baseline and a 4 MiB file broken everywhere (checking stops after 100
problems), and prints per input the exit code, the wall time and the child's
peak RSS. The tests in ``tests/config/test_check_hostile.py`` assert the bounds.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.config import hostile


def main() -> int:
    inputs = {"valid (baseline)": hostile.valid, **hostile.HOSTILE,
              "4 MiB broken": hostile.broken_everywhere}
    print(f"{'input':<18} {'exit':>4} {'seconds':>8} {'peak RSS':>10}")
    with tempfile.TemporaryDirectory() as directory:
        for index, (name, make) in enumerate(inputs.items()):
            where = Path(directory) / str(index)
            where.mkdir()
            run = hostile.run_check([str(make(where))], timeout=60)
            print(f"{name:<18} {run.code:>4} {run.seconds:>8.2f} "
                  f"{run.max_rss_kib / 1024:>7.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
