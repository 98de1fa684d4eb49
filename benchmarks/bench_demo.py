"""`make demo`'s report, against the same notebooks run the way reports ran before #23.

Goal (#26): `make demo` in 20 s or less. The report runs every notebook in one kernel
(report.kernel.ReportKernel), and notebooks 00 and 01 show the inspection it made once. The
anchor, in the same run and in-process (no interpreter start), runs the same steps with their
parameters, each notebook in a kernel of its own and rendered to HTML (report.run.run_step
without a kernel), where every notebook opens the draft, imports torch and loads the target
itself.

    .venv/bin/python benchmarks/bench_demo.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eagle3_nb.report.options import ReportOptions, resolve_options
from eagle3_nb.report.run import demo_engines, run_step
from eagle3_nb.report.steps import plan_steps
from eagle3_nb.io.resources import samples_dir


def shared_kernel(work: Path) -> float:
    """`eagle3-nb demo` as `make demo` runs it, interpreter start included."""
    t0 = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("eagle3-nb")), "demo", "--out",
                    str(work / "demo")], check=True, capture_output=True)
    return time.perf_counter() - t0


def kernel_per_notebook(work: Path) -> float:
    samples = samples_dir()
    opts = resolve_options(ReportOptions(
        checkpoint=samples / "drafts" / "layers0-flat", out=work / "anchor",
        target=samples / "target", engines=demo_engines(), overwrite=True, fail_on="never"))
    t0 = time.perf_counter()
    for step in plan_steps(opts):
        run_step(step, work / "anchor")
        if step.status != "ok":
            sys.exit(f"anchor: {step.name} {step.status}: {step.error}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for _ in range(args.repeat):  # interleaved, so both see the same load
        work = Path(tempfile.mkdtemp(prefix="bench-demo-"))
        try:
            rows.append((shared_kernel(work), kernel_per_notebook(work), os.getloadavg()[0]))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("| run | demo (one kernel) s | anchor (a kernel per notebook) s | ratio | load |")
    print("|---|---|---|---|---|")
    for i, (demo, anchor, load) in enumerate(rows, 1):
        print(f"| {i} | {demo:.1f} | {anchor:.1f} | {demo / anchor:.2f} | {load:.1f} |")


if __name__ == "__main__":
    main()
