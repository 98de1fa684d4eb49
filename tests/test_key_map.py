"""#23: a checkpoint's tensor names are split into wrapper prefix and canonical name once
(Checkpoint.key_map), and the planner, the statistics, the schema and the layout detection of
one inspection read that map instead of splitting every name again at each question."""

from __future__ import annotations

import collections
import sys

import pytest

from conftest import DRAFTS
from eagle3_nb import layouts
from eagle3_nb.io import checkpoint
from eagle3_nb.io.checkpoint import Checkpoint

SAMPLES = sorted(p for p in DRAFTS.iterdir() if (p / "config.json").is_file())
# a plain flat draft, wrapper prefixes, two decoder layers, shards: one of each key story
INSPECTED = ["good", "prefix-model", "multilayer-flat", "sharded"]


@pytest.fixture
def splits(monkeypatch):
    """Every split_key call from now on, by name; checkpoints are opened afresh."""
    calls: collections.Counter[str] = collections.Counter()
    real = layouts.split_key

    def counted(name):
        calls[name] += 1
        return real(name)

    import eagle3_nb.checks.load  # noqa: F401  (everything an inspection imports, imported)

    for module in [m for n, m in sys.modules.items() if n.startswith("eagle3_nb")]:
        if getattr(module, "split_key", None) is real:
            monkeypatch.setattr(module, "split_key", counted)
    monkeypatch.setattr(checkpoint, "_OPENED", {})
    return calls


def _copies(monkeypatch, planned: bool) -> list:
    """Count the converted copies inspect plans to check its convert advice (#25); with
    planned=False the preview answers 'refused', so no copy is planned at all."""
    import eagle3_nb.convert as convert

    real, made = convert.preview, []

    def preview(ckpt, profile):
        copy = real(ckpt, profile) if planned else None
        if copy is not None:
            made.append(copy)
        return copy
    monkeypatch.setattr(convert, "preview", preview)
    return made


@pytest.mark.parametrize("name", INSPECTED)
def test_an_inspection_splits_each_name_of_the_draft_once(name, splits, monkeypatch):
    from eagle3_nb.checks.load import inspect_checkpoint

    _copies(monkeypatch, planned=False)
    inspection = inspect_checkpoint(DRAFTS / name, engines=["all"])
    inspection.to_json()
    names = list(inspection.checkpoint.tensors)
    assert len(inspection.plans) > 10 and inspection.stats is not None
    assert splits == collections.Counter(names), (
        f"{sum(splits.values())} splits of {len(names)} names: "
        f"{splits.most_common(3)}")


@pytest.mark.parametrize("name", ["good", "prefix-model"])
def test_each_planned_copy_is_split_once_beside_the_draft(name, splits, monkeypatch):
    """The copies `convert --engine` would write (checked to settle the advice that names it)
    are other checkpoints: each has its own names, split once when it is planned."""
    from eagle3_nb.checks.load import inspect_checkpoint

    copies = _copies(monkeypatch, planned=True)
    inspection = inspect_checkpoint(DRAFTS / name, engines=["all"])
    inspection.to_json()
    n = len(inspection.checkpoint.tensors)
    assert copies and all(len(shapes) == n for _, shapes in copies)
    assert sum(splits.values()) == n * (1 + len(copies))


@pytest.mark.parametrize("draft", SAMPLES, ids=lambda p: p.name)
def test_the_map_answers_what_splitting_each_name_answered(draft):
    ckpt = Checkpoint.open(draft)
    names = list(ckpt.tensors)
    split = {n: layouts.split_key(n) for n in names}
    key_map = ckpt.key_map
    assert ckpt.key_map is key_map and key_map == layouts.KeyMap.of(names)
    assert dict(ckpt.canonical_keys) == {k.canonical or n: n for n, k in split.items()}
    for n, k in split.items():
        assert key_map.key(n) == k and key_map.canonical(n) == k.canonical
        assert key_map.canonical_or_name(n) == (k.canonical or n)
    for canonical in ("d2t", "t2d", "fc.weight", "embed_tokens.weight", "lm_head.weight",
                      "layers.0.hidden_norm.weight", "layers.1.input_layernorm.weight"):
        assert key_map.has(canonical) == any(k.canonical == canonical for k in split.values())
        assert key_map.original(canonical) == next(
            (n for n, k in reversed(split.items()) if k.canonical == canonical), None)
    assert layouts.detect_layout(key_map) == layouts.detect_layout(names)


@pytest.mark.parametrize("draft", SAMPLES, ids=lambda p: p.name)
def test_a_renamed_tensor_keeps_its_source_keys_canonical_name(draft):
    """convert reads a copy's canonical names from the source's map, not by splitting the new
    names: the same answer, for every layout a copy is written in."""
    from eagle3_nb.convert.plan import Target, plan_keys

    ckpt = Checkpoint.open(draft)
    for keys in ("midlayer", "layers", "keep"):
        entries, _ = plan_keys(ckpt, Target(keys, "keep", ""))
        assert [e.canonical for e in entries] == \
            [layouts.split_key(e.new).canonical for e in entries]


def test_a_key_map_of_other_names_is_refused_by_the_planner():
    from eagle3_nb.engines import resolve_engine
    from eagle3_nb.engines.planner import plan_load

    ckpt = Checkpoint.open(DRAFTS / "good")
    shapes = {n: t.shape for n, t in ckpt.tensors.items()}
    profile = resolve_engine("vllm==0.33")
    same = plan_load(profile, ckpt.config, shapes, key_map=ckpt.key_map)
    assert same == plan_load(profile, ckpt.config, shapes)
    del shapes["fc.weight"]
    with pytest.raises(ValueError, match="key map"):
        plan_load(profile, ckpt.config, shapes, key_map=ckpt.key_map)
