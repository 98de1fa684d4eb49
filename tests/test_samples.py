"""data_samples/ is reproducible, readable by the kit, and described by its manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.config import parse_config, parse_target_config
from eagle3_nb.findings import CODES
from eagle3_nb.layouts import schema_diff
from eagle3_nb.samples.build import (DRAFT_CURVES, DRAFT_VOCAB, ENGINES, LEADING_IDS, TARGET_VOCAB,
                                     TRAINED_DRAFT, VARIANTS, VERDICTS, build_samples)
from eagle3_nb.samples.dumps import DUMPS, N_PROMPTS, N_TOKENS
from eagle3_nb.samples.training import TRAINED_FILES
from eagle3_nb.target import check_dump_headers, read_dump

DATA = Path(__file__).resolve().parent.parent / "data_samples"
DRAFTS = DATA / "drafts"
DRAFT_DIRS = sorted(p.name for p in DRAFTS.iterdir() if p.is_dir())
DUMP_MANIFEST = json.loads((DATA / DUMPS / "manifest.json").read_text(encoding="utf-8"))
# a target forward pass's float bits may differ between CPUs: these files are compared by value
DUMP_FILES = sorted(f"{DUMPS}/{name}" for name in DUMP_MANIFEST["files"])


def files_under(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("samples")
    build_samples(out)
    return out


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((DRAFTS / "manifest.json").read_text(encoding="utf-8"))


def test_regenerating_gives_the_committed_files_byte_for_byte(rebuilt):
    trained = set(TRAINED_FILES) | {f"train/{TRAINED_DRAFT}", f"train/{DRAFT_CURVES}"}
    committed = {k: v for k, v in files_under(DATA).items() if k not in trained}
    fresh = files_under(rebuilt)
    assert sorted(committed) == sorted(fresh), "run `python -m eagle3_nb.samples` and commit"
    changed = [rel for rel in fresh if rel not in DUMP_FILES
               and fresh[rel].read_bytes() != committed[rel].read_bytes()]
    assert not changed, f"regenerated files differ from data_samples/: {changed}"


def dump_tensors(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        return load_file(path)
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("name", DUMP_FILES)
def test_regenerated_dumps_hold_the_committed_values(rebuilt, name):
    committed, fresh = dump_tensors(DATA / name), dump_tensors(rebuilt / name)
    assert sorted(committed) == sorted(fresh)
    for key, t in committed.items():
        assert (t.dtype, t.shape) == (fresh[key].dtype, fresh[key].shape), key
        if t.is_floating_point():   # bf16: a last float bit upstream may move one bf16 step
            torch.testing.assert_close(fresh[key].float(), t.float(), rtol=2 ** -6, atol=1e-6)
        else:
            assert torch.equal(fresh[key], t), key


def test_the_dump_manifest_describes_every_dump_file():
    on_disk = sorted(rel for rel in files_under(DATA) if rel.startswith(f"{DUMPS}/"))
    assert on_disk == sorted([*DUMP_FILES, f"{DUMPS}/manifest.json"])
    for name, keys in DUMP_MANIFEST["files"].items():
        tensors = dump_tensors(DATA / DUMPS / name)
        assert {k: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
                for k, t in tensors.items()} == keys, name


def test_the_kit_reads_both_dump_formats_as_the_same_states():
    speculators = read_dump(DATA / DUMPS / "speculators")
    specforge = read_dump(DATA / DUMPS / "specforge")   # torch.load(weights_only=True), bounded
    assert check_dump_headers(DATA / DUMPS / "speculators") == N_PROMPTS
    assert check_dump_headers(DATA / DUMPS / "specforge") == N_PROMPTS
    assert len(speculators) == len(specforge) == N_PROMPTS
    for a, b in zip(speculators, specforge):
        assert (a.format, a.last_hidden_kind, b.format, b.last_hidden_kind) == (
            "speculators", "pre_norm", "specforge", "final_norm")
        assert len(a) == len(b) == N_TOKENS and torch.equal(a.token_ids, b.token_ids)
        # hidden_states[2, 4, 5] both: speculators' ids [2, 4, 5], SpecForge's [1, 3, 4] + 1
        assert a.num_aux() == b.num_aux() == 3
        assert torch.equal(a.aux_hidden_states, b.aux_hidden_states)
        assert not torch.equal(a.last_hidden_state, b.last_hidden_state)  # before / after norm
        assert torch.isfinite(a.aux_hidden_states.float()).all()


def test_the_dumps_stay_small():
    assert sum(p.stat().st_size for p in (DATA / DUMPS).rglob("*") if p.is_file()) < 400_000


def test_every_registered_variant_has_a_directory():
    assert DRAFT_DIRS == sorted(VARIANTS)


@pytest.mark.parametrize("name", DRAFT_DIRS)
def test_each_draft_opens_and_its_config_parses(name):
    ckpt = Checkpoint.open(DRAFTS / name)
    cfg = parse_config(ckpt.config_raw, str(DRAFTS / name / "config.json"))
    assert cfg.H == 64 and cfg.vocab_size == TARGET_VOCAB and cfg.Vd == DRAFT_VOCAB
    assert ckpt.tensors


@pytest.mark.parametrize("name", DRAFT_DIRS)
def test_weights_are_bf16_and_vocab_maps_int64_and_bool(name):
    ckpt = Checkpoint.open(DRAFTS / name)
    wanted = {"d2t": "I64", "t2d": "BOOL"}
    for key, info in ckpt.tensors.items():
        assert info.dtype == wanted.get(key.rsplit(".", 1)[-1], "BF16"), key


@pytest.mark.parametrize("name", [n for n in DRAFT_DIRS if n != "d2t-missing"])
def test_only_the_intended_fault_breaks_the_schema(name):
    ckpt = Checkpoint.open(DRAFTS / name)
    cfg = parse_config(ckpt.config_raw)
    rows = schema_diff(cfg, {k: t.shape for k, t in ckpt.tensors.items()})
    assert [r for r in rows if r.status not in ("ok", "missing_optional")] == []


def test_target_config_parses():
    raw = json.loads((DATA / "target" / "config.json").read_text(encoding="utf-8"))
    target = parse_target_config(raw, "target/config.json")
    assert (target.num_hidden_layers, target.hidden_size, target.vocab_size) == (8, 64, 512)
    assert target.family == "llama"


@pytest.mark.parametrize("variant", ["good", "d2t-leading-zeros"])
def test_d2t_tables_are_trainer_offsets(variant):
    tensors = load_file(DRAFTS / variant / "model.safetensors")
    d2t, t2d = tensors["d2t"], tensors["t2d"]
    assert d2t.dtype == torch.int64 and t2d.dtype == torch.bool
    assert d2t.shape == (DRAFT_VOCAB,) and t2d.shape == (TARGET_VOCAB,)
    if variant == "d2t-leading-zeros":
        assert torch.all(d2t[:LEADING_IDS] == 0)
    assert d2t[-1] > 0, "a pruned vocab must skip some target ids"
    assert torch.all(d2t[1:] >= d2t[:-1])
    assert int(t2d.sum()) == DRAFT_VOCAB
    assert torch.equal(torch.arange(DRAFT_VOCAB) + d2t, torch.nonzero(t2d).flatten())


def test_d2t_absolute_holds_the_target_ids():
    tensors = load_file(DRAFTS / "d2t-absolute" / "model.safetensors")
    assert torch.equal(tensors["d2t"], torch.nonzero(tensors["t2d"]).flatten())


def test_tripwire_is_present_and_never_fired():
    assert (DRAFTS / "good-speculators" / "config.py").is_file()
    assert not list(DATA.rglob("EXECUTED"))


def test_manifest_lists_every_draft_with_a_verdict_per_engine(manifest):
    assert sorted(manifest["variants"]) == DRAFT_DIRS
    assert manifest["engines"] == list(ENGINES)
    for name, entry in manifest["variants"].items():
        assert entry["failure"], name
        assert list(entry["expect"]) == list(ENGINES), name
        for engine, e in entry["expect"].items():
            assert e["verdict"] in VERDICTS, (name, engine)
            assert set(e["codes"]) <= set(CODES), (name, engine)
            assert (e["verdict"] == "load_error") <= bool(e["codes"]), (name, engine)
        assert set(entry["expect_global_codes"]) <= set(CODES), name


def test_readme_has_a_row_per_draft():
    text = (DRAFTS / "README.md").read_text(encoding="utf-8")
    for name in DRAFT_DIRS:
        assert f"| `{name}/` |" in text
