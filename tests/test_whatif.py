"""Engine wirings that leave parameters unloaded, the embeddings-only floor, and the what-if
ranking, on the bundled trained draft and held-out prompts (issue 5's "done means")."""

import json
import subprocess
import sys

import pytest
import torch

from conftest import DRAFTS, SAMPLE_ENGINES, SAMPLES
from eagle3_nb.errors import DraftIdOutOfRange, Eagle3NbError
from eagle3_nb.observed.metrics import parse_observed
from eagle3_nb.wirings import kit_param_names

pytestmark = pytest.mark.slow  # runs the target model: make test, not make test-fast

TARGET = SAMPLES / "target"
N_PROMPTS, MAX_NEW = 6, 48

LAYER0 = ["layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight",
          "layers.0.self_attn.v_proj.weight", "layers.0.self_attn.o_proj.weight",
          "layers.0.mlp.gate_proj.weight", "layers.0.mlp.up_proj.weight",
          "layers.0.mlp.down_proj.weight", "layers.0.input_layernorm.weight",
          "layers.0.post_attention_layernorm.weight", "layers.0.hidden_norm.weight"]


def test_engine_labels_map_to_the_draft_parameters():
    assert kit_param_names("model.midlayer.self_attn.qkv_proj.weight[q,k,v]") == LAYER0[:3]
    assert kit_param_names("model.midlayer.self_attn.qkv_proj.weight[k]") == [LAYER0[1]]
    assert kit_param_names("model.layers.1.mlp.gate_up_proj.weight[1]") == [
        "layers.1.mlp.up_proj.weight"]
    assert kit_param_names("model.layers.2.hidden_norm.weight") == ["layers.2.hidden_norm.weight"]
    assert kit_param_names("lm_head.weight") == ["lm_head.weight"]


# ----------------------------------------------------------------------------- with the target

@pytest.fixture(scope="module")
def runs():
    """Load each sample draft once (the target is shared) and simulate on demand, memoised."""
    from eagle3_nb.session import load_for_run, read_prompts
    from eagle3_nb.acceptance import simulate

    loaded, done = {}, {}

    def load(name):
        if name not in loaded:
            loaded[name] = load_for_run(DRAFTS / name, TARGET, SAMPLE_ENGINES)
        return loaded[name]

    def run(name, wiring):
        if (name, wiring) not in done:
            draft, target, presets = load(name)
            prompts = read_prompts(SAMPLES / "prompts.jsonl", target, N_PROMPTS)
            done[name, wiring] = simulate(draft, target, prompts, 4, MAX_NEW, presets[wiring])
        return done[name, wiring]

    run.load = load
    return run


def accept(run, name, wiring):
    return run(name, wiring).stats()["mean_accept_length"]


def test_sglang_059_resets_the_dropped_layer_and_0516_loads_it(runs):
    _, _, presets = runs.load("layers0-flat")
    assert sorted(presets["sglang==0.5.9"].reset_params) == sorted(LAYER0)
    assert presets["sglang==0.5.16"].reset_params == ()
    assert presets["vllm==0.33"].reset_params == ()


def test_engine_leaves_a_reset_copy_and_the_loaded_draft_untouched(runs):
    from eagle3_nb.model import as_engine_leaves

    draft, _, presets = runs.load("layers0-flat")
    before = {n: p.clone() for n, p in draft.named_parameters()}
    served = as_engine_leaves(draft, presets["sglang==0.5.9"])
    after = dict(served.named_parameters())
    for name, value in draft.named_parameters():
        assert torch.equal(value, before[name])               # the loaded draft is not modified
        if name not in LAYER0:
            assert torch.equal(after[name], value)
        elif name.endswith("norm.weight"):
            assert torch.all(after[name] == 1)
        else:
            assert not torch.equal(after[name], value)
    assert as_engine_leaves(draft, presets["trained"]) is draft


def test_good_draft_is_above_two_and_every_structural_failure_loses_half(runs):
    good = accept(runs, "good", "trained")
    assert good > 2.0
    structural = {"keys dropped (sglang 0.5.9)": accept(runs, "layers0-flat", "sglang==0.5.9"),
                  "single layer": accept(runs, "good", "single_layer"),
                  "d2t missing": accept(runs, "d2t-missing", "trained"),
                  "d2t read as absolute": accept(runs, "good", "d2t_absolute"),
                  "NaN head": accept(runs, "nan-head", "trained")}
    for what, value in structural.items():
        assert value - 1 <= (good - 1) / 2, (what, value, good)
    # the same weights served by an engine that loads them keep their acceptance
    assert accept(runs, "layers0-flat", "sglang==0.5.16") == pytest.approx(good)


def test_embeddings_only_floor_is_low_and_below_the_trained_draft(runs):
    floor = accept(runs, "good", "embeddings_only")
    assert 1.0 <= floor < 1.5
    assert floor < accept(runs, "good", "trained")


def test_absolute_d2t_read_as_offsets_stops_like_the_engine(runs):
    from eagle3_nb.acceptance import simulate
    from eagle3_nb.session import read_prompts

    draft, target, presets = runs.load("d2t-absolute")
    prompts = read_prompts(SAMPLES / "prompts.jsonl", target, 2)
    with pytest.raises(DraftIdOutOfRange, match="outside the vocabulary"):
        simulate(draft, target, prompts, 4, 16, presets["trained"])
    # reading the table the way it was written restores the good draft's behaviour
    fixed = simulate(draft, target, prompts, 4, 16, presets["d2t_absolute"])
    reference = simulate(*runs.load("good")[:2], prompts, 4, 16, runs.load("good")[2]["trained"])
    assert [r.generated for r in fixed.samples] == [r.generated for r in reference.samples]


def test_an_engine_that_refuses_the_checkpoint_gives_no_number(runs):
    from eagle3_nb.acceptance import simulate

    draft, target, presets = runs.load("good-speculators")
    wiring = presets["sglang==0.5.9"]
    assert wiring.engine_error
    with pytest.raises(Eagle3NbError, match="does not serve this draft"):
        simulate(draft, target, [torch.tensor([5, 6, 7])], 2, 4, wiring)


def test_what_if_ranks_the_dropped_keys_hypothesis_with_the_observation(runs):
    from eagle3_nb.session import read_prompts
    from eagle3_nb.whatif import explain, rank, run_what_if

    draft, target, presets = runs.load("layers0-flat")
    prompts = read_prompts(SAMPLES / "prompts.jsonl", target, N_PROMPTS)
    names = ["trained", "sglang==0.5.9", "sglang==0.5.16", "sglang==0.5.23", "layers_plus_one"]
    rows = run_what_if(draft, target, prompts, {n: presets[n] for n in names}, 4, MAX_NEW)
    by_name = {r.wiring.name: r for r in rows}
    # identical switches are simulated once and reported under each name
    assert by_name["sglang==0.5.16"].result.samples is by_name["sglang==0.5.23"].result.samples
    assert by_name["sglang==0.5.9"].mean_accept_length == pytest.approx(
        accept(runs, "layers0-flat", "sglang==0.5.9"))

    observed = parse_observed(f"{by_name['sglang==0.5.9'].mean_accept_length + 0.01:.3f}")
    ranked = rank(rows, observed)
    assert ranked[0].wiring.name == "sglang==0.5.9" and ranked[0].consistent
    assert not by_name["trained"].consistent
    assert "not computing what was trained" in explain(ranked, observed)

    healthy = parse_observed(str(by_name["trained"].mean_accept_length))
    ranked = rank(rows, healthy)
    assert not by_name["sglang==0.5.9"].consistent and by_name["trained"].consistent
    assert "computes what was trained" in explain(ranked, healthy)

    # without an observation: by accept length, except that a wiring within 2 paired standard
    # errors of trained ranks right after it, never above it
    unranked = rank(rows)
    names = [r.wiring.name for r in unranked]
    tied = {r.wiring.name for r in rows
            if r.vs_trained and r.vs_trained["verdict"] in ("indistinguishable", "same")}
    trained_mal = by_name["trained"].mean_accept_length
    for r in unranked:
        if r.wiring.name == "trained":
            continue
        if r.wiring.name in tied:
            assert names.index(r.wiring.name) > names.index("trained")
        elif r.mean_accept_length > trained_mal:
            assert names.index(r.wiring.name) < names.index("trained")
        else:
            assert names.index(r.wiring.name) > names.index("trained")
    distinct = [r.mean_accept_length for r in unranked if r.wiring.name not in tied]
    assert distinct == sorted(distinct, reverse=True)
    assert by_name["sglang==0.5.9"].vs_trained["verdict"] == "lower"
    # sglang 0.5.23 serves the draft as trained: the same figure on every prompt, said as such
    assert by_name["sglang==0.5.23"].vs_trained == {"difference": 0.0, "se": 0.0,
                                                    "verdict": "same"}


def test_nan_head_is_named_as_a_broken_checkpoint(runs):
    from eagle3_nb.session import read_prompts
    from eagle3_nb.whatif import explain, rank, run_what_if

    draft, target, presets = runs.load("nan-head")
    prompts = read_prompts(SAMPLES / "prompts.jsonl", target, 2)
    rows = rank(run_what_if(draft, target, prompts,
                            {n: presets[n] for n in ("trained", "embeddings_only")}, 4, 16),
                parse_observed("1.0"))
    assert all(r.mean_accept_length == 1.0 for r in rows)
    assert "checkpoint itself is broken" in explain(rows, parse_observed("1.0"))


def test_cli_what_if_json(tmp_path):
    prompts = tmp_path / "p.jsonl"
    rows = (SAMPLES / "prompts.jsonl").read_text().splitlines()[:2]
    prompts.write_text("\n".join(rows) + "\n")
    log = tmp_path / "sglang.log"
    log.write_text("[2026-01-01 00:00:00] Decode batch. #running-req: 1, #token: 90, "
                   "token usage: 0.00, accept len: 1.02, accept rate: 0.01, "
                   "cuda graph: True, gen throughput (token/s): 100.0, #queue-req: 0\n")
    proc = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "accept",
                           str(DRAFTS / "layers0-flat"), "--target", str(TARGET),
                           "--prompts", str(prompts), "--max-new-tokens", "12",
                           "--observed", str(log), "--engine", "sglang==0.5.9", "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["observed_accept_length"] == pytest.approx(1.02)
    assert report["observed_source"] == str(log)
    names = [r["wiring"] for r in report["rows"]]
    assert {"trained", "sglang==0.5.9", "embeddings_only", "single_layer"} <= set(names)
    assert names.index("sglang==0.5.9") < names.index("trained")
    assert report["explanation"]


def test_cli_rejects_a_bad_observation_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "accept",
                           str(DRAFTS / "good"), "--target", str(TARGET), "--observed", "0.4"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "below 1" in proc.stderr and "Traceback" not in proc.stderr


def test_notebook_03_check_sees_the_dropped_layer_too():
    from eagle3_nb.checks.hidden import check_hidden_states
    from eagle3_nb.checks.options import HiddenStateOptions

    data = check_hidden_states(DRAFTS / "layers0-flat", TARGET, SAMPLES / "prompts.jsonl",
                               HiddenStateOptions(engines=["sglang==0.5.9", "sglang==0.5.23"],
                                                  n_samples=2)).to_json()
    acc = {r["wiring"]["name"]: r["accuracy"] for r in data["wirings"]}
    assert acc["sglang==0.5.23"] == acc["trained"] > 0.3
    assert acc["sglang==0.5.9"] < 0.5 * acc["trained"]
