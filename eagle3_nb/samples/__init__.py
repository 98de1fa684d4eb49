"""Builds data_samples/: `python -m eagle3_nb.samples` (the fast build: drafts from the trained
weights) or `--train` (tokenizer, tiny target and draft trained from scratch). Nothing in the kit
imports this package; the tests and the Makefile run it.

    build.py        the fast build: drafts/, their manifest and README, then the rest below
    weights.py      the drafts' dimensions and weights (seeded draws or the trained draft)
    configs.py      the target's and the drafts' config.json
    variants.py     the sample drafts, good and broken, with what each engine does with them
    writers.py      JSON and safetensors writers whose bytes depend only on the content
    dumps.py        hidden-state dumps of the target, speculators and SpecForge formats
    training_data.py  data_samples/training/: training sets, good and broken
    training.py     the tokenizer and the tiny target (recipes, held-out prompts)
    train_draft.py  the draft, trained with training-time test on the target's hidden states
    separation.py   does `trained` beat the wrong wirings the demo shows (recorded after training)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from eagle3_nb.config import parse_config
from eagle3_nb.samples.build import DEFAULT_OUT, build_samples
from eagle3_nb.samples.configs import flat_config
from eagle3_nb.samples.separation import format_table, measure_separation
from eagle3_nb.samples.training_data import write_answers
from eagle3_nb.samples.train_draft import DraftRecipe, train_draft
from eagle3_nb.samples.training import (EVAL_PROMPTS, TRAIN_FILES, as_tokenizer, cpu_threads,
                                        stdlib_texts, token_stream, train_samples)
from eagle3_nb.samples.variants import VARIANTS
from eagle3_nb.samples.weights import BF16, DEFAULT_AUX_IDS, DRAFT_CURVES, TRAINED_DRAFT
from eagle3_nb.samples.writers import write_json
from eagle3_nb.target import TargetModel


def train_real_samples(out_dir: Path = DEFAULT_OUT, steps: int | None = None) -> dict[str, Any]:
    """The trained samples (`--train`: minutes on 2 CPU cores; the fast default build skips them):
    a BPE tokenizer and a tiny Llama target in out_dir/target/ (model.safetensors, tokenizer.json,
    training.json, config.json as the default build writes it), out_dir/prompts.jsonl, and the
    draft trained on that target (train_sample_draft); then the drafts are rebuilt from it.
    Recipes: eagle3_nb.samples.training and eagle3_nb.samples.train_draft."""
    out_dir = Path(out_dir)
    record = train_samples(out_dir, steps=steps)
    record["draft"] = train_sample_draft(out_dir)
    write_answers(out_dir)  # the target's own answers for data_samples/training/
    build_samples(out_dir, trained_dir=out_dir)
    record["separation"] = record_separation(out_dir)
    return record


def train_sample_draft(out_dir: Path, steps: int | None = None, log=print) -> dict[str, Any]:
    """The bundled draft, trained on out_dir/target's hidden_states[2, 4, 5] (EAGLE's defaults for
    8 layers) over the tokenizer's training text: out_dir/train/draft.safetensors (canonical
    names, bf16 weights, int64 d2t, bool t2d) plus its curves. Every bundled draft variant is
    derived from these weights by the fast build."""

    recipe = DraftRecipe(steps=steps) if steps else DraftRecipe()
    with cpu_threads(recipe.threads):
        target = TargetModel.load(out_dir / "target")
        tok = as_tokenizer(out_dir / "target" / "tokenizer.json")
        stream = token_stream(tok, [text for _, text in stdlib_texts(TRAIN_FILES)])
        result = train_draft(target, parse_config(flat_config()), stream, DEFAULT_AUX_IDS,
                             recipe, log)
    return save_trained_draft(out_dir, result)


def record_separation(out_dir: Path, log=print) -> dict[str, Any]:
    """Measure the built good draft against the wirings the demo must tell apart
    (samples.separation) on the held-out evaluation prompts, and add the record to the draft's
    training JSON (out_dir/train/draft_training.json)."""
    with cpu_threads(1):
        record = measure_separation(out_dir / "drafts" / "good", out_dir / "target",
                                    out_dir / EVAL_PROMPTS)
    record = {**record, **{k: Path(record[k]).relative_to(out_dir).as_posix()
                           for k in ("checkpoint", "target", "prompts")}}
    curves = out_dir / "train" / DRAFT_CURVES
    write_json(curves, {**json.loads(curves.read_text(encoding="utf-8")), "separation": record})
    if log:
        log(format_table(record))
    return record


def save_trained_draft(out_dir: Path, result: dict[str, Any]) -> dict[str, Any]:
    state = {k: (v.to(BF16) if v.is_floating_point() else v).contiguous()
             for k, v in result["state"].items()}
    (out_dir / "train").mkdir(parents=True, exist_ok=True)
    save_file(state, str(out_dir / "train" / TRAINED_DRAFT), metadata={"format": "pt"})
    record = {k: result[k] for k in ("curve", "recipe", "seconds", "layer_ids")}
    write_json(out_dir / "train" / DRAFT_CURVES, record)
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eagle3_nb.samples",
                                     description="Build the sample target config and drafts.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output directory (default: {DEFAULT_OUT})")
    parser.add_argument("--train", action="store_true",
                        help="instead of the fast build, train the tokenizer, the tiny target and "
                             "the draft, write held-out prompts, then build the drafts from the "
                             "trained weights and record how well the good draft separates from "
                             "the wrong wirings (about 36 minutes on 2 busy CPU cores: target 23, "
                             "draft 11 on one thread, separation 1)")
    parser.add_argument("--train-draft", action="store_true",
                        help="retrain only the draft on the existing trained target, then build")
    args = parser.parse_args(argv)
    if args.train:
        train_real_samples(args.out)
        return
    if args.train_draft:
        train_sample_draft(args.out)
    build_samples(args.out, trained_dir=args.out if args.train_draft else DEFAULT_OUT)
    if args.train_draft:
        record_separation(args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {len(VARIANTS)} drafts and the target config to {args.out} ({size} bytes)")
