#!/usr/bin/env python3
"""Does `trained` beat `layers_plus_one` and `norm_before_residual_flipped` on the bundled pair by
more than 2 standard errors (by prompt) in accept length and first-step accuracy?

    OMP_NUM_THREADS=1 python tools/separation.py [--draft DIR] [--target DIR] [--prompts FILE]
                                                 [--n-prompts N] [--json OUT]

Prints the table (value ± SE, the gap to trained in SE units: paired, then unpaired); the logic
is eagle3_nb/samples/separation.py, which `make train-samples` also runs to record the table in
data_samples/train/draft_training.json. Exit code 0 when the pair separates, 1 when not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_nb.samples.separation import format_table, measure_separation  # noqa: E402

DATA = ROOT / "data_samples"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draft", type=Path, default=DATA / "drafts" / "good")
    parser.add_argument("--target", type=Path, default=DATA / "target")
    parser.add_argument("--prompts", type=Path, default=DATA / "eval_prompts.jsonl")
    parser.add_argument("--n-prompts", type=int, default=None, help="first N prompts (default all)")
    parser.add_argument("--steps", type=int, default=4, help="draft steps per verify step")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens generated per prompt")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--json", type=Path, help="also write the record here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    record = measure_separation(args.draft, args.target, args.prompts, args.n_prompts,
                                args.steps, args.new_tokens)
    print(format_table(record))
    print(f"({record['seconds']:.0f}s)")
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return 0 if record["separates"] else 1


if __name__ == "__main__":
    sys.exit(main())
