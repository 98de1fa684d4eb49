"""Notebook 02's renderers (eagle3_nb.viz.vocab), its lookup widget and summary digest, on the
bundled samples (good, d2t-leading-zeros, d2t-absolute, d2t-missing) and on hand-built
VocabMappings (ambiguous, out of range, repeated ids, unusable), asserted on the returned HTML,
dicts and figures. Expected ids and counts on a bundled sample are computed from the tensors in
its file (`arrays`), so regenerating the samples does not silently change what is asserted."""

from __future__ import annotations

import html as _html
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import DRAFTS, SAMPLE_ENGINES, table_rows
from eagle3_nb.engines import resolve_engines
from eagle3_nb.checks.vocab import check_vocab
from eagle3_nb.viz import vocab as vv
from eagle3_nb.viz.html import HTMLString
from eagle3_nb.vocab import VocabMapping, build_from_counts, load_tokenizer

EVIL = "<script>alert(1)</script>"
EVIL_ID = 3     # a kept target id of the good sample (asserted in the test that needs it)
NUMBER_ID = 42  # the token "42": looked up quoted
UNK_ID = 511


def write_tokenizer(path: Path, size: int = 512) -> Path:
    """A WordLevel tokenizer over `size` tokens `tok{i}` (id 3 is a script tag, id 42 the token
    "42", the last one [UNK]), split on whitespace, saved as tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    names = {i: f"tok{i}" for i in range(size)}
    names.update({EVIL_ID: EVIL, NUMBER_ID: "42", size - 1: "[UNK]"})
    tok = Tokenizer(models.WordLevel({n: i for i, n in names.items()}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path / "tokenizer.json"


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(write_tokenizer(tmp_path_factory.mktemp("tok")))


_cache: dict[str, tuple[dict, VocabMapping]] = {}


def sample(name: str) -> tuple[dict, VocabMapping]:
    """(check_vocab's JSON, VocabMapping) of a bundled sample, cached."""
    if name not in _cache:
        path = DRAFTS / name
        if not path.is_dir():
            pytest.skip(f"bundled sample {name} not built (make samples)")
        from eagle3_nb.io.checkpoint import Checkpoint
        from eagle3_nb.config import parse_config

        ckpt = Checkpoint.open(path)
        _cache[name] = (check_vocab(path, engines=SAMPLE_ENGINES).to_json(),
                        VocabMapping.from_checkpoint(ckpt, parse_config(ckpt.config_raw)))
    return _cache[name]


VT = 512  # the samples' target vocab: a target id >= VT does not exist


def arrays(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d2t, t2d, arange + d2t) read straight from a bundled sample's file (not through
    VocabMapping): the expected values of the tests on that sample. `arange + d2t` is what
    every engine computes; ids >= VT are out of range."""
    path = DRAFTS / name
    if not path.is_dir():
        pytest.skip(f"bundled sample {name} not built (make samples)")
    from eagle3_nb.io.checkpoint import Checkpoint

    ckpt = Checkpoint.open(path)
    d2t = np.asarray(ckpt.read_array("d2t")).astype(np.int64)
    t2d = np.asarray(ckpt.read_array("t2d")).astype(bool)
    assert d2t.shape == (256,) and t2d.shape == (VT,)
    return d2t, t2d, np.arange(len(d2t)) + d2t


def plain_offset_entry(name: str = "good") -> tuple[int, int]:
    """(draft id j, target id j + d2t[j]) of a bundled sample with d2t[j] != 0 and a plain
    `tok{n}` token at the target (not the script tag, "42" or [UNK]): the middle such entry."""
    d2t, t2d, ids = arrays(name)
    cand = [j for j in range(len(d2t))
            if d2t[j] != 0 and t2d[ids[j]] and ids[j] not in (EVIL_ID, NUMBER_ID, UNK_ID)]
    assert cand, f"{name}: no kept target away from its draft id"
    j = cand[len(cand) // 2]
    assert int(ids[j]) != j
    return j, int(ids[j])


def data_of(m: VocabMapping) -> dict:
    """The check_vocab dict for a hand-built mapping (every engine profile). A d2t that failed
    the shape/dtype checks gets no engine rows (VocabMapping.engine_view raises KeyError on it)."""
    profiles = resolve_engines(None)
    off = m.readings.get("offsets")
    view = m.engine_view(profiles) if (m.readings or m.d2t is None) else []
    return {"checkpoint": "hand-built", "format": m.format, "valid": m.valid(profiles),
            "draft_vocab_size": m.draft_vocab_size, "target_vocab_size": m.vocab_size,
            "n_out_of_range": off.n_out_of_range if off else 0,
            "n_duplicates": off.n_duplicates if off else 0, "t2d_agrees": m.t2d_agrees,
            "evidence": m.evidence, "problems": m.problems,
            "engines": [{k: r[k] for k in ("engine", "version", "profile", "param", "n_wrong",
                                            "n_out_of_range")} for r in view],
            "coverage": None, "findings": [f.to_json() for f in m.findings()], "tokenizer": None}


def ambiguous() -> VocabMapping:
    m = VocabMapping(4, 32, np.array([1, 3, 6, 10]), None)
    assert m.format == "ambiguous"
    return m


def duplicated() -> VocabMapping:
    m = VocabMapping(8, 32, np.array([0, 0, -1, 0, 0, 0, 0, 0]), None)  # offsets 0,1,1,3,...
    assert m.format == "invalid"
    return m


def out_of_range() -> VocabMapping:
    t2d = np.zeros(16, bool)
    t2d[[0, 1, 2, 5]] = True
    m = VocabMapping(4, 16, np.array([0, 0, 0, 20]), t2d)  # 3 + 20 = 23 >= 16
    assert m.format == "invalid" and m.problems == ["neither reading agrees with t2d"]
    return m


def rows_of(html: str) -> list[list[str]]:
    return [[text for text, _title, _style in row] for row in table_rows(html)]


def first_cells(html: str) -> list[str]:
    return [r[0].strip() for r in rows_of(html) if r]


# ----------------------------------------------------------------------------- verdict

def test_verdict_good_is_valid_with_checkable_evidence_first():
    data, m = sample("good")
    d2t, t2d, ids = arrays("good")
    html = vv.verdict_html(data, m)
    assert "VALID for every engine" in html and "d2t format: OFFSETS" in html
    for line in data["evidence"]:
        assert _html.escape(line) in html
    assert html.index("Evidence") < html.index("Spot checks") < html.index("What to do")
    # spot check of the first nonzero offset: i + d2t[i], and t2d marks that target
    k = int(np.flatnonzero(d2t)[0])
    assert t2d[ids[k]]
    row = [r for r in rows_of(html) if r and r[0].strip() == str(k)][0]
    assert row[1].strip() == str(d2t[k])
    assert f"{k} + {d2t[k]} = {ids[k]}" in row[2] and f"t2d[{ids[k]}] = True" in row[2]
    assert "Nothing to fix" in html and "--fix-d2t" not in html
    # the leading-zeros note appears exactly when d2t starts with a run of (2 or more) zeros
    lz = int(np.flatnonzero(d2t)[0]) if d2t.any() else len(d2t)
    assert ("are all 0" in html) == (lz >= 2)


def test_verdict_leading_zeros_are_right_and_the_view_says_so():
    # the first seed story: a correct offset table whose first entries are 0
    from eagle3_nb.samples.build import LEADING_IDS

    data, m = sample("d2t-leading-zeros")
    d2t, t2d, ids = arrays("d2t-leading-zeros")
    k = int(np.flatnonzero(d2t)[0])
    assert k >= LEADING_IDS >= 2 and t2d[:k].all() and t2d[ids[k]]
    html = vv.verdict_html(data, m)
    assert "VALID for every engine" in html and "d2t format: OFFSETS" in html
    assert f"d2t[0:{k}] are all 0" in html and "not a sign of a bug" in html
    assert f"t2d[0:{k}] is all True" in html
    assert f"t2d[{ids[k]}] = True" in html and "Nothing to fix" in html
    assert "--fix-d2t" not in html


def test_verdict_absolute_says_not_valid_and_how_to_repair():
    data, m = sample("d2t-absolute")
    d2t, t2d, ids = arrays("d2t-absolute")
    assert np.array_equal(d2t, np.flatnonzero(t2d))  # the sample's premise: absolute ids
    bad = np.flatnonzero(ids >= VT)
    assert len(bad) > 0
    html = vv.verdict_html(data, m)
    assert "NOT VALID" in html and "ABSOLUTE IDS" in html and "D2T_ABSOLUTE" in html
    assert "eagle3-nb convert SRC DST --fix-d2t" in html and "never modified" in html
    # the first out-of-range draft id is spot-checked: i + d2t[i] does not exist
    i = int(bad[0])
    row = [r for r in rows_of(html) if r and r[0].strip() == str(i)][0]
    assert f"{i} + {d2t[i]} = {ids[i]}" in row[2] and "outside [0, 512)" in row[2]
    assert "are all 0" not in html  # no "leading zeros are fine" note for an absolute table
    assert html.index("Evidence") < html.index("Findings")


def test_verdict_missing_and_ambiguous():
    data, m = sample("d2t-missing")
    html = vv.verdict_html(data, m)
    assert "NOT VALID" in html and "MISSING" in html and "D2T_MISSING" in html
    assert "draft id i as target id i" in html
    amb = ambiguous()
    html = vv.verdict_html(data_of(amb), amb)
    assert "UNDECIDED" in html and "AMBIGUOUS" in html and "D2T_AMBIGUOUS" in html
    assert "Change nothing on a guess" in html and "nothing in the file proves it" in html
    assert "--fix-d2t" not in html


def test_verdict_without_mapping_and_for_an_unusable_table():
    data, _ = sample("good")
    html = vv.verdict_html(data)
    assert "VALID for every engine" in html and "Spot checks" not in html
    bad = VocabMapping(4, 8, np.array([0.0, 0, 0, 9]), None)
    html = vv.verdict_html(data_of(bad), bad)
    assert "INVALID" in html and "dtype float64" in html
    assert "not a usable table" in vv.entries_table_html(bad)
    assert vv.lookup(bad, "1")["notes"][0].startswith("d2t is not a usable table")
    assert len(vv.mapping_figure(bad).data) == 0


# ----------------------------------------------------------------------------- entries

def test_entries_good_lists_first_and_last_and_nothing_suspicious():
    _, m = sample("good")
    html = vv.entries_table_html(m, n_first=12)
    ids = [c for c in first_cells(html) if c.isdigit()]
    assert ids == [str(i) for i in range(12)] + ["255"]
    assert "0 suspicious entries of 256" in html and "the trainer&#x27;s intent" in html
    assert "243 entries not listed" in html


def _digit_rows(html: str) -> dict[str, list[str]]:
    return {r[0].strip(): r for r in rows_of(html) if r and r[0].strip().isdigit()}


def test_entries_absolute_lists_every_out_of_range_draft_id():
    _, m = sample("d2t-absolute")
    d2t, _, ids = arrays("d2t-absolute")
    bad = np.flatnonzero(ids >= VT)
    n_sus = int((ids != d2t).sum())  # every entry where engines and trainer disagree
    assert len(bad) > 0 and n_sus >= len(bad)
    sus = m.suspicious_entries()
    assert len(sus) == n_sus
    assert list(sus)[:len(bad)] == bad.tolist()  # out of range: the most serious, first
    # with room for all of them, every out-of-range draft id gets a row
    html = vv.entries_table_html(m, max_rows=len(bad))
    rows = _digit_rows(html)
    for i in bad.tolist():
        row = rows[str(i)]
        assert str(ids[i]) in row[2] and "outside [0, 512)" in row[2]
        assert row[3].strip() == str(d2t[i])  # the absolute reading, the trainer's intent
        assert "outside [0, 512)" in row[-1] and "the trainer meant" in row[-1]
    assert "out of range / yes" in [r[4] for r in rows.values()]
    more = f"; the {len(bad)} most serious listed" if n_sus > len(bad) else ""
    assert f"{n_sus} suspicious entries of 256{more}" in html
    # by default the MAX_ROWS most serious: the first out-of-range ones, the rest left out
    html = vv.entries_table_html(m)
    rows = _digit_rows(html)
    shown, hidden = bad[:vv.MAX_ROWS].tolist(), bad[vv.MAX_ROWS:].tolist()
    assert all("outside [0, 512)" in rows[str(i)][-1] for i in shown)
    always = set(range(12)) | {len(d2t) - 1}  # the first entries and the last one
    assert not [i for i in hidden if str(i) in rows and i not in always]
    if n_sus > vv.MAX_ROWS:
        assert f"{n_sus} suspicious entries of 256; the {vv.MAX_ROWS} most serious listed" in html


def test_entries_hand_built_duplicates_and_out_of_range():
    m = duplicated()
    sus = m.suspicious_entries()
    assert "as offsets: target 1 repeats draft id 1's" in sus[2]
    assert any("as absolute: d2t[i] = -1 is outside [0, 32)" in r for r in sus[2])
    assert any("d2t[2] = -1 < d2t[1] = 0" in r for r in sus[2])
    html = vv.entries_table_html(m)
    assert "repeats draft id 1&#x27;s" in html
    m = out_of_range()
    sus = m.suspicious_entries()
    assert list(sus)[0] == 3 and "as offsets: i + d2t[i] = 23 is outside [0, 16)" in sus[3]
    html = vv.entries_table_html(m)
    row = [r for r in rows_of(html) if r and r[0].strip() == "3"][0]
    assert "23" in row[2] and "outside" in row[2]


def test_entries_missing_without_t2d():
    _, m = sample("d2t-missing")
    html = vv.entries_table_html(m)
    assert "no d2t: i" in html and "no t2d in the checkpoint" in html
    assert m.suspicious_entries() == {}


def test_entries_show_escaped_token_strings(tok):
    _, m = sample("good")
    _, t2d, ids = arrays("good")
    assert t2d[EVIL_ID] and EVIL_ID in ids[:12].tolist()  # among the first rows listed
    html = vv.entries_table_html(m, tok)
    row = _digit_rows(html)["5"]  # draft id 5 -> target ids[5], shown as a Python literal
    assert f"&#x27;tok{ids[5]}&#x27;" in _html.escape(row[2])
    assert EVIL not in html and "<script" not in html
    assert _html.escape(repr(EVIL)) in html


# ----------------------------------------------------------------------------- engines, coverage

def test_engines_html_per_engine_counts():
    data, _ = sample("d2t-absolute")
    d2t, _, ids = arrays("d2t-absolute")
    n_wrong, n_out = int((ids != d2t).sum()), int((ids >= VT).sum())
    assert n_wrong > 0 and n_out > 0
    html = vv.engines_html(data)
    rows = {r[0]: r for r in rows_of(html)}
    assert rows["sglang==0.5.9"][1] == "hot_token_id"
    assert "hot_token_id = d2t + arange(Vd)" in rows["sglang==0.5.9"][2]
    assert rows["vllm==0.33"][1] == "draft_id_to_target_id"
    assert f"{n_wrong} of 256" in rows["vllm==0.33"][3] and rows["vllm==0.33"][4] == str(n_out)
    assert rows["vllm==0.33"][5] == "WRONG"
    good = {r[0]: r for r in rows_of(vv.engines_html(sample("good")[0]))}
    assert all(r[5] == "right" and "0 of 256" in r[3] for k, r in good.items() if k != "engine")
    missing = vv.engines_html(sample("d2t-missing")[0])
    assert "no d2t: target = draft id" in missing and "WRONG" in missing
    amb = vv.engines_html(data_of(ambiguous()))
    assert "undecided" in amb and "WRONG" not in amb


def test_coverage_html():
    data, _ = sample("good")
    assert "no corpus given" in vv.coverage_html(data)
    html = vv.coverage_html(dict(data, coverage={"intended": 0.75, "as_engines_read_it": 0.5,
                                                 "n_tokens": 400}))
    assert "75.0%" in html and "50.0%" in html and "ceiling" in html and "400" in html
    html = vv.coverage_html(dict(data, coverage={"intended": None, "as_engines_read_it": 0.9,
                                                 "n_tokens": 10}))
    assert "unknown (intent undecided)" in html and "90.0%" in html


# ----------------------------------------------------------------------------- lookup

def test_lookup_draft_and_target_ids_on_good():
    _, m = sample("good")
    k = int(np.flatnonzero(m.d2t)[0])
    target = k + int(m.d2t[k])
    r = vv.lookup(m, f"d:{k}")
    assert r["targets"] == [] and r["draft"]["d2t"] == int(m.d2t[k])
    assert r["draft"]["offsets"] == {"target_id": target, "in_range": True, "in_t2d": True,
                                     "token": None}
    assert r["draft"]["engines"] == r["draft"]["intended"] == target
    r = vv.lookup(m, f"t:{target}")
    assert r["draft"] is None and r["targets"][0]["draft_ids"]["offsets"] == [k]
    assert r["targets"][0]["in_t2d"] is True and r["targets"][0]["intended"] == [k]
    both = vv.lookup(m, np.int64(5))
    assert both["draft"]["draft_id"] == 5 and both["targets"][0]["target_id"] == 5
    not_kept = int(np.flatnonzero(~m.t2d)[0])
    r = vv.lookup(m, f"target {not_kept}")
    assert r["targets"][0]["in_t2d"] is False and r["targets"][0]["draft_ids"]["offsets"] == []


def test_lookup_on_absolute_shows_both_readings():
    _, m = sample("d2t-absolute")
    d2t, _, ids = arrays("d2t-absolute")
    i = int(np.flatnonzero(ids >= VT)[0])  # the first draft id engines send out of range
    r = vv.lookup(m, f"d:{i}")["draft"]
    assert r["offsets"]["target_id"] == ids[i] and not r["offsets"]["in_range"]
    assert r["absolute"]["target_id"] == d2t[i] and r["absolute"]["in_t2d"] is True
    assert r["intended"] == d2t[i] != r["engines"]
    t = int(d2t[100])
    r = vv.lookup(m, f"t:{t}")["targets"][0]
    assert r["draft_ids"]["absolute"] == [100] and r["intended"] == [100]
    assert r["draft_ids"]["offsets"] == np.flatnonzero(ids == t).tolist()
    html = vv.lookup_html(m, f"d:{i}")
    assert f"engines compute {ids[i]}, the trainer meant {d2t[i]}" in html


def test_lookup_token_strings(tok):
    _, m = sample("good")
    j, t = plain_offset_entry("good")  # draft id j -> target t != j
    r = vv.lookup(m, f"tok{t}", tok)
    assert r["targets"][0]["target_id"] == t and r["targets"][0]["token"] == f"tok{t}"
    assert r["targets"][0]["draft_ids"]["offsets"] == [j] and r["draft"] is None
    assert vv.lookup(m, "'42'", tok)["targets"][0]["target_id"] == NUMBER_ID
    # a bare number is a draft id (its token: the target it maps to) and a target id
    _, _, ids = arrays("good")
    bare = vv.lookup(m, "42", tok)
    assert bare["draft"]["offsets"]["target_id"] == ids[NUMBER_ID]
    assert bare["draft"]["offsets"]["token"] == tok.id_to_token(int(ids[NUMBER_ID]))
    assert bare["targets"][0]["target_id"] == NUMBER_ID and bare["targets"][0]["token"] == "42"
    multi = vv.lookup(m, "tok1 tok2", tok)
    assert [t["target_id"] for t in multi["targets"]] == [1, 2]
    assert "encodes to 2 token(s)" in multi["notes"][0]
    assert "needs a tokenizer" in vv.lookup(m, f"tok{t}")["notes"][0]
    assert "not a draft id" in vv.lookup(m, "d:999")["notes"][0]
    assert "not a target id" in vv.lookup(m, "t:-1")["notes"][0]
    assert "empty query" in vv.lookup(m, "  ")["notes"][0]


def test_lookup_html_escapes_the_query_and_tokens(tok):
    _, m = sample("good")
    html = vv.lookup_html(m, EVIL, tok)
    assert "<script" not in html and "&lt;script&gt;" in html
    r = vv.lookup(m, EVIL, tok)
    assert r["targets"][0]["target_id"] == EVIL_ID
    html = vv.lookup_html(m, '<img src=x onerror="alert(2)">', tok)
    assert "<img" not in html


def test_lookup_missing_and_ambiguous():
    _, m = sample("d2t-missing")
    r = vv.lookup(m, "7")
    assert r["draft"]["d2t"] is None and r["draft"]["absolute"] is None
    assert r["draft"]["engines"] == 7 and r["draft"]["intended"] is None
    assert "no d2t: engines use the draft id" in vv.lookup_html(m, "7")
    amb = ambiguous()
    r = vv.lookup(amb, "d:2")["draft"]
    assert r["offsets"]["target_id"] == 8 and r["absolute"]["target_id"] == 6
    assert r["intended"] is None
    assert "undecided" in vv.lookup_html(amb, "d:2")


# ----------------------------------------------------------------------------- figure

def _traces(fig) -> dict:
    return {t.name: t for t in fig.data if t.name}


def test_figure_good_traces_and_vocab_boundary():
    _, m = sample("good")
    fig = vv.mapping_figure(m)
    tr = _traces(fig)
    off = tr["i + d2t[i] (offsets): what engines compute"]
    assert list(off.x) == list(range(256))
    assert list(off.y) == (np.arange(256) + m.d2t).tolist()
    assert list(tr["nonzero(t2d)[i]: the ids training kept"].y) == np.flatnonzero(m.t2d).tolist()
    assert tr["d2t[i] (absolute reading)"].visible == "legendonly"  # right table: hidden
    assert not any("outside" in n for n in tr)
    assert [t.yaxis for t in fig.data if t.name == "d2t[i]"] == ["y2"]
    assert any(s.y0 == 512 and s.y1 == 512 for s in fig.layout.shapes)
    assert "OFFSETS" in fig.layout.title.text and "all 256 draft ids" in fig.layout.title.text


def test_figure_absolute_marks_out_of_range():
    _, m = sample("d2t-absolute")
    _, _, ids = arrays("d2t-absolute")
    bad = np.flatnonzero(ids >= VT)
    assert len(bad) > 0
    tr = _traces(vv.mapping_figure(m))
    assert tr["d2t[i] (absolute reading)"].visible is True
    out = tr["outside [0, 512): no such target id"]
    assert list(out.x) == bad.tolist() and list(out.y) == ids[bad].tolist()
    assert all(y >= 512 for y in out.y)


def test_figure_missing_and_duplicates():
    _, m = sample("d2t-missing")
    fig = vv.mapping_figure(m)
    assert [t.name for t in fig.data] == ["no d2t: engines use target id = draft id", "no d2t"]
    assert list(fig.data[0].y) == list(range(256)) and fig.data[1].yaxis == "y2"
    assert any("no d2t stored" in a.text for a in fig.layout.annotations)
    tr = _traces(vv.mapping_figure(duplicated()))
    assert 2 in list(tr["repeated target id"].x)


def test_figure_downsamples_a_32000_entry_table():
    import plotly.io as pio

    rng = np.random.default_rng(0)
    m = build_from_counts(rng.zipf(1.3, 163840), 32000, 163840)
    fig = vv.mapping_figure(m)
    assert all(len(t.x) <= vv.MAX_POINTS for t in fig.data)
    assert "of 32000 draft ids" in fig.layout.title.text
    assert len(pio.to_html(fig, include_plotlyjs=False, full_html=False)) < 600_000
    broken = VocabMapping(32000, 163840, np.arange(32000) + m.d2t, m.t2d)  # absolute ids
    assert broken.format == "absolute"
    tr = _traces(vv.mapping_figure(broken))
    bad = np.flatnonzero(np.arange(32000) + broken.d2t >= 163840)
    out = tr["outside [0, 163840): no such target id"]
    assert list(out.x) == bad[:vv.MAX_POINTS].tolist()
    assert set(out.x) <= set(tr["i + d2t[i] (offsets): what engines compute"].x)
    html = vv.entries_table_html(broken)
    assert len(html) < 200_000 and str(bad[0]) in first_cells(html)


# ----------------------------------------------------------------------------- contract

def test_renderers_return_html_strings_and_display(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    data, m = sample("d2t-absolute")
    calls = [lambda **kw: vv.verdict_html(data, m, **kw), lambda **kw: vv.engines_html(data, **kw),
             lambda **kw: vv.coverage_html(data, **kw),
             lambda **kw: vv.entries_table_html(m, **kw),
             lambda **kw: vv.lookup_html(m, "224", **kw)]
    for render in calls:
        html = render()
        assert isinstance(html, HTMLString) and html._repr_html_() == str(html)
        assert "http" not in html and "src=" not in html and "<script" not in html
        assert "class=" not in html
        assert render(display=True) == html
    assert len(shown) == len(calls)


def test_identity_mapping_renders():
    m = VocabMapping(8, 8, np.zeros(8, np.int64), np.ones(8, bool))
    assert m.format == "identity"
    assert "IDENTITY" in vv.verdict_html(data_of(m), m)
    assert "d2t[i] (absolute reading)" not in _traces(vv.mapping_figure(m))
    assert m.suspicious_entries() == {}


def test_vocab_summary_is_json_and_complete():
    vocab = check_vocab(DRAFTS / "d2t-absolute", engines=SAMPLE_ENGINES)
    d2t, _, ids = arrays("d2t-absolute")
    n_wrong, n_out = int((ids != d2t).sum()), int((ids >= VT).sum())
    assert n_wrong > 0 and n_out > 0
    assert vocab.kind == "vocab" and vocab.mapping.format == "absolute"
    s = vocab.summary()
    json.dumps(s)
    assert s["notebook"] == "02_d2t_mapping" and s["format"] == "absolute"
    assert s["valid"] is False and s["codes"] == ["D2T_ABSOLUTE"] and s["n_errors"] == 1
    assert s["engines"]["vllm==0.33"] == {"param": "draft_id_to_target_id", "n_wrong": n_wrong,
                                          "n_out_of_range": n_out}
    assert s["n_out_of_range"] == n_out
    assert s["coverage"] is None


def test_vocab_lookup_widget_rerenders(tok):
    pytest.importorskip("ipywidgets")
    from eagle3_nb.widgets import LOOKUP_HINT, vocab_lookup

    _, m = sample("good")
    j, t = plain_offset_entry("good")  # draft id j -> target t != j
    box = vocab_lookup(m, tok)
    text, view = box.children
    assert view.value == LOOKUP_HINT
    text.value = f"tok{t}"
    assert view.value == vv.lookup_html(m, f"tok{t}", tok) and f"[{j}]" in view.value
    text.value = ""
    assert view.value == LOOKUP_HINT
    assert vocab_lookup(m, query="d:5").children[1].value == vv.lookup_html(m, "d:5")


def test_verdict_offsets_with_a_disagreeing_t2d_does_not_say_nothing_to_fix():
    t2d = np.zeros(32, bool)
    t2d[[0, 1, 2, 9]] = True
    m = VocabMapping(4, 32, np.array([0, 0, 0, 4]), t2d)  # offsets 0,1,2,7; t2d keeps 9
    assert m.format == "offset" and m.t2d_agrees is False
    html = vv.verdict_html(data_of(m), m)
    assert "T2D_MISMATCH" in html and "Nothing to fix" not in html and "same vocab cache" in html
    assert "as offsets: target 7 is not marked in t2d" in m.suspicious_entries()[3]
