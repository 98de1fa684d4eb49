"""Benchmark: hostile inputs cost what a healthy draft costs, not what they declare.

Each case is a draft directory (the bundled `good` draft's config) whose weight file is hostile,
run as `eagle3-nb inspect DIR --no-stats --json` in a fresh interpreter; its wall time and peak
RSS (wait4's ru_maxrss) are printed beside the same command on the healthy bundled draft,
measured in the same run. Cases:

- big header: a safetensors header declaring 1,000,000 tensors (refused from a count in the raw
  bytes before parsing);
- long name: one tensor named with 90 MB of characters (refused);
- zip bomb: pytorch_model.bin whose extra member deflates to 256 MiB (refused from the zip
  central directory before torch.load);
- sparse dump: a 3 GiB speculators hs_0.safetensors (sparse file, valid header) listed as a
  draft (headers only), and given to `accept --hidden-states` (refused from its header);
- 1 TiB checkpoint: a sparse model.safetensors declaring one 1 TiB tensor (the largest sparse
  file the file system here allows in comfort; a 1 PB file cannot be created on ext4, whose
  limit is 16 TiB): headers only, with `report`'s hashing budget covering the rest.

A script that prints a table, not a test.

    python benchmarks/bench_hostile.py [--repeat 3]
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
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOOD = REPO / "data_samples" / "drafts" / "good"
PICKLE = REPO / "data_samples" / "drafts" / "pickle-bin"


def safetensors_header(entries: dict, pad_to: int = 8) -> bytes:
    raw = json.dumps(entries, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % pad_to)
    return struct.pack("<Q", len(raw)) + raw


def draft_dir(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir()
    shutil.copy(GOOD / "config.json", d / "config.json")
    return d


def big_header(root: Path) -> Path:
    d = draft_dir(root, "big-header")
    entries = {f"t{i}": {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
               for i in range(1_000_000)}
    (d / "model.safetensors").write_bytes(safetensors_header(entries) + b"\0" * 2_000_000)
    return d


def long_name(root: Path) -> Path:
    d = draft_dir(root, "long-name")
    entries = {"n" * (90 << 20): {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}
    (d / "model.safetensors").write_bytes(safetensors_header(entries) + b"\0\0")
    return d


def zip_bomb(root: Path) -> Path:
    d = root / "zip-bomb"
    shutil.copytree(PICKLE, d)
    good = zipfile.ZipFile(PICKLE / "pytorch_model.bin")
    with zipfile.ZipFile(d / "pytorch_model.bin", "w") as out:
        for m in good.infolist():
            out.writestr(m.filename, good.read(m.filename))
        out.writestr("pytorch_model/data/999", b"\0" * (256 << 20), zipfile.ZIP_DEFLATED)
    return d


def sparse_file(path: Path, name: str, nbytes: int) -> None:
    shape = [nbytes // 2]
    header = safetensors_header({name: {"dtype": "BF16", "shape": shape,
                                        "data_offsets": [0, nbytes]}})
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + nbytes)


def sparse_dump(root: Path) -> Path:
    """hidden_states [seq, 4, 64] bf16 and token_ids [seq], 3 GiB in all, as vLLM writes them."""
    d = draft_dir(root, "sparse-dump")
    seq = (3 << 30) // (4 * 64 * 2 + 8)
    states = 4 * 64 * 2 * seq
    header = safetensors_header({
        "hidden_states": {"dtype": "BF16", "shape": [seq, 4, 64], "data_offsets": [0, states]},
        "token_ids": {"dtype": "I64", "shape": [seq], "data_offsets": [states, states + 8 * seq]}})
    with open(d / "hs_0.safetensors", "wb") as f:
        f.write(header)
        f.truncate(len(header) + states + 8 * seq)
    return d


def one_tib(root: Path) -> Path:
    d = draft_dir(root, "one-tib")
    sparse_file(d / "model.safetensors", "fc.weight", 1 << 40)
    return d


def command(name: str, path: Path) -> list[str]:
    if name.startswith("accept"):  # the dump as accept reads it, beside the good draft
        return ["accept", str(GOOD), "--hidden-states", str(path), "--target",
                str(GOOD.parent.parent / "target"), "--json"]
    return ["inspect", str(path), "--no-stats", "--json"]


def run_cli(args: list[str]) -> tuple[float, float, int, str]:
    """(wall ms, peak RSS MB, exit code, first stderr line) of one fresh interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "eagle3_nb.cli", *args], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    err = proc.stderr.read().strip().splitlines()
    code = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, code, (err[0] if err else "")


CASES = {"healthy (bundled good draft)": None, "big header (1e6 tensors)": big_header,
         "long name (90 MB)": long_name, "zip bomb (256 MiB inflated)": zip_bomb,
         "sparse dump (3 GiB)": sparse_dump, "accept on that dump": sparse_dump,
         "sparse checkpoint (1 TiB)": one_tib}


def build_cases(root: Path) -> None:
    for make in dict.fromkeys(CASES.values()):
        if make:
            make(root)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--build", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        build_cases(Path(args.build))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        root = Path(tmp)
        # built in another interpreter: a child forked from a parent that held the big headers
        # would report the parent's memory as its own peak
        subprocess.run([sys.executable, __file__, "--build", str(root)], check=True)
        paths = {name: (root / make.__name__.replace("_", "-") if make else GOOD)
                 for name, make in CASES.items()}
        best: dict[str, tuple] = {}
        for _ in range(args.repeat):  # interleaved rounds; each case keeps its fastest run
            for name, path in paths.items():
                run = run_cli(command(name, path))
                if name not in best or run[0] < best[name][0]:
                    best[name] = run
    base_ms, base_mb = best["healthy (bundled good draft)"][:2]
    print(f"{'case':<30} {'wall ms':>8} {'x healthy':>9} {'peak MB':>8} {'x healthy':>9} "
          f"{'exit':>4}  answer")
    for name, (ms, mb, code, line) in best.items():
        print(f"{name:<30} {ms:>8.0f} {ms / base_ms:>9.2f} {mb:>8.0f} {mb / base_mb:>9.2f} "
              f"{code:>4}  {line[:90] or 'ok (listed)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
