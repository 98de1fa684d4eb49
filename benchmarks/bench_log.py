"""Benchmark: `eagle3-nb log` on a server log of any size costs its head and tail only.

Goal (#24): a 1 GB log read and explained in under 5 s and 200 MB. The anchor measured in the
same run is reading the same file once end to end (`wc -c`-like, 8 MB blocks, nothing kept):
what any reader that looks at every byte pays at least.

The log is SPARSE: a vLLM banner and arguments at the head, the crash at the tail, and the
middle a hole of the chosen size (`truncate`), so no gigabyte is written; a sparse region reads
as zero bytes, which is what the end-to-end anchor reads too. Each measurement runs in a fresh
interpreter; peak RSS comes from wait4's ru_maxrss.

    python benchmarks/bench_log.py [--sizes-gb 0.1 1 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = ("INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.34.0\n"
        "INFO 12-01 10:00:00 [utils.py:1] non-default args: {'model': 'meta-llama/Llama-3.1-8B"
        "-Instruct', 'speculative_config': {'method': 'eagle3', 'model': '/ckpt/draft', "
        "'num_speculative_tokens': 3}, 'tensor_parallel_size': 8}\n")
TAIL = ("\nERROR 12-01 11:00:00 [core.py:1] EngineCore failed to start.\n"
        "Traceback (most recent call last):\n"
        '  File "/x/vllm/model_executor/models/llama_eagle3.py", line 433, in load_weights\n'
        "    loader.load_weights(weights)\n"
        "ValueError: There is no module or parameter named 'draft_model' in "
        "Eagle3LlamaForCausalLM.\n")

KIT = ("import sys, time; t = time.perf_counter()\n"
       "from eagle3_nb.checks.log import check_log\n"
       "r = check_log(sys.argv[1]); assert r.findings, r\n"
       "print((time.perf_counter() - t) * 1000)")
ANCHOR = ("import sys, time; t = time.perf_counter()\n"
          "with open(sys.argv[1], 'rb') as f:\n"
          "    while f.read(8 << 20): pass\n"
          "print((time.perf_counter() - t) * 1000)")


def sparse_log(folder: Path, size: int) -> Path:
    path = folder / f"server-{size}.log"
    with path.open("wb") as handle:
        handle.write(HEAD.encode())
        handle.truncate(size - len(TAIL))
        handle.seek(size - len(TAIL))
        handle.write(TAIL.encode())
    return path


def run(code: str, path: Path) -> tuple[float, float]:
    """(op ms, peak RSS MB) of CODE in a fresh interpreter (its ru_maxrss from wait4)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"failed: {code[:40]}...")
        out.seek(0)
        return float(out.read().strip().splitlines()[-1]), usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-gb", type=float, nargs="+", default=[0.1, 1.0, 4.0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'log':>8} {'eagle3-nb log ms':>17} {'peak MB':>8} {'read-all ms':>12} "
          f"{'ratio':>6}  goal: < 5000 ms and < 200 MB at 1 GB")
    with tempfile.TemporaryDirectory() as tmp:
        for gb in args.sizes_gb:
            path = sparse_log(Path(tmp), int(gb * (1 << 30)))
            kit = min(run(KIT, path) for _ in range(args.repeat))
            anchor = min(run(ANCHOR, path)[0] for _ in range(args.repeat))
            print(f"{gb:>6g}GB {kit[0]:>17.0f} {kit[1]:>8.0f} {anchor:>12.0f} "
                  f"{kit[0] / anchor:>6.2f}")
            path.unlink()
    print("peak MB is the child's maximum resident set (ru_maxrss), interpreter included; the "
          "kit reads 20 MB of the log whatever its size")


if __name__ == "__main__":
    main()
