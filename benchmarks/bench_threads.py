"""Benchmark: `eagle3-nb accept` on the bundled pair at default settings, with the threads the kit
chooses against OMP_NUM_THREADS=1 and against every core, measured in the same run (the aim:
the kit's own choice within 1.1x of the best). Each command runs in a fresh process, as a user
runs it; wall seconds are the median of --repeats runs. A script that prints a table, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "eagle3_nb" / "data_samples"


def seconds(extra_env: dict[str, str], extra_args: list[str], repeats: int) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "EAGLE3NB_THREADS")}
    env.update(extra_env)
    command = [sys.executable, "-m", "eagle3_nb.cli", "accept", str(SAMPLES / "drafts" / "good"),
               "--target", str(SAMPLES / "target"), "--json", *extra_args]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True, cwd=REPO)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    seconds({}, [], 1)  # warm-up: the first run reads every import from disk
    rows = [("the kit's choice (no setting)", seconds({}, [], args.repeats)),
            ("OMP_NUM_THREADS=1", seconds({"OMP_NUM_THREADS": "1"}, [], args.repeats)),
            (f"--threads {cores} (every core)", seconds({}, ["--threads", str(cores)],
                                                         args.repeats))]
    best = min(s for _, s in rows)
    print(f"eagle3-nb accept, bundled pair, default settings, {cores} cores, median of "
          f"{args.repeats}")
    print(f"{'threads':<32} {'wall s':>8} {'x best':>7}")
    for name, s in rows:
        print(f"{name:<32} {s:>8.2f} {s / best:>6.2f}x")


if __name__ == "__main__":
    main()
