"""Notebook 04 headless on the bundled tiny target, and check_acceptance on hidden-state dumps."""

import json
from html.parser import HTMLParser

import pytest

from conftest import DRAFTS, REPO, SAMPLES, write_dumps
from eagle3_nb.report.notebooks import render_html, run_notebook

NB04 = REPO / "notebooks" / "04_acceptance.ipynb"
TARGET = SAMPLES / "target"
pytestmark = pytest.mark.notebook
SGLANG_LOG = ("[2026-01-01 00:00:00] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, "
              "accept len: 1.03, accept rate: 0.01, cuda graph: True, "
              "gen throughput (token/s): 100.0, #queue-req: 0\n")


class TokenKinds(HTMLParser):
    def __init__(self):
        super().__init__()
        self.kinds, self.remote_scripts = {}, 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "data-kind" in attrs:
            self.kinds[attrs["data-kind"]] = self.kinds.get(attrs["data-kind"], 0) + 1
        if tag == "script" and (attrs.get("src") or "").startswith(("http:", "https:")):
            self.remote_scripts += 1


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    out = tmp_path_factory.mktemp("nb04")
    log = out / "sglang.log"
    log.write_text(SGLANG_LOG)
    notebook = run_notebook(NB04, out, {
        "checkpoint": str(DRAFTS / "layers0-flat"), "target": str(TARGET),
        "prompts": str(SAMPLES / "prompts.jsonl"), "n_samples": 3, "max_new_tokens": 24,
        "engine": "sglang:0.5.9,sglang:0.5.23", "observed": str(log), "device": "cpu",
        "output_dir": str(out)})
    return notebook, json.loads((out / "summary.json").read_text())


def test_summary_explains_the_silent_drop(executed):
    _, summary = executed
    assert summary["notebook"] == "04_acceptance"
    assert summary["headline"]["wiring"] == "trained"
    trained = summary["headline"]["mean_accept_length"]
    assert trained > 1.5
    assert summary["compare"]["wiring"] == "sglang==0.5.9"
    assert summary["compare"]["mean_accept_length"] - 1 <= (trained - 1) / 2
    what_if = summary["what_if"]
    assert what_if["observed_accept_length"] == pytest.approx(1.03)
    rows = {r["wiring"]: r for r in what_if["rows"]}
    assert rows["sglang==0.5.9"]["consistent"] and not rows["trained"]["consistent"]
    assert rows["sglang==0.5.23"]["mean_accept_length"] == pytest.approx(trained)
    codes = {(f["code"], f["engine"]) for f in summary["findings"]}
    assert ("ACCEPT_COLLAPSES", "sglang==0.5.9") in codes
    assert ("ACCEPT_COLLAPSES", "sglang==0.5.23") not in codes
    assert ("ACCEPT_MISMATCH", None) in codes
    assert summary["observed"]["engine"] == "sglang"


def test_rendered_page_is_offline_and_shows_every_token(executed, tmp_path):
    notebook, summary = executed
    html = render_html(notebook, tmp_path / "04.html").read_text()
    parser = TokenKinds()
    parser.feed(html)
    assert parser.remote_scripts == 0
    assert parser.kinds.get("accepted", 0) > 0 and parser.kinds.get("bonus", 0) > 0
    assert parser.kinds.get("rejected", 0) > 0
    assert "Which wiring reproduces the engine" in html and "plotly" in html


def test_dumps_give_teacher_forced_scores_labelled_as_such(tmp_path):
    """Every wiring the dump can feed, engines with their unloaded parameters reset: SGLang
    0.5.9 collapses layers0-flat here too; a wiring needing absent layers says so."""
    from eagle3_nb.checks.acceptance import check_acceptance
    from eagle3_nb.checks.options import AcceptanceOptions

    write_dumps(tmp_path, n=2)
    check = check_acceptance(DRAFTS / "layers0-flat", TARGET, options=AcceptanceOptions(
        hidden_states=tmp_path, num_steps=3, engines=["sglang==0.5.9", "sglang==0.5.23"]))
    summary = check.summary()
    assert summary["headline"] is None and summary["what_if"] is None
    scores = {s["wiring"]: s for s in summary["teacher_forced"]}
    assert set(scores) == {"trained", "single_layer", "sglang==0.5.9", "sglang==0.5.23"}
    assert "not an accept length" in scores["trained"]["metric"]
    first = {name: s["per_step_accuracy"][0] for name, s in scores.items()}
    assert first["trained"] > 2 * first["single_layer"]
    assert first["trained"] > 2 * first["sglang==0.5.9"]
    assert first["sglang==0.5.23"] == pytest.approx(first["trained"])
    only = check_acceptance(DRAFTS / "good", TARGET, options=AcceptanceOptions(
        hidden_states=tmp_path, num_steps=3, wiring="layers_plus_one", what_if=False)).summary()
    assert "needs a live target" in only["teacher_forced"][0]["unmeasured"]
    notebook = run_notebook(NB04, tmp_path / "nb", {
        "checkpoint": str(DRAFTS / "layers0-flat"), "target": str(TARGET),
        "hidden_states": str(tmp_path), "num_steps": 3, "engine": "sglang:0.5.9",
        "device": "cpu", "output_dir": str(tmp_path / "nb")})
    page = render_html(notebook, tmp_path / "nb" / "04.html").read_text()
    assert "Draft accuracy on the dumps, per step" in page and "not an accept length" in page
    saved = json.loads((tmp_path / "nb" / "summary.json").read_text())
    assert {s["wiring"] for s in saved["teacher_forced"]} >= {"trained", "sglang==0.5.9"}


def test_bad_wiring_and_missing_inputs_are_clear_errors():
    from eagle3_nb.checks.acceptance import check_acceptance
    from eagle3_nb.checks.options import AcceptanceOptions
    from eagle3_nb.errors import Eagle3NbError

    with pytest.raises(Eagle3NbError, match="no target"):
        check_acceptance(DRAFTS / "good")
    with pytest.raises(Eagle3NbError, match="unknown wiring"):
        check_acceptance(DRAFTS / "good", TARGET, SAMPLES / "prompts.jsonl", AcceptanceOptions(
            wiring="nope", n_samples=1, max_new_tokens=4, what_if=False))
