"""Benchmark: `eagle3-nb data` streams a training JSONL; time and memory grow with the rows read.

Goal (#30): 100k rows of conversations JSONL checked (checks 1-5, 7, 8, 10: the served template,
the masks as SpecForge's parser makes them, coverage, truncation, scale, reasoning, the vocab
mapping, the serving prompts' domain) in under a minute on 2 cores and under 1 GB.

The rows are the bundled SpecForge-style good set (data_samples/training/specforge: regenerated
conversations, its YAML naming qwen3-instruct, its vocab mapping) repeated with fresh ids; the
tokenizer and the chat template are the bundled ones. Each measurement runs the check in a fresh
interpreter (imports included); peak RSS and CPU time (user + system) come from wait4. The
anchor measured in the same run is tokenising the rows' message contents alone with the same
tokenizer (encode_batch): what any checker that looks at every token pays at least. The CPU
columns are the ones to compare on a shared machine: load stretches the wall times, not them.

    python benchmarks/bench_data.py [--rows 10000 100000] [--repeat 1] [--token-rows 100000]

A second table checks token rows (speculators' form) twice, as JSONL and as the Arrow folder
speculators' prepare_data.py saves: the Arrow reader (io/training_arrow.py) against the JSONL
reader on the same rows, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOOD = REPO / "data_samples" / "training" / "specforge"
TOKENIZER = REPO / "data_samples" / "target"
TEMPLATE = REPO / "data_samples" / "training" / "chat_template.jinja"
PROMPTS = REPO / "data_samples" / "prompts.jsonl"

KIT = ("import sys, time; t = time.perf_counter()\n"
       "from eagle3_nb.checks.data import check_data\n"
       "r = check_data(sys.argv[1], tokenizer=sys.argv[2], chat_template=sys.argv[3],\n"
       "               serve_thinking=False, prompts=sys.argv[4]).to_json()\n"
       "assert r['rows_read'] == int(sys.argv[5]), r['rows_read']\n"
       "assert not [f for f in r['findings'] if f['severity'] != 'info'], r['findings']\n"
       "print((time.perf_counter() - t) * 1000)")
ANCHOR = ("import sys, json, time; t = time.perf_counter()\n"
          "from tokenizers import Tokenizer\n"
          "tok = Tokenizer.from_file(sys.argv[2] + '/tokenizer.json')\n"
          "batch = []\n"
          "for line in open(sys.argv[1] + '/train.jsonl', encoding='utf-8'):\n"
          "    batch.append(''.join(m['content'] for m in json.loads(line)['conversations']))\n"
          "    if len(batch) == 512: tok.encode_batch(batch); batch = []\n"
          "tok.encode_batch(batch)\n"
          "print((time.perf_counter() - t) * 1000)")


def training_set(folder: Path, rows: int) -> Path:
    """The good set's rows repeated to ROWS, with its YAML and vocab mapping beside them."""
    out = folder / f"train-{rows}"
    out.mkdir()
    shutil.copy(GOOD / "config.yaml", out / "config.yaml")
    shutil.copytree(GOOD / "vocab_mapping", out / "vocab_mapping")
    good = [json.loads(x) for x in (GOOD / "train.jsonl").read_text().splitlines()]
    with (out / "train.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(rows):
            fh.write(json.dumps({**good[i % len(good)], "id": f"row-{i}"}) + "\n")
    # the mapping was built from these rows: written after them it is not older than the data
    os.utime(out / "vocab_mapping" / "vocab_mapping.pt")
    return out


TOKEN_GOOD = REPO / "data_samples" / "training" / "speculators" / "data.jsonl"
KIT_TOKENS = ("import sys, time; t = time.perf_counter()\n"
              "from eagle3_nb.checks.data import check_data\n"
              "r = check_data(sys.argv[1], tokenizer=sys.argv[2], chat_template=sys.argv[3],\n"
              "               serve_thinking=False).to_json()\n"
              "assert r['rows_read'] == int(sys.argv[4]), r['rows_read']\n"
              "print((time.perf_counter() - t) * 1000)")


def token_sets(folder: Path, rows: int) -> tuple[Path, Path]:
    """The bundled speculators token rows repeated to ROWS, as JSONL and as the save_to_disk
    folder speculators' prepare_data.py writes (one Arrow stream shard, state.json): twins."""
    import pyarrow as pa

    good = [json.loads(x) for x in TOKEN_GOOD.read_text().splitlines()]
    rows_ = [good[i % len(good)] for i in range(rows)]
    jsonl, arrow = folder / f"tokens-jsonl-{rows}", folder / f"tokens-arrow-{rows}"
    jsonl.mkdir()
    arrow.mkdir()
    with (jsonl / "data.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows_:
            fh.write(json.dumps(r) + "\n")
    table = pa.table({"input_ids": pa.array([r["input_ids"] for r in rows_],
                                            pa.list_(pa.int32())),
                      "loss_mask": pa.array([r["loss_mask"] for r in rows_],
                                            pa.list_(pa.int64()))})
    shard = "data-00000-of-00001.arrow"
    with pa.OSFile(str(arrow / shard), "wb") as sink, \
            pa.RecordBatchStreamWriter(sink, table.schema) as writer:
        writer.write_table(table, 1000)   # datasets' ArrowWriter batch size
    (arrow / "state.json").write_text(json.dumps({"_data_files": [{"filename": shard}]}))
    return jsonl, arrow


def run(code: str, *args) -> tuple[float, float, float]:
    """(op ms, peak RSS MB, CPU s) of CODE in a fresh interpreter (ru_maxrss and user + system
    time from wait4: the CPU column is what load on a shared machine does not inflate)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=out,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise SystemExit(f"failed: {err.read()[-2000:]}")
        out.seek(0)
        return (float(out.read().strip().splitlines()[-1]), usage.ru_maxrss / 1024,
                usage.ru_utime + usage.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--token-rows", type=int, nargs="*", default=[100_000],
                    help="token-row sets checked as JSONL and as Arrow (none: skip)")
    args = ap.parse_args()
    print(f"{'rows':>8} {'data s':>8} {'cpu s':>6} {'rows/s':>8} {'peak MB':>8} "
          f"{'tokenise-only s':>16} {'cpu s':>6} {'ratio':>6}  goal: 100k rows < 60 s and "
          "< 1024 MB on 2 cores")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            folder = training_set(Path(tmp), n)
            kit = min(run(KIT, folder, TOKENIZER, TEMPLATE, PROMPTS, n)
                      for _ in range(args.repeat))
            anchor = min(run(ANCHOR, folder, TOKENIZER) for _ in range(args.repeat))
            print(f"{n:>8} {kit[0] / 1000:>8.1f} {kit[2]:>6.1f} {n / kit[0] * 1000:>8.0f} "
                  f"{kit[1]:>8.0f} {anchor[0] / 1000:>16.1f} {anchor[2]:>6.1f} "
                  f"{kit[0] / anchor[0]:>6.2f}")
            shutil.rmtree(folder)
        print(f"\ntoken rows (speculators' form), the same rows as JSONL and as Arrow:\n"
              f"{'rows':>8} {'jsonl s':>8} {'cpu s':>6} {'peak MB':>8} {'arrow s':>8} "
              f"{'cpu s':>6} {'peak MB':>8} {'arrow/jsonl':>11}")
        for n in args.token_rows:
            jsonl, arrow = token_sets(Path(tmp), n)
            a = [min(run(KIT_TOKENS, d, TOKENIZER, TEMPLATE, n) for _ in range(args.repeat))
                 for d in (jsonl, arrow)]
            print(f"{n:>8} {a[0][0] / 1000:>8.1f} {a[0][2]:>6.1f} {a[0][1]:>8.0f} "
                  f"{a[1][0] / 1000:>8.1f} {a[1][2]:>6.1f} {a[1][1]:>8.0f} "
                  f"{a[1][0] / a[0][0]:>11.2f}")
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (other work on the "
          "machine slows both columns alike)")


if __name__ == "__main__":
    main()
