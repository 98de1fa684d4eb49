"""Benchmark: `eagle3_nb.stats.scan_stats` throughput against a plain sequential read.

Writes a real-sized Llama-3.1-8B EAGLE-3 draft (speculators layout with embed_tokens: H=4096,
I=14336, 32/8 heads, Vd=32000, Vt=128256, bf16, ~1.9 GB) to a temp dir, then measures, each in a
fresh subprocess (so peak memory is per measurement):

  plain read   every weight file read sequentially in 64 MB blocks (run first, twice, to warm
               the page cache: dropping the cache needs root, so every number here is warm)
  scan_stats   the whole checkpoint, budget unlimited, at several chunk sizes

Prints a table: GB, seconds (best of --repeat interleaved rounds), GB/s, peak RSS (VmHWM), ratio
to the plain read, and a noise probe (a fixed numpy loop timed every round).
This is a script that prints numbers, not a test: nothing here asserts a time.

    python benchmarks/bench_stats.py            # full size (~1.9 GB on disk, needs ~2.5 GB free)
    python benchmarks/bench_stats.py --small    # ~120 MB, same key set
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from math import prod
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

from draft_specs import draft_specs  # noqa: E402  (benchmarks/ is on sys.path)

FULL = dict(H=4096, I=14336, heads=32, kv_heads=8, Vd=32000, Vt=128256)
SMALL = dict(H=1024, I=3584, heads=8, kv_heads=2, Vd=8000, Vt=32064)
ITEMSIZE = {"BF16": 2, "I64": 8, "BOOL": 1}


def draft_tensors(H, I, heads, kv_heads, Vd, Vt):
    """A speculators-layout Llama EAGLE-3 draft with one decoder layer (the kit's schema)."""
    return draft_specs(H, I, heads, kv_heads, Vd, Vt)


def write_draft(root: Path, dims: dict, seed: int = 0) -> int:
    """Stream a valid safetensors file with random bf16 weights; returns the file size."""
    specs = draft_tensors(**dims)
    header, off = {}, 0
    for name, dtype, shape in specs:
        n = prod(shape) * ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # data section starts 8-byte aligned, as safetensors writes it
    rng = np.random.default_rng(seed)
    Vd, Vt = dims["Vd"], dims["Vt"]
    kept = np.sort(rng.choice(Vt, size=Vd, replace=False))
    path = root / "model.safetensors"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        for name, dtype, shape in specs:
            if dtype == "I64":
                fh.write((kept - np.arange(Vd)).astype("<i8").tobytes())
            elif dtype == "BOOL":
                mask = np.zeros(Vt, dtype=np.uint8)
                mask[kept] = 1
                fh.write(mask.tobytes())
            else:
                numel = prod(shape)
                norm = name.endswith("norm.weight")
                for start in range(0, numel, 1 << 24):
                    k = min(1 << 24, numel - start)
                    x = rng.standard_normal(k, dtype=np.float32)
                    x = 1.0 + 0.05 * x if norm else 0.02 * x
                    fh.write((x.view(np.uint32) >> 16).astype("<u2").tobytes())
    (root / "config.json").write_text(json.dumps({
        "architectures": ["Eagle3DraftModel"], "speculators_model_type": "eagle3",
        "draft_vocab_size": Vd, "target_hidden_size": dims["H"],
        "transformer_layer_config": {
            "model_type": "llama", "hidden_size": dims["H"], "intermediate_size": dims["I"],
            "num_attention_heads": dims["heads"], "num_key_value_heads": dims["kv_heads"],
            "num_hidden_layers": 1, "vocab_size": Vt, "rms_norm_eps": 1e-5}}))
    return path.stat().st_size


# Each measurement runs in a fresh interpreter and prints one JSON line.
PLAIN_READ = r"""
import json, sys, time
paths = sys.argv[1:]
buf = bytearray(64 << 20)
view = memoryview(buf)
t0 = time.perf_counter(); total = 0
for p in paths:
    with open(p, "rb", buffering=0) as fh:
        while (n := fh.readinto(view)):
            total += n
dt = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "bytes": total, "hwm_kb": int(hwm)}))
"""

SCAN = r"""
import json, sys, time
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.stats import scan_stats
ckpt = Checkpoint.open(sys.argv[1])
chunk = int(sys.argv[2])
t0 = time.perf_counter()
result = scan_stats(ckpt, budget_bytes=1 << 62, chunk_bytes=chunk)
dt = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "bytes": result.scanned_bytes, "hwm_kb": int(hwm),
                  "tensors": len(result.stats), "skipped": len(result.skipped)}))
"""


def run_child(code: str, *args) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode:
        sys.exit(f"measurement failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


NOISE = r"""
import json, time
import numpy as np
x = np.random.default_rng(0).standard_normal(1 << 20)
t0 = time.perf_counter()
for _ in range(100):
    x.sum(); np.dot(x, x)
print(json.dumps({"seconds": time.perf_counter() - t0, "bytes": 0, "hwm_kb": 0}))
"""


def interleaved(cases: list[tuple[str, str, tuple]], rounds: int) -> dict[str, dict]:
    """Run every case once per round, round after round, and keep each case's fastest run.

    Shared CPUs make single runs swing by several times; interleaving spreads the slow
    periods over all cases and the minimum is the least disturbed run.
    """
    best: dict[str, dict] = {}
    for _ in range(rounds):
        for label, code, args in cases:
            r = run_child(code, *args)
            old = best.get(label)
            if old is None or r["seconds"] < old["seconds"]:
                r["hwm_kb"] = max(r["hwm_kb"], old["hwm_kb"] if old else 0)
                r["all"] = (old or {}).get("all", []) + [r["seconds"]]
                best[label] = r
            else:
                old["hwm_kb"] = max(old["hwm_kb"], r["hwm_kb"])
                old["all"].append(r["seconds"])
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="scaled-down draft (~120 MB)")
    ap.add_argument("--dir", help="where to write the checkpoint (default: a temp dir in /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the written checkpoint")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (each case's best is shown)")
    ap.add_argument("--chunk-mb", type=float, nargs="+", default=[1, 4, 16],
                    help="scan_stats chunk sizes to try (MB; the default is 1)")
    args = ap.parse_args(argv)

    dims = SMALL if args.small else FULL
    need = sum(prod(s) * ITEMSIZE[d] for _, d, s in draft_tensors(**dims))
    base = Path(args.dir) if args.dir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(base).free
    if free < need * 1.2 + (256 << 20):
        sys.exit(f"{base}: {free / 1e9:.1f} GB free, the checkpoint needs {need / 1e9:.2f} GB: "
                 "pass --small or --dir on a bigger disk")
    root = Path(tempfile.mkdtemp(prefix="eagle3nb-bench-stats-", dir=base))
    try:
        t0 = time.perf_counter()
        size = write_draft(root, dims)
        print(f"# wrote {root} ({size / 1e9:.2f} GB, {'small' if args.small else 'Llama-3.1-8B'} "
              f"EAGLE-3 draft, bf16) in {time.perf_counter() - t0:.1f}s; {os.cpu_count()} CPUs")
        files = [root / "model.safetensors"]
        cold = run_child(PLAIN_READ, *files)  # first read: warms the page cache
        cases = [("plain read, 64 MB blocks", PLAIN_READ, tuple(files))]
        cases += [(f"scan_stats, chunk {mb:g} MB", SCAN, (root, int(mb * (1 << 20))))
                  for mb in args.chunk_mb]
        cases.append(("noise probe (fixed numpy loop)", NOISE, ()))
        best = interleaved(cases, args.repeat)
        noise = best.pop("noise probe (fixed numpy loop)")
        plain = best["plain read, 64 MB blocks"]
        print()
        print("| measurement (warm page cache) | GB | best s | GB/s | slowest s | peak RSS MB "
              "| time vs plain read |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        print(f"| plain read, first pass | {cold['bytes'] / 1e9:.2f} | {cold['seconds']:.3f} | "
              f"{cold['bytes'] / 1e9 / cold['seconds']:.2f} | | {cold['hwm_kb'] / 1024:.0f} | |")
        for label, r in best.items():
            gb = r["bytes"] / 1e9
            print(f"| {label} | {gb:.2f} | {r['seconds']:.3f} | {gb / r['seconds']:.2f} | "
                  f"{max(r['all']):.3f} | {r['hwm_kb'] / 1024:.0f} | "
                  f"{r['seconds'] / plain['seconds']:.1f}x |")
        spread = max(noise["all"]) / min(noise["all"])
        print(f"\n# {args.repeat} interleaved rounds, each run in a fresh interpreter; best run "
              "shown. Peak RSS = VmHWM of that interpreter (includes numpy and eagle3_nb).")
        print(f"# noise probe: a fixed numpy loop took {min(noise['all']) * 1e3:.0f}.."
              f"{max(noise['all']) * 1e3:.0f} ms across rounds ({spread:.1f}x spread); above "
              "~1.5x, single timings on this machine mean little.")
    finally:
        if args.keep:
            print(f"# kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
