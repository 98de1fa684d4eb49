"""d2t / t2d: format detection with evidence, engine views, building, coverage, repair."""

import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import DRAFTS
from eagle3_nb.io.checkpoint import sha256_file
from eagle3_nb.convert import convert_checkpoint
from eagle3_nb.engines import PROFILES
from eagle3_nb.errors import ConversionError
from eagle3_nb.vocab import (ABSOLUTE, AMBIGUOUS, IDENTITY, INVALID, MISSING, OFFSET, VocabMapping,
                             build_from_counts, count_tokens, coverage)


def mapping(ids, Vt, with_t2d=True, absolute=False, Vd=None):
    ids = np.asarray(ids, dtype=np.int64)
    Vd = Vd or len(ids)
    d2t = ids if absolute else ids - np.arange(len(ids))
    t2d = None
    if with_t2d:
        t2d = np.zeros(Vt, bool)
        t2d[ids[(ids >= 0) & (ids < Vt)]] = True
    return VocabMapping(Vd, Vt, d2t, t2d)


# --- hand-made cases ---------------------------------------------------------------------------

def test_leading_zeros_are_correct_offsets():
    """The first seed: d2t[:10] == 0 looked like a bug and was 'fixed'. It is right."""
    m = mapping(list(range(20)) + [25, 30, 31, 40], Vt=64)
    assert m.d2t[:20].tolist() == [0] * 20
    assert m.format == OFFSET and m.valid(PROFILES) is True and not m.findings()
    assert any("equals nonzero(t2d)" in e for e in m.evidence)


def test_absolute_ids_proven_by_t2d():
    m = mapping([1, 3, 5, 40, 41], Vt=64, absolute=True)
    assert m.format == ABSOLUTE and m.valid(PROFILES) is False
    assert [f.code for f in m.findings()] == ["D2T_ABSOLUTE"]
    view = m.engine_view(PROFILES)
    assert all(r["n_wrong"] == 4 for r in view)  # every draft id but 0 (offset 0 + d2t[0])
    assert m.intended_ids.tolist() == [1, 3, 5, 40, 41]


def test_absolute_ids_out_of_range_as_offsets_without_t2d():
    m = mapping([10, 20, 30, 40], Vt=42, with_t2d=False, absolute=True)
    assert m.format == ABSOLUTE
    assert m.readings["offsets"].n_out_of_range == 1   # 3 + 40 = 43
    assert any("outside" in e for e in m.evidence)


def test_sparse_top_ids_without_t2d_are_ambiguous():
    """No two kept ids adjacent: offsets are strictly increasing and both readings fit."""
    m = mapping([0, 2, 4, 6], Vt=64, with_t2d=False)
    assert m.format == AMBIGUOUS and m.valid(PROFILES) is None
    assert [f.code for f in m.findings()] == ["D2T_AMBIGUOUS"]
    assert m.intended_ids is None


def test_adjacent_ids_decide_offsets_without_t2d():
    m = mapping([0, 1, 5, 9], Vt=64, with_t2d=False)
    assert m.format == OFFSET  # the repeated offset makes the absolute reading non-injective


def test_identity_when_vocab_is_full():
    assert VocabMapping(8, 8, np.zeros(8, np.int64), np.ones(8, bool)).format == IDENTITY
    assert VocabMapping(8, 8, None, None).format == IDENTITY


def test_missing_with_pruned_vocab():
    m = VocabMapping(4, 8, None, None)
    assert m.format == MISSING and [f.code for f in m.findings()] == ["D2T_MISSING"]
    assert m.valid(PROFILES) is False


def test_empty_table_is_invalid():
    m = VocabMapping(0, 8, np.zeros(0, np.int64), None)
    assert m.format == INVALID and m.findings()[0].code == "D2T_INVALID"


def test_int32_table_is_read_with_a_note():
    m = mapping([0, 1, 3, 7], Vt=16)
    m32 = VocabMapping(4, 16, m.d2t.astype(np.int32), m.t2d)
    assert m32.format == OFFSET and any("int32" in e for e in m32.evidence)


def test_float_table_is_invalid():
    m = VocabMapping(4, 16, np.zeros(4, np.float32), None)
    assert m.format == INVALID and "integer" in m.problems[0]


def test_wrong_length_is_invalid():
    m = VocabMapping(5, 16, np.zeros(4, np.int64), None)
    assert m.format == INVALID and "4 entries" in m.problems[0]


def test_out_of_range_offsets_are_invalid_and_named():
    d2t = np.array([0, 0, 0, 50], np.int64)  # last id = 53 >= 16
    m = VocabMapping(4, 16, d2t, None)
    assert m.readings["offsets"].out_of_range == [3]
    assert m.format == INVALID or m.findings()[0].code in ("D2T_INVALID", "D2T_ABSOLUTE")


def test_duplicates_are_found():
    d2t = np.array([0, 0, -1, 0], np.int64)  # ids 0, 1, 1, 3
    m = VocabMapping(4, 16, d2t, None)
    assert m.readings["offsets"].duplicates == [2]
    assert m.format == INVALID


def test_shuffled_table_is_offsets_if_t2d_agrees():
    ids = np.array([7, 1, 3, 0])
    m = mapping(ids, Vt=16)
    assert m.format == OFFSET and not m.readings["offsets"].increasing


def test_t2d_disagreeing_is_reported():
    m = mapping([0, 1, 5, 9], Vt=16)
    m.t2d[2] = True
    m2 = VocabMapping(4, 16, m.d2t, m.t2d)
    assert any("t2d marks 5" in p for p in m2.problems)
    assert "T2D_MISMATCH" in {f.code for f in m2.findings()}


# --- building, counting, coverage -------------------------------------------------------------

def test_build_matches_the_trainers_recipe():
    counts = np.array([5, 0, 9, 9, 1, 7, 0, 2])
    m = build_from_counts(counts, 4, 8)
    assert np.flatnonzero(m.t2d).tolist() == [0, 2, 3, 5]      # top 4 by count, sorted
    assert m.d2t.tolist() == [0, 1, 1, 2]
    assert m.format == OFFSET


def test_build_pads_with_lowest_unseen_ids():
    m = build_from_counts(np.array([0, 0, 0, 4, 0, 0]), 3, 6)   # one id seen
    assert np.flatnonzero(m.t2d).tolist() == [0, 1, 3]


def test_loss_masked_counts_and_coverage():
    counts = count_tokens([[1, 2, 2, 3], [3, 3]], [[0, 1, 1, 1], [1, 0]], vocab_size=5)
    assert counts.tolist() == [0, 0, 2, 2, 0]
    assert coverage(np.array([2]), counts) == 0.5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=8, max_size=80), st.data())
def test_round_trip_build_validate_detect(raw_counts, data):
    Vt = len(raw_counts)
    Vd = data.draw(st.integers(1, Vt))
    built = build_from_counts(np.array(raw_counts), Vd, Vt)
    ids = np.flatnonzero(built.t2d)
    assert len(ids) == Vd and np.array_equal(np.arange(Vd) + built.d2t, ids)
    assert np.all(np.diff(built.d2t) >= 0)
    expected = IDENTITY if Vd == Vt else OFFSET
    assert built.format == expected and built.valid(PROFILES) is True
    no_t2d = VocabMapping(Vd, Vt, built.d2t, None)
    assert no_t2d.format in (OFFSET, AMBIGUOUS, IDENTITY)
    if np.any(np.diff(ids) == 1):
        assert no_t2d.format in (OFFSET, IDENTITY)
    if 2 <= Vd < Vt:  # with one entry, both readings are the same id
        absolute = VocabMapping(Vd, Vt, ids.copy(), built.t2d)
        assert absolute.format == ABSOLUTE
        assert VocabMapping(Vd, Vt, ids.copy(), None).format in (ABSOLUTE, AMBIGUOUS)


# --- CLI and repair on the bundled samples -----------------------------------------------------

@pytest.mark.parametrize("variant,fmt,valid,code", [
    ("good", "offset", True, 0), ("good-speculators", "offset", True, 0),
    ("d2t-absolute", "absolute", False, 1), ("d2t-missing", "missing", False, 1)])
def test_vocab_cli_json(run_cli, variant, fmt, valid, code):
    rc, out, err = run_cli("vocab", DRAFTS / variant, "--json")
    assert rc == code, err
    data = json.loads(out)
    assert data["format"] == fmt and data["valid"] is valid
    assert {"format", "valid", "draft_vocab_size", "target_vocab_size", "n_out_of_range",
            "n_duplicates", "t2d_agrees", "evidence", "engines", "findings"} <= set(data)
    assert all({"engine", "version", "n_wrong"} <= set(e) for e in data["engines"])


def test_vocab_cli_corpus_coverage(run_cli, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"input_ids": [0, 1, 2, 500, 501]}) for _ in range(3)))
    rc, out, _ = run_cli("vocab", DRAFTS / "good", "--corpus", corpus, "--json")
    cov = json.loads(out)["coverage"]
    from eagle3_nb.io.checkpoint import Checkpoint
    kept = set((np.arange(256) + Checkpoint.open(DRAFTS / "good").read_array("d2t")).tolist())
    inside = sum(t in kept for t in [0, 1, 2, 500, 501])
    assert cov["n_tokens"] == 15 and cov["intended"] == pytest.approx(inside / 5)
    assert inside < 5  # some of these ids are pruned from the draft vocab
    assert "LOW_VOCAB_COVERAGE" in {f["code"] for f in json.loads(out)["findings"]}


def _hashes(root):
    return {p.name: sha256_file(p) for p in root.iterdir() if p.is_file()}


def test_fix_d2t_repairs_absolute_without_touching_the_source(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(DRAFTS / "d2t-absolute", src)
    before = _hashes(src)
    result = convert_checkpoint(src, tmp_path / "fixed", fix_d2t=True)
    assert _hashes(src) == before
    assert result.checks["d2t_after"]["format"] == "offset"
    prov = json.loads((tmp_path / "fixed" / "eagle3_nb_provenance.json").read_text())
    assert prov["d2t_fix"]["before"] == "absolute"
    from eagle3_nb.io.checkpoint import Checkpoint
    fixed = Checkpoint.open(tmp_path / "fixed").read_array("d2t")
    good = Checkpoint.open(DRAFTS / "good").read_array("d2t")
    assert np.array_equal(fixed, good)


@pytest.mark.parametrize("variant", ["good", "d2t-missing"])
def test_fix_d2t_refuses_without_decisive_evidence(tmp_path, variant, run_cli):
    """The seed's destructive 'fix' of a correct table cannot happen here."""
    with pytest.raises(ConversionError, match="refused"):
        convert_checkpoint(DRAFTS / variant, tmp_path / "out", fix_d2t=True)
    assert not (tmp_path / "out").exists()
    rc, _, err = run_cli("convert", DRAFTS / variant, tmp_path / "out2", "--fix-d2t")
    assert rc == 2 and "refused" in err and not (tmp_path / "out2").exists()


def test_fix_d2t_rebuilds_missing_table_from_t2d(tmp_path):
    import torch
    from safetensors.torch import load_file as tload, save_file as tsave

    src = tmp_path / "src"
    shutil.copytree(DRAFTS / "good", src)
    t = tload(str(src / "model.safetensors"))
    del t["d2t"]
    tsave(t, str(src / "model.safetensors"), metadata={"format": "pt"})
    result = convert_checkpoint(src, tmp_path / "fixed", fix_d2t=True)
    assert result.checks["d2t_after"] == {"format": "offset", "t2d_agrees": True}
    assert torch.equal(tload(str(tmp_path / "fixed" / "model.safetensors"))["d2t"],
                       tload(str(DRAFTS / "good" / "model.safetensors"))["d2t"])


def test_offsets_with_arange_subtracted_are_recognised_and_repaired(run_cli, tmp_path):
    """The first seed story's mistaken repair: t2d proves the table, the wrong-target count is
    known (not "unknown"), and --fix-d2t restores the offsets."""
    import json as _json
    from eagle3_nb.io.checkpoint import Checkpoint

    rc, out, _ = run_cli("vocab", DRAFTS / "d2t-arange-subtracted", "--json")
    data = _json.loads(out)
    assert data["format"] == "arange_subtracted"
    assert all(e["n_wrong"] and e["n_wrong"] > 200 for e in data["engines"])
    fixed = tmp_path / "fixed"
    rc, out, err = run_cli("convert", DRAFTS / "d2t-arange-subtracted", fixed, "--fix-d2t")
    assert rc == 0, err
    assert (Checkpoint.open(fixed).read_array("d2t")
            == Checkpoint.open(DRAFTS / "good").read_array("d2t")).all()
