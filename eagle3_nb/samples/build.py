"""Build data_samples/ deterministically: a tiny target config and EAGLE-3 drafts, good and broken,
with their manifest and README, the training-data samples and the hidden-state dumps.

Every broken draft embodies one row of the failure catalogue (DOMAIN.md): samples.variants. The
expectations written to `drafts/manifest.json` were derived by hand from DOMAIN.md and
reference/, not from the engine planner, so that tests can cross-check the two.

    python -m eagle3_nb.samples [--out DIR]

Draft weights come from the trained draft in data_samples/train/ when it exists (`--train`,
`--train-draft`), else they are random (seeded): samples.weights.
Imports torch: this is a build tool, nothing on the light listing path imports it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from eagle3_nb.engines import split_spec
from eagle3_nb.samples.configs import target_config
from eagle3_nb.samples.dumps import build_dumps
from eagle3_nb.samples.training_data import build_training_data
from eagle3_nb.samples.variants import ENGINES, VARIANTS, VERDICTS, Expect, Variant
from eagle3_nb.samples.weights import (DEFAULT_AUX_IDS, DRAFT_CURVES, DRAFT_VOCAB, H, HEAD_DIM,
                                       INTERMEDIATE, LEADING_IDS, NUM_HEADS, NUM_KV_HEADS, SEED,
                                       TARGET_LAYERS, TARGET_VOCAB, TRAINED_DRAFT, make_weights)
from eagle3_nb.samples.writers import write_json

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "data_samples"

# the build's public names, wherever they live (tests import them from here)
__all__ = ["DEFAULT_OUT", "DRAFT_CURVES", "DRAFT_VOCAB", "ENGINES", "LEADING_IDS", "TARGET_VOCAB",
           "TRAINED_DRAFT", "VARIANTS", "VERDICTS", "build_samples", "manifest", "readme",
           "target_config"]


def manifest() -> dict[str, Any]:
    return {
        "target_config": "target/config.json",
        "engines": list(ENGINES),
        "verdicts": VERDICTS,
        "codes": "finding codes that must appear for that engine (subset semantics); "
                 "expect_global_codes: engine-independent findings that must appear",
        "variants": {name: v.manifest_entry() for name, v in VARIANTS.items()},
    }


def engines_label(engines: list[str]) -> str:
    """['sglang==0.5.9', 'sglang==0.5.16'] -> 'sglang 0.5.9, 0.5.16'."""
    if len(engines) == len(ENGINES):
        return "every engine"
    names: dict[str, list[str]] = {}
    for spec in engines:
        name, version = split_spec(spec)
        names.setdefault(name, []).append(version)
    return "; ".join(f"{name} {', '.join(versions)}" for name, versions in names.items())


def engine_lines(v: Variant) -> str:
    """One line per distinct behaviour, engines that behave alike share it."""
    groups: dict[Expect, list[str]] = {}
    for engine in ENGINES:
        groups.setdefault(v.expect[engine], []).append(engine)
    return "<br>".join(f"{engines_label(engines)}: **{e.verdict}**, {e.says}"
                       for e, engines in groups.items())


def readme() -> str:
    head = ["# Sample drafts", "",
            "Written by `python -m eagle3_nb.samples`; do not edit by hand. Random weights, "
            f"seed {SEED}: H={H}, heads {NUM_HEADS}/{NUM_KV_HEADS} (head_dim {HEAD_DIM}), "
            f"intermediate {INTERMEDIATE}, vocab {TARGET_VOCAB} -> draft vocab {DRAFT_VOCAB}. "
            f"Target: `../target/config.json` (Llama, {TARGET_LAYERS} layers, default aux "
            f"layers hidden_states{DEFAULT_AUX_IDS}).", "",
            "Expected verdicts and finding codes per engine are in `manifest.json` "
            "(engines: " + ", ".join(f"`{e}`" for e in ENGINES) + ").", "",
            "| directory | failure it embodies | what each engine does |", "|---|---|---|"]
    rows = [f"| `{v.name}/` | {v.failure} | {engine_lines(v)} |"
            for v in VARIANTS.values()]
    return "\n".join(head + rows) + "\n"


def build_samples(out_dir: Path, trained_dir: Path | None = DEFAULT_OUT) -> None:
    """Write target/config.json, drafts/, training/ and dumps/ under out_dir; drafts/ and dumps/
    are rebuilt from scratch. Draft weights come from the trained draft in `trained_dir` when it
    exists (inputs, never rewritten here), else they are random; training/ and dumps/ need its
    trained target and answers."""
    out_dir = Path(out_dir)
    weights = make_weights(trained_dir=trained_dir)
    write_json(out_dir / "target" / "config.json", target_config(), sort_keys=True)
    drafts = out_dir / "drafts"
    if drafts.exists():
        shutil.rmtree(drafts)
    for name, v in VARIANTS.items():
        (drafts / name).mkdir(parents=True)
        v.build(drafts / name, weights)
    write_json(drafts / "manifest.json", manifest())
    (drafts / "README.md").write_text(readme(), encoding="utf-8")
    build_training_data(out_dir, trained_dir or DEFAULT_OUT)  # data_samples/training/
    build_dumps(out_dir, trained_dir or DEFAULT_OUT)  # data_samples/dumps/
