"""Every widget section has a static render of the selection the widget opens on, so the offline
report shows what the live notebook shows first (#17); and notebook 01's diff against a
known-good draft renders with or without one. The executed notebooks and their HTML are checked
in test_notebooks.py (test_widget_sections_*, test_notebook_01_compare_to_*)."""

from __future__ import annotations

import json

import pytest

from conftest import DRAFTS, REPO, TARGET_CONFIG

TOKENIZER = REPO / "data_samples" / "target" / "tokenizer.json"
WIDGET_CALLS = {"01_checkpoint_keys": ("engine_explorer(", "engine_view_html("),
                "02_d2t_mapping": ("vocab_lookup(", "lookup_view_html(")}


def inspect(sample: str) -> dict:
    from eagle3_nb.checks.load import inspect_checkpoint

    return inspect_checkpoint(DRAFTS / sample, None, TARGET_CONFIG, stats=False).to_json()


def mapping(sample: str):
    from eagle3_nb.config import parse_config
    from eagle3_nb.io.checkpoint import Checkpoint
    from eagle3_nb.vocab import VocabMapping

    ckpt = Checkpoint.open(DRAFTS / sample)
    return VocabMapping.from_checkpoint(ckpt, parse_config(ckpt.config_raw))


def test_the_explorer_opens_on_the_worst_engine_and_its_render_is_the_widget_view():
    from eagle3_nb.widgets import engine_view_html, first_engine, render_engine

    data = inspect("wrong-arch")
    worst = first_engine(data)
    assert [e["verdict"] for e in data["engines"] if e["profile"] == worst] == ["load_error"]
    html = engine_view_html(data, worst)
    assert html.endswith(render_engine(data, worst)) and "Static render of the widget" in html
    assert html._repr_html_() == str(html)  # a cell's value displays as HTML
    assert first_engine({"engines": []}) == "all"
    with pytest.raises(ValueError):
        engine_view_html(data, "nope==1")


def test_the_lookup_opens_on_a_suspicious_id_and_its_render_is_the_widget_view():
    from eagle3_nb.viz.vocab import lookup_html
    from eagle3_nb.vocab import load_tokenizer
    from eagle3_nb.widgets import first_lookup, lookup_view_html

    absolute = mapping("d2t-absolute")
    assert first_lookup(absolute) == f"d:{next(iter(absolute.suspicious_entries()))}"
    good = mapping("good")
    assert not good.suspicious_entries() and first_lookup(good) == "d:0"  # d2t[0] != 0 there
    tok = load_tokenizer(str(TOKENIZER))
    html = lookup_view_html(good, "d:0", tok)
    assert html.endswith(lookup_html(good, "d:0", tok)) and "<code>d:0</code>" in html
    assert first_lookup(mapping("d2t-missing")) == "d:0"


@pytest.mark.parametrize("notebook", sorted(WIDGET_CALLS))
def test_every_widget_cell_follows_its_static_render(notebook):
    widget, static = WIDGET_CALLS[notebook]
    cells = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    at = [i for i, src in enumerate(code) if widget in src and "display(" in src]
    assert len(at) == 1
    assert static in code[at[0] - 1], "the static render comes right before the widget"


def test_diff_html_with_and_without_a_known_good_draft():
    from eagle3_nb.checks.diff import diff_drafts
    from eagle3_nb.viz.diff import diff_html

    assert "no known-good draft given" in diff_html(None)
    html = diff_html(diff_drafts(DRAFTS / "good", DRAFTS / "nan-head", None, TARGET_CONFIG))
    assert "DRAFT_DIFFERS" in html and "lm_head.weight" in html and "NaN/Inf" in html
    same = diff_html(diff_drafts(DRAFTS / "good", DRAFTS / "good", None, TARGET_CONFIG))
    assert "no difference that changes what an engine builds or serves" in same


def test_diff_html_escapes_what_comes_from_a_checkpoint():
    from eagle3_nb.viz.diff import diff_html

    evil = "<script>alert(1)</script>"
    diff = {"good": evil, "other": "b", "layout": {}, "vocab": {"good": evil, "other": "x"},
            "findings": [{"severity": "error", "code": "DRAFT_DIFFERS", "message": evil}],
            "verdicts": [{"profile": evil, "good": "ok", "other": evil}],
            "tensors": [{"name": evil, "status": "only in good",
                         "good": {"shape": [2], "dtype": evil, "norm": 1.0}, "other": None}],
            "config": [{"field": evil, "good": {"value": evil, "source": evil}, "other": None,
                        "structural": True}]}
    assert evil not in diff_html(diff)
