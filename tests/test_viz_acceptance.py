"""Notebook 04's renderers (eagle3_nb.viz.acceptance) on a real simulation: the good sample draft
on the bundled target, two short prompts, under the trained wiring and a broken one (the
final-norm state alone, fc skipped). Expected counts, ids and rates are recomputed from the
result's own steps, so retraining the samples does not silently change what is asserted. Token
spans are found by their `data-kind` attribute with html.parser, not by their colours."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from conftest import DRAFTS, REPO, SAMPLES, table_rows
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.viz import acceptance as va
from eagle3_nb.viz.html import HTMLString, fmt_num

pytestmark = pytest.mark.slow  # runs the target model: make test, not make test-fast

TARGET = SAMPLES / "target"
K = 4


@pytest.fixture(scope="module")
def sim():
    """(trained result, broken result, decode): a few seconds on CPU."""
    from eagle3_nb.acceptance import simulate
    from eagle3_nb.session import read_prompts
    from eagle3_nb.model import load_draft
    from eagle3_nb.target import TargetModel
    from eagle3_nb.model import Wiring

    draft, target = load_draft(DRAFTS / "good", embed_from=TARGET), TargetModel.load(TARGET)
    prompts = [p[:40] for p in read_prompts(SAMPLES / "prompts.jsonl", target, 2)]
    runs = [simulate(draft, target, prompts, num_steps=K, max_new_tokens=24, wiring=w)
            for w in (Wiring("trained", (2, 4, 5)),
                      Wiring("single_layer", None, "final_norm", "engine"))]
    return runs[0], runs[1], (lambda i: target.tokenizer.decode([i]))


class Spans(HTMLParser):
    """Token spans (kind, id, title, text) in order, and the number of verify-step wrappers."""

    def __init__(self, html: str):
        super().__init__()
        self.tokens: list[dict] = []
        self.steps = 0
        self._current = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.steps += "data-step" in a
        if "data-kind" in a:
            self._current = {"kind": a["data-kind"], "id": int(a["data-id"]),
                             "title": a.get("title", ""), "style": a.get("style", ""), "text": ""}
            self.tokens.append(self._current)

    def handle_endtag(self, tag):
        if tag == "span":
            self._current = None

    def handle_data(self, data):
        if self._current is not None:
            self._current["text"] += data

    def of(self, *kinds):
        return [t for t in self.tokens if t["kind"] in kinds]


# ----------------------------------------------------------------------------- token strip

def test_strip_has_one_span_per_token_the_steps_name(sim):
    for result in sim[:2]:
        for s, run in enumerate(result.samples):
            p = Spans(va.token_strip(result, sample=s))
            assert len(p.of("accepted")) == sum(st.accepted for st in run.steps)
            assert len(p.of("bonus")) == p.steps == len(run.steps)
            assert len(p.of("rejected")) == sum(K - st.accepted for st in run.steps)
            assert len(p.of("first")) == 1
            assert len(p.of("prompt")) == min(va.PROMPT_TAIL, len(run.prompt))


def test_strip_committed_ids_are_the_generated_tokens(sim):
    for result in sim[:2]:
        for s, run in enumerate(result.samples):
            p = Spans(va.token_strip(result, sample=s))
            assert [t["id"] for t in p.of("first", "accepted", "bonus")] == run.generated
            assert [t["id"] for t in p.of("rejected")] == [
                d for st in run.steps for d in st.drafted[st.accepted:]]
            assert [t["id"] for t in p.of("prompt")] == run.prompt[-va.PROMPT_TAIL:]


def test_broken_wiring_shows_more_rejected_tokens(sim):
    trained, broken, _ = sim

    def rejected(result):
        return sum(len(Spans(va.token_strip(result, sample=s)).of("rejected"))
                   for s in range(len(result.samples)))
    assert rejected(broken) > rejected(trained)


def test_strip_hover_names_step_position_candidates_and_target(sim):
    trained, _, decode = sim
    run = trained.samples[0]
    step = run.steps[0]
    p = Spans(va.token_strip(trained, decode=decode))
    first_step = p.of("accepted", "bonus", "rejected")[:K + 1]
    title = first_step[0]["title"]
    top_id, top_p = step.candidates[0][0]
    assert "verify step 0" in title and f"context position {step.position}" in title
    assert f"{va.token_text(int(top_id), decode)!r} #{int(top_id)} {top_p:.2f}" in title
    assert f"target: {va.token_text(step.target[0], decode)!r}" in title
    bonus = p.of("bonus")[0]
    assert f"context position {step.position + step.accepted} " in bonus["title"]
    # without a decoder, ids stand in for the text
    plain = Spans(va.token_strip(trained)).of("accepted", "bonus", "rejected")[0]
    assert plain["text"] == f"#{step.drafted[0] if step.accepted else step.bonus}"
    assert f"#{int(top_id)} {top_p:.2f}" in plain["title"]


def test_strip_escapes_decoded_text(sim):
    html = va.token_strip(sim[0], decode=lambda i: "<script>x</script>")
    assert "<script" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert all(t["text"] == "<script>x</script>" for t in Spans(html).tokens)


def test_strip_makes_whitespace_visible(sim):
    p = Spans(va.token_strip(sim[0], decode=lambda i: "a\nb\t c"))
    assert {t["text"] for t in p.tokens} == {"a⏎b⇥ c"}
    assert all("white-space:pre" in t["style"] for t in p.tokens)
    assert va.token_text(1, lambda i: "") == "∅"
    assert va.token_text(1, lambda i: "\x1b[31m") == "\\x1b[31m"


def test_strip_header_and_max_steps(sim):
    trained, _, decode = sim
    run = trained.samples[1]
    html = va.token_strip(trained, decode=decode, sample=1, max_steps=2)
    assert isinstance(html, HTMLString)
    p = Spans(html)
    assert p.steps == 2 and f"{len(run.steps) - 2} more verify steps" in html
    mean = (sum(s.accepted for s in run.steps) + len(run.steps)) / len(run.steps)
    assert f"accept length <b>{fmt_num(mean, 3)}</b>" in html
    assert "sample 1" in html and "trained" in html and f"{len(run.steps)} verify steps" in html
    with pytest.raises(IndexError):
        va.token_strip(trained, sample=len(trained.samples))


def test_dict_and_object_give_the_same_output(sim):
    trained, broken, decode = sim
    data = json.loads(json.dumps(trained.to_json(with_steps=True)))  # as read from a file
    assert va.token_strip(data, decode) == va.token_strip(trained, decode)
    assert va.compare_html(data, broken) == va.compare_html(trained, broken)
    assert va.headline_html(data) == va.headline_html(trained)
    assert va.context_heatmap(data).to_json() == va.context_heatmap(trained).to_json()
    assert va.per_position_bars(data).to_json() == va.per_position_bars(trained).to_json()
    with pytest.raises(Eagle3NbError):
        va.token_strip(trained.to_json())          # no steps in it


# ----------------------------------------------------------------------------- figures

def test_accept_length_histogram_is_the_stats_normalised(sim):
    trained, broken, _ = sim
    fig = va.accept_length_histogram([trained, broken.to_json()])
    assert [b.name for b in fig.data] == ["trained", "single_layer"]
    for bar, result in zip(fig.data, (trained, broken)):
        stats = result.stats()
        n = stats["n_verify_steps"]
        assert list(bar.x) == list(range(1, K + 2))
        assert sum(bar.y) == pytest.approx(1.0)
        assert [y * n for y in bar.y] == pytest.approx(
            [stats["accept_length_histogram"][str(x)] for x in bar.x])
    import plotly.io as pio
    assert fig.layout.template == pio.templates["plotly_white"]
    assert len(va.accept_length_histogram(trained).data) == 1


def test_per_position_bars_are_the_stats(sim):
    trained, broken, _ = sim
    fig = va.per_position_bars([trained, broken])
    bars = [t for t in fig.data if t.type == "bar"]
    lines = [t for t in fig.data if t.type == "scatter"]
    for bar, line, result in zip(bars, lines, (trained, broken)):
        stats = result.stats()
        assert list(bar.x) == list(range(1, K + 1))
        assert list(bar.y) == stats["per_position_acceptance"]
        assert list(line.y) == stats["conditional_acceptance"]
        passed = [sum(s.accepted > i for s in result.steps) for i in range(K)]
        assert [c[0] for c in bar.customdata] == passed
    assert list(lines[1].y)[1:] == [None] * (K - 1)   # nothing accepted: nothing reached 2..k


def hand_cells(result, bucket, conditional=False):
    cells = {}
    for run in result.samples:
        for s in run.steps:
            b = (s.position - len(run.prompt)) // bucket
            for j in range(K):
                if conditional and s.accepted < j:
                    continue
                acc, n = cells.get((j, b), (0, 0))
                cells[(j, b)] = (acc + (s.accepted > j), n + 1)
    return cells


@pytest.mark.parametrize("conditional", [False, True])
def test_context_heatmap_matches_a_hand_count(sim, conditional):
    for result in sim[:2]:
        fig = va.context_heatmap(result, bucket=8, conditional=conditional)
        hm = fig.data[0]
        cells = hand_cells(result, 8, conditional)
        nb = max(b for _, b in cells) + 1
        assert list(hm.x) == [f"{8 * b}-{8 * b + 7}" for b in range(nb)]
        assert list(hm.y) == list(range(1, K + 1))
        for j in range(K):
            for b in range(nb):
                if (j, b) in cells:
                    acc, n = cells[(j, b)]
                    assert hm.z[j][b] == pytest.approx(acc / n)
                    assert list(hm.customdata[j][b]) == [acc, n]
                else:
                    assert hm.z[j][b] is None
    broken = va.context_heatmap(sim[1], bucket=8, conditional=True).data[0]
    assert all(v is None for row in broken.z[1:] for v in row)   # no step reached position 2


def test_context_heatmap_leaves_buckets_without_steps_empty(sim):
    data = copy.deepcopy(sim[0].to_json(with_steps=True))
    for run in data["samples"]:    # drop every step in the second bucket
        run["steps"] = [s for s in run["steps"] if (s["position"] - len(run["prompt"])) // 8 != 1]
    z = va.context_heatmap(data, bucket=8).data[0].z
    assert all(row[1] is None for row in z) and all(row[0] is not None for row in z)


# ----------------------------------------------------------------------------- numbers

def test_compare_html_shows_both_results_and_the_difference(sim):
    trained, broken, decode = sim
    html = va.compare_html(trained, broken, decode=decode)
    a, b = trained.stats(), broken.stats()
    assert "A: trained" in html and "B: single_layer" in html
    for stats in (a, b):
        assert fmt_num(stats["mean_accept_length"], 3) in html
        assert fmt_num(stats["per_position_acceptance"][0], 3) in html
    assert f"{b['mean_accept_length'] - a['mean_accept_length']:+.3g}" in html
    p = Spans(html)
    assert p.steps == len(trained.samples[0].steps) + len(broken.samples[0].steps)
    assert [t["id"] for t in p.of("first", "accepted", "bonus")] == (
        trained.samples[0].generated + broken.samples[0].generated)


def test_headline_html_gives_every_convention(sim):
    trained, broken, _ = sim
    stats = trained.stats()
    html = va.headline_html(stats)
    assert html == va.headline_html(trained)
    accepted = sum(s.accepted for s in trained.steps)
    n = stats["n_verify_steps"]
    assert f"= ({accepted} + {n}) / {n}" in html and f"1 + {accepted} / {n}" in html
    assert fmt_num(stats["mean_accept_length"]) in html
    assert fmt_num(stats["mean_acceptance_length"]) in html
    for v in stats["per_position_acceptance"] + stats["conditional_acceptance"]:
        assert fmt_num(v, 3) in html
    for length, count in stats["accept_length_histogram"].items():
        assert f"{length}: {count}" in html
    # SpecForge's simulated_acc_len over the conditional rates is accept length - 1
    assert f"it gives {fmt_num(stats['mean_accept_length'] - 1, 3)} = accept length" in html
    assert "not conditional" in html
    assert "structural failure" in va.headline_html(broken)
    assert "structural failure" not in html


def test_a_run_without_verify_steps_renders():
    """stop_at_eos can end a sample at its first token: no steps, no rates."""
    from eagle3_nb.acceptance import AcceptanceResult, SampleRun

    empty = AcceptanceResult("trained", K, [SampleRun([1, 2, 3], 5)])
    p = Spans(va.token_strip(empty))
    assert [t["kind"] for t in p.tokens] == ["prompt"] * 3 + ["first"] and p.steps == 0
    assert "accept length <b>–</b>" in va.token_strip(empty)
    assert "structural failure" not in va.headline_html(empty)
    assert all(len(row) == 0 for row in va.context_heatmap(empty).data[0].z)
    assert list(va.accept_length_histogram(empty).data[0].y) == [0.0] * (K + 1)
    both = va.compare_html(empty, empty.to_json(with_steps=True))
    assert "A: trained #1" in both and "B: trained #2" in both     # same name, told apart


# ----------------------------------------------------------------------------- import cost

def test_import_is_light():
    code = ("import eagle3_nb.viz.acceptance, sys; "
            "assert 'torch' not in sys.modules and 'plotly' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_teacher_forced_table_labels_and_explains():
    from eagle3_nb.viz.acceptance import teacher_forced_html

    scores = [{"wiring": "trained", "n_samples": 3, "per_step_accuracy": [0.4, 0.3, 0.2]},
              {"wiring": "sglang==0.5.9", "n_samples": 3, "per_step_accuracy": [0.01, 0.0, 0.0]},
              {"wiring": "layers_plus_one", "unmeasured": "the dump holds [2, 4, 5]"}]
    html = teacher_forced_html(scores)
    assert "not an accept length" in html and "3 hidden-state dumps" in html
    rows = {r[0][0]: r for r in table_rows(html)[1:]}
    assert [float(c[0]) for c in rows["trained"][1:]] == [0.4, 0.3, 0.2]
    assert float(rows["sglang==0.5.9"][1][0]) == 0.01
    assert "the dump holds [2, 4, 5]" in rows["layers_plus_one"][1][0]
    trs = {name: next(t for t in html.split("<tr")[1:] if f">{name}<" in t)
           for name in ("trained", "sglang==0.5.9")}
    from eagle3_nb.viz.html import RED
    assert RED[1] in trs["sglang==0.5.9"] and RED[1] not in trs["trained"]  # step 0 collapsed
