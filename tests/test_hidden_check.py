"""Notebook 03's answer on the real tiny target: the trained wiring predicts the target, the
served single-layer state (fc skipped) collapses it, a layer set one deeper costs little because
this target's adjacent layers are alike; and the drift measures on hand-built states."""

import pytest
import torch

from conftest import DRAFTS, SAMPLES, write_dumps
from eagle3_nb.drift import (aux_cosine, feature_drift, layer_similarity, mean_cosine,
                             mean_layer_similarity, weighted_mean)
from eagle3_nb.checks.hidden import check_hidden_states
from eagle3_nb.checks.options import HiddenStateOptions
from eagle3_nb.findings import COLLAPSE_FRACTION
from eagle3_nb.checks.hidden_findings import hidden_findings
from eagle3_nb.target import TargetOutput
from eagle3_nb.model import Wiring

pytestmark = pytest.mark.slow  # runs the target model: make test, not make test-fast

TARGET = SAMPLES / "target"
PROMPTS = SAMPLES / "prompts.jsonl"



def by_name(data):
    return {r["wiring"]["name"]: r for r in data["wirings"]}


@pytest.fixture(scope="module")
def good():
    return check_hidden_states(DRAFTS / "good", TARGET, PROMPTS, HiddenStateOptions(
        engines=["sglang==0.5.9", "sglang==0.5.23", "vllm==0.33"], n_samples=6,
        device="cpu")).to_json()


def test_trained_wiring_predicts_the_target(good):
    w = by_name(good)
    assert w["trained"]["fc_applied"] and w["trained"]["width"] == good["trained_width"] == 192
    assert w["trained"]["accuracy"] >= 0.3, w["trained"]


def test_single_layer_state_skips_fc_and_collapses(good):
    w = by_name(good)
    single = w["single_layer"]
    assert single["fc_applied"] is False and single["width"] == 64
    assert single["accuracy"] <= 0.5 * w["trained"]["accuracy"], single
    assert any(t["module"] == "fc" and t["status"] == "skipped" for t in single["trace"])


def test_wrong_layers_lose_accuracy(good):
    w = by_name(good)
    assert w["layers_plus_one"]["accuracy"] < w["trained"]["accuracy"]


def test_engines_capturing_the_defaults_match_training(good):
    w = by_name(good)
    for engine in ("sglang==0.5.9", "sglang==0.5.23", "vllm==0.33"):
        assert w[engine]["wiring"]["layer_ids"] == [2, 4, 5]
        assert w[engine]["accuracy"] == pytest.approx(w["trained"]["accuracy"])


def test_draft_trained_on_other_layers_than_declared():
    """Every engine honours the declared [5, 6, 7]; the weights were trained on [2, 4, 5].
    A tiny target's layers are alike, so the loss is milder than a real one's: reported as
    measured, and clearly below the same weights on the layers they were trained on."""
    only_trained = HiddenStateOptions(engines=["vllm==0.33"], n_samples=6, device="cpu",
                                      wirings=("trained",))
    data = check_hidden_states(DRAFTS / "trained-other-layers", TARGET, PROMPTS,
                               only_trained).to_json()
    rows = by_name(data)
    assert rows["trained"]["wiring"]["layer_ids"] == [5, 6, 7]
    assert rows["vllm==0.33"]["wiring"]["layer_ids"] == [5, 6, 7]
    good = check_hidden_states(DRAFTS / "good", TARGET, PROMPTS, only_trained).to_json()
    assert rows["trained"]["accuracy"] <= 0.8 * by_name(good)["trained"]["accuracy"]


# ----------------------------------------------------------------------------- drift, measured

def test_trained_and_identical_engine_wirings_feed_the_trained_feature(good):
    w = by_name(good)
    for name in ("trained", "sglang==0.5.23", "vllm==0.33"):
        assert w[name]["feature_cosine"] == pytest.approx(1.0, abs=1e-5), name
        assert w[name]["aux_cosine"] == pytest.approx([1.0, 1.0, 1.0], abs=1e-5), name
    assert good["trained_layer_ids"] == [2, 4, 5]
    assert good["findings"] == []  # every engine captures what training did: nothing to report


def test_single_layer_feature_is_unlike_the_trained_one(good):
    single = by_name(good)["single_layer"]
    # measured about -0.05: the raw final-norm state has nothing in common with fc's output
    assert abs(single["feature_cosine"]) < 0.3, single["feature_cosine"]
    assert single["aux_cosine"] is None  # no concatenation to compare slot by slot


def test_layer_similarity_is_a_cosine_matrix_over_hidden_states(good):
    sim = torch.tensor(good["layer_similarity"])
    assert sim.shape == (good["num_layers"] + 1,) * 2 == (9, 9)
    assert torch.allclose(sim, sim.T, atol=1e-5)
    assert torch.allclose(sim.diagonal(), torch.ones(9), atol=1e-5)
    assert (sim <= 1 + 1e-5).all() and (sim >= -1 - 1e-5).all()
    for k in range(2, 8):  # a residual stream drifts away layer by layer
        assert sim[k, k + 1] > sim[k, 8] or k + 1 == 8


def test_one_layer_deeper_costs_little_because_adjacent_layers_are_alike(good):
    """The tiny target's adjacent layers have cosine ~0.92 around [2, 4, 5]: the shifted
    features stay close to the trained ones, and so does the accuracy; a state with nothing in
    common (single_layer) collapses it. On another target the same shift can cost far more."""
    w, sim = by_name(good), good["layer_similarity"]
    plus, single, trained = w["layers_plus_one"], w["single_layer"], w["trained"]
    adjacent = [sim[t][t + 1] for t in good["trained_layer_ids"]]
    assert min(adjacent) > 0.8, adjacent
    # the slot-by-slot drift is exactly the adjacent-layer similarity, on the same passes
    assert plus["aux_cosine"] == pytest.approx(adjacent, abs=1e-4)
    assert min(adjacent) - 0.1 < plus["feature_cosine"] < 1 - 1e-3
    assert plus["feature_cosine"] > single["feature_cosine"] + 0.5
    assert COLLAPSE_FRACTION * trained["accuracy"] < plus["accuracy"] < trained["accuracy"]
    assert single["accuracy"] <= COLLAPSE_FRACTION * trained["accuracy"]


# ----------------------------------------------------------------------------- findings, measured

def _codes(data):
    return {(f["code"], f["engine"]) for f in data["findings"]}


def test_unloaded_layer_collapses_on_sglang_0_5_9_only():
    data = check_hidden_states(DRAFTS / "layers0-flat", TARGET, PROMPTS, HiddenStateOptions(
        engines=["sglang==0.5.9", "sglang==0.5.23"], n_samples=4, device="cpu",
        wirings=("trained",))).to_json()
    assert _codes(data) == {("HIDDEN_COLLAPSES", "sglang==0.5.9")}
    collapse = data["findings"][0]
    assert collapse["severity"] == "error" and "left at their initial values" in collapse["message"]
    # the features reaching the decoder layer are as trained: the collapse is in the layer itself
    assert collapse["evidence"]["feature_cosine"] == pytest.approx(1.0, abs=1e-5)
    evidence = collapse["evidence"]
    assert evidence["accuracy"] <= COLLAPSE_FRACTION * evidence["trained_accuracy"]


def test_engines_capturing_other_layers_are_reported_with_their_cosine():
    """aux-ids-top-level-flat declares output-of-layer ids [1, 3, 6] only at the top level:
    as trained means hidden_states[2, 4, 7]; SGLang falls back to [2, 4, 5], vLLM reads
    [1, 3, 6]."""
    data = check_hidden_states(DRAFTS / "aux-ids-top-level-flat", TARGET, PROMPTS,
                               HiddenStateOptions(engines=["sglang==0.5.23", "vllm==0.33"],
                                                  n_samples=4, device="cpu",
                                                  wirings=("trained",))).to_json()
    assert _codes(data) == {("HIDDEN_LAYERS_DIFFER", "sglang==0.5.23"),
                            ("HIDDEN_LAYERS_DIFFER", "vllm==0.33")}
    sim = data["layer_similarity"]
    for f in data["findings"]:
        assert f["severity"] == "warning" and "#25454" in f["message"] and "#43671" in f["message"]
        pairs = f["evidence"]["layer_cosines"]
        assert pairs and all(p["cosine"] == sim[p["trained"]][p["served"]] for p in pairs)
        assert f"cosine {pairs[0]['cosine']:.2f}" in f["message"]
    sglang = next(f for f in data["findings"] if f["engine"] == "sglang==0.5.23")
    assert [(p["trained"], p["served"]) for p in sglang["evidence"]["layer_cosines"]] == [(7, 5)]


@pytest.mark.parametrize("ids, differ", [([1, 3, 4], False), ([2, 4, 5], True)])
def test_layers_a_launch_config_captures_are_the_ones_compared(tmp_path, ids, differ):
    """TensorRT-LLM captures the ids its YAML gives (never the draft's): its row compares the
    states they name, hidden_states[i + 1], so the trained ids written in its numbering match
    and the draft's own ids copied are one layer too deep."""
    yaml = tmp_path / "serve.yaml"
    yaml.write_text(f"speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 4\n"
                    f"  speculative_model: {DRAFTS / 'good'}\n"
                    f"  eagle3_layers_to_capture: {ids}\n")
    engine = "trtllm==1.4.0rc1"
    data = check_hidden_states(DRAFTS / "good", TARGET, PROMPTS, HiddenStateOptions(
        engines=[engine], n_samples=4, device="cpu", wirings=("trained",),
        launch=str(yaml))).to_json()
    assert tuple(by_name(data)[engine]["wiring"]["layer_ids"]) == tuple(i + 1 for i in ids)
    assert (("HIDDEN_LAYERS_DIFFER", engine) in _codes(data)) == differ


# ----------------------------------------------------------------------------- drift, by hand

def _rot(x):
    """Per position, a vector orthogonal to x with the same norm: (a, b, c, d) -> (-b, a, -d, c)."""
    return torch.stack([-x[..., 1], x[..., 0], -x[..., 3], x[..., 2]], -1)


def _output(states, pre_norm, mask=None):
    """A TargetOutput with the given hidden_states (the last is the final-norm one)."""
    T = states[0].shape[-2]
    return TargetOutput(tuple(states), pre_norm, torch.zeros(T, 5),
                        torch.zeros(T, dtype=torch.long), mask)


def test_layer_similarity_of_known_states():
    h0 = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    out = _output([h0, 3 * h0, h0], pre_norm=_rot(h0))  # hidden_states[2] is the final-norm one
    sim = torch.tensor(layer_similarity(out))
    assert sim[0, 1] == pytest.approx(1.0) and sim[1, 0] == pytest.approx(1.0)  # same direction
    # index L is the pre-norm state (orthogonal here), not HF's final-norm entry (identical)
    assert sim[0, 2] == pytest.approx(0.0, abs=1e-6) and sim[1, 2] == pytest.approx(0.0, abs=1e-6)
    assert mean_cosine(h0, -h0) == pytest.approx(-1.0)


def test_layer_similarity_weights_samples_by_positions_and_skips_padding():
    h = torch.randn(4, 4, generator=torch.Generator().manual_seed(1))
    alike = _output([h[:1], h[:1], h[:1]], pre_norm=h[:1])            # 1 position, cosine 1
    unlike = _output([h[1:], _rot(h[1:]), h[1:]], pre_norm=h[1:])     # 3 positions, cosine 0
    assert mean_layer_similarity([alike, unlike])[0][1] == pytest.approx(0.25, abs=1e-6)
    assert weighted_mean([None, None], [1, 3]) is None
    padded = torch.cat([h[None, :2], -h[None, 2:]], 1)                # [1, 4, 4], last two padding
    out = _output([h[None], padded, h[None]], pre_norm=h[None],
                  mask=torch.tensor([[1, 1, 0, 0]]))
    assert layer_similarity(out)[0][1] == pytest.approx(1.0)


class _Passthrough:
    """Stands in for a draft whose projection leaves the features as they are."""
    fc = torch.nn.Linear(8, 4)

    def project(self, hidden, wiring):
        return hidden, True


class _Zeroing(_Passthrough):
    """An engine copy whose fc was left at zeros: nothing of the features survives."""

    def project(self, hidden, wiring):
        return torch.zeros_like(hidden), True


def test_feature_drift_of_known_states():
    h1 = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))
    h2 = _rot(h1)                                    # same norm as h1, orthogonal to it
    out = _output([h1, h1, h2, h1], pre_norm=_rot(h2))  # L = 3; pre-norm [3] is orthogonal to [2]
    trained = Wiring("trained", (1, 2))
    drift = feature_drift(_Passthrough(), out, Wiring("engine==1", (1, 3)), trained)
    assert drift.aux_cosine == pytest.approx([1.0, 0.0], abs=1e-6)
    # cat(h1, x) vs cat(h1, h2) with x orthogonal to h2, all of one norm: |h1|^2 / (2 |h1|^2)
    assert drift.feature_cosine == pytest.approx(0.5, abs=1e-6)
    assert drift.n_positions == 5 and drift.to_json()["served"] == "engine==1"
    same = feature_drift(_Passthrough(), [out, out], trained, trained)
    assert same.feature_cosine == pytest.approx(1.0) and same.aux_cosine == pytest.approx([1, 1])
    reset = feature_drift(_Passthrough(), out, trained, trained, served_draft=_Zeroing())
    assert reset.feature_cosine == pytest.approx(0.0) and reset.aux_cosine == pytest.approx([1, 1])
    # one captured layer alone, or another count of layers: no slot-by-slot comparison
    assert aux_cosine(out, Wiring("s", (1, 2), "aux:0"), trained) is None
    assert aux_cosine(out, Wiring("s", (1, 2), "final_norm"), trained) is None
    assert aux_cosine(out, Wiring("s", (1, 2, 3)), trained) is None


# ----------------------------------------------------------------------------- findings, by hand

def _row(name, accuracy, ids=(2, 4, 5), error=None, engine_error="", fc_applied=True):
    return {"wiring": {"name": name, "layer_ids": list(ids), "hidden_source": "concat",
                       "engine_error": engine_error, "reset_params": [],
                       "engine": name if "==" in name else ""},
            "accuracy": accuracy, "error": error, "fc_applied": fc_applied, "feature_cosine": 0.9}


def _findings(*rows):
    return [(f.code, f.engine) for f in hidden_findings(
        {"wirings": [_row("trained", 0.6), *rows], "layer_similarity": [[1.0] * 9] * 9})]


def test_only_engine_wirings_make_findings():
    assert _findings(_row("single_layer", 0.0), _row("layers_plus_one", 0.0, (3, 5, 6))) == []
    assert _findings(_row("vllm==0.33", 0.3)) == [("HIDDEN_COLLAPSES", "vllm==0.33")]  # half
    assert _findings(_row("vllm==0.33", 0.31)) == []
    assert _findings(_row("vllm==0.33", 0.5, (3, 5, 6))) == [("HIDDEN_LAYERS_DIFFER", "vllm==0.33")]


def test_crashes_collapse_but_refusals_to_load_are_notebook_01s():
    crash = _row("sglang==0.5.9", None, error="fc takes 192, got 256")
    assert _findings(crash) == [("HIDDEN_COLLAPSES", "sglang==0.5.9")]
    refused = _row("sglang==0.5.9", None, error="refused", engine_error="no such architecture")
    assert _findings(refused) == []
    nothing_to_lose = {"wirings": [_row("trained", 0.0), _row("vllm==0.33", 0.0)]}
    assert hidden_findings(nothing_to_lose) == []


def test_layer_similarity_figure_marks_trained_and_captured_layers(good):
    from eagle3_nb.viz import hidden as vh

    fig = vh.layer_similarity_figure(good)
    heat, trained, *engines = fig.data
    assert [list(r) for r in heat.z] == good["layer_similarity"]
    assert list(trained.x) == list(trained.y) == [2, 4, 5]
    # every engine captures the trained layers: one marker set, on the diagonal
    assert [e.name for e in engines] == ["sglang==0.5.9, sglang==0.5.23, vllm==0.33"]
    assert list(engines[0].x) == list(engines[0].y) == [2, 4, 5]
    assert "feature cos" in vh.wirings_html(good)


def test_accuracy_figure_paints_every_collapse_red():
    from eagle3_nb.viz import hidden as vh

    rows = [_row("trained", 0.6), _row("sglang==0.5.9", 0.3), _row("vllm==0.33", 0.31),
            _row("single_layer", 0.5, fc_applied=False), _row("sglang==0.5.4", None, error="x")]
    bars = vh.accuracy_figure({"wirings": rows}).data[0]
    red = [n for n, c in zip(bars.x, bars.marker.color) if c == "#b42318"]
    assert red == ["sglang==0.5.9", "single_layer", "sglang==0.5.4"]


def test_engines_failing_alike_share_one_message():
    """The report groups findings by message: the engine belongs in the engine field only."""
    found = hidden_findings({"wirings": [_row("trained", 0.6), _row("sglang==0.5.4", 0.01),
                                         _row("sglang==0.5.9", 0.01)],
                             "layer_similarity": [[1.0] * 9] * 9})
    assert {f.engine for f in found} == {"sglang==0.5.4", "sglang==0.5.9"}
    assert len({f.message for f in found}) == 1 and "sglang" not in found[0].message


# ----------------------------------------------------------------------------- on dumps

@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return write_dumps(tmp_path_factory.mktemp("dumps"))


def on_dumps(draft, dumps, **kwargs):
    return check_hidden_states(DRAFTS / draft, TARGET, options=HiddenStateOptions(
        hidden_states=dumps, n_samples=4, device="cpu", **kwargs)).to_json()


def test_dumps_answer_like_the_live_target(dumps):
    """Teacher-forced against the recorded tokens (labelled), the same separation: the trained
    wiring and the engines that capture its layers predict, the single last state collapses, a
    wiring needing layers the dump lacks gets no number and no finding."""
    data = on_dumps("good", dumps, engines=["sglang==0.5.23", "vllm==0.33"])
    assert data["source"] == "dumps" and "teacher-forced" in data["reference"]
    assert data["dump_layer_ids"] == [2, 4, 5] and data["layer_similarity"] is None
    w = by_name(data)
    assert w["trained"]["fc_applied"] and w["trained"]["accuracy"] >= 0.25
    assert w["trained"]["feature_cosine"] == pytest.approx(1.0, abs=1e-5)
    for engine in ("sglang==0.5.23", "vllm==0.33"):
        assert w[engine]["accuracy"] == pytest.approx(w["trained"]["accuracy"])
    single = w["single_layer"]
    assert single["fc_applied"] is False and single["accuracy"] <= 0.5 * w["trained"]["accuracy"]
    plus = w["layers_plus_one"]
    assert plus["accuracy"] is None and plus["error"] is None
    assert "the dump holds [2, 4, 5]" in plus["unmeasured"]
    assert "before the final norm, stands in" in single["wiring"]["note"]   # speculators' last
    assert data["findings"] == []
    from eagle3_nb.viz import hidden as vh
    assert "recorded there (teacher-forced" in vh.wirings_html(data)


def test_dumps_show_the_engine_that_drops_the_layer(dumps):
    data = on_dumps("layers0-flat", dumps, engines=["sglang==0.5.9", "sglang==0.5.23"])
    w = by_name(data)
    assert w["sglang==0.5.9"]["accuracy"] <= 0.5 * w["trained"]["accuracy"]
    assert w["sglang==0.5.9"]["feature_cosine"] == pytest.approx(1.0, abs=1e-5)
    assert {(f["code"], f["engine"]) for f in data["findings"]} == {
        ("HIDDEN_COLLAPSES", "sglang==0.5.9")}


def test_dumps_with_more_layers_serve_other_wirings(tmp_path, dumps):
    """Told which layers a dump holds, each wiring reads its own slots: the trained slice equals
    a dump of exactly the trained layers, and one layer deeper is measured, and is worse."""
    wide = write_dumps(tmp_path / "wide", layers=(2, 3, 4, 5, 6, 8))
    data = on_dumps("good", wide, engines=["vllm==0.33"], dump_layer_ids="2,3,4,5,6,8")
    exact = by_name(on_dumps("good", dumps, engines=["vllm==0.33"]))
    w = by_name(data)
    assert data["dump_layer_ids"] == [2, 3, 4, 5, 6]
    assert w["trained"]["accuracy"] == pytest.approx(exact["trained"]["accuracy"])
    assert w["trained"]["width"] == 192
    plus = w["layers_plus_one"]
    assert plus["accuracy"] is not None and plus["accuracy"] < w["trained"]["accuracy"]
    assert len(plus["aux_cosine"]) == 3 and all(c < 1 for c in plus["aux_cosine"])


def test_dumps_bad_input_is_a_clear_error(tmp_path, dumps):
    from eagle3_nb.errors import Eagle3NbError

    with pytest.raises(Eagle3NbError, match="embed_tokens"):   # no embeddings, no target
        check_hidden_states(DRAFTS / "good",
                            options=HiddenStateOptions(hidden_states=dumps, device="cpu"))
    with pytest.raises(Eagle3NbError, match="not integers"):
        on_dumps("good", dumps, dump_layer_ids="2,four")
    with pytest.raises(Eagle3NbError, match="no target"):
        check_hidden_states(DRAFTS / "good")


def test_data_path_marks_the_mismatch_the_skip_and_unloaded_weights(good):
    from eagle3_nb.viz import hidden as vh

    w = by_name(good)
    trained = vh.data_path_stages(w["trained"]["trace"])
    assert [s["name"] for s in trained] == ["target state", "fc", "layer 0", "norm", "lm_head"]
    assert {s["status"] for s in trained} == {"ok"}
    assert trained[1]["in"] == 192 and trained[1]["out"] == 64 and trained[-1]["out"] == 256
    single = {s["name"]: s for s in vh.data_path_stages(w["single_layer"]["trace"])}
    assert single["target state"]["status"] == "mismatch" and single["target state"]["in"] == 64
    assert single["fc"]["status"] == "skipped" and "skips fc" in single["fc"]["notes"][0]
    unloaded = vh.data_path_stages(w["trained"]["trace"], ["layers.0.mlp.up_proj.weight"])
    assert [s["status"] for s in unloaded] == ["ok", "ok", "unloaded", "ok", "ok"]
    fig = vh.data_path_figure(good)           # default: trained, then paths that differ
    assert [t.name for t in fig.data] == ["trained", "single_layer"]
    assert list(fig.data[1].marker.color[:2]) == [vh.STAGE_COLORS["mismatch"],
                                                  vh.STAGE_COLORS["skipped"]]
