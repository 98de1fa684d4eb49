"""The speculative simulation against a brute-force reference: same tokens, same statistics."""

import pytest
import torch

from conftest import DRAFTS, SAMPLE_ENGINES, SAMPLES, write_dumps
from eagle3_nb.acceptance import simulate
from eagle3_nb.features import draft_features
from eagle3_nb.session import read_prompts
from eagle3_nb.model import Wiring

pytestmark = pytest.mark.slow  # runs the target model: make test, not make test-fast

TARGET = SAMPLES / "target"
TRAINED = Wiring("trained", (2, 4, 5))


@pytest.fixture(scope="module")
def models():
    from eagle3_nb.model import load_draft
    from eagle3_nb.target import TargetModel
    return load_draft(DRAFTS / "good", embed_from=TARGET), TargetModel.load(TARGET)


@torch.no_grad()
def cache_free_pass(draft, tokens, h0, wiring):
    """One causal pass from scratch over already-projected features h0 [T, H]."""
    embeds = draft.embed_tokens(tokens)[None]
    h, positions = h0[None], torch.arange(len(tokens))[None]
    for layer in draft.layers:
        h = layer(h, embeds, positions, draft.inv_freq, wiring, None)
    normed = draft.norm(h)
    return draft.lm_head(normed)[0, -1], (normed if wiring.norm_output else h)[0, -1]


@torch.no_grad()
def brute_force(draft, target, prompt, k, max_new, wiring):
    """Recompute everything every time: fresh target passes, and for each drafted token a full
    cache-free draft pass (target features through fc, then the draft's own features)."""
    seq = torch.cat([prompt, target.forward_hidden(prompt).next_tokens[-1:]])
    accepted_counts = []
    while len(seq) - len(prompt) < max_new:
        projected, _ = draft.project(draft_features(target.forward_hidden(seq[:-1]), wiring), wiring)
        tokens, own, drafted = seq[1:], [], []
        for _ in range(k):
            h0 = torch.cat([projected, *[f[None] for f in own]]) if own else projected
            logits, feature = cache_free_pass(draft, tokens, h0, wiring)
            d = draft.to_target_ids(logits.argmax()[None], wiring)
            drafted.append(int(d))
            own.append(feature)
            tokens = torch.cat([tokens, d])
        preds = target.forward_hidden(torch.cat([seq, torch.tensor(drafted)])).next_tokens
        preds = preds[len(seq) - 1:]
        a = 0
        while a < k and drafted[a] == int(preds[a]):
            a += 1
        accepted_counts.append(a)
        seq = torch.cat([seq, torch.tensor(drafted[:a], dtype=torch.long), preds[a:a + 1]])
    return seq[len(prompt):].tolist(), accepted_counts


def test_simulation_matches_brute_force(models):
    draft, target = models
    prompts = read_prompts(SAMPLES / "prompts.jsonl", target, 3)
    prompts = [p[:40] for p in prompts]
    result = simulate(draft, target, prompts, num_steps=3, max_new_tokens=20, wiring=TRAINED)
    for run, prompt in zip(result.samples, prompts):
        tokens, counts = brute_force(draft, target, prompt, 3, 20, TRAINED)
        assert run.generated == tokens
        assert [s.accepted for s in run.steps] == counts
        for step in run.steps:      # flags: the prefix where draft and target agree, then a miss
            agree = [d == t for d, t in zip(step.drafted, step.target)]
            assert step.accept_flags == agree[:step.accepted] + [False] * (3 - step.accepted)
            assert step.accepted == 3 or not agree[step.accepted]
            assert step.to_json()["accept_length"] == step.accepted + 1


def assert_same_runs(alone, together):
    """Same tokens, steps and accept counts; the candidates' probabilities agree to float noise
    (a batch changes the matmul shapes, so the 4th decimal of a softmax may round apart)."""
    for a, b in zip(alone.samples, together.samples):
        assert a.generated == b.generated and a.prompt == b.prompt
        for x, y in zip(a.steps, b.steps):
            jx, jy = x.to_json(), y.to_json()
            cx, cy = jx.pop("candidates"), jy.pop("candidates")
            assert jx == jy
            for px, py in zip(cx, cy):
                assert px[0][0] == py[0][0]                        # the drafted token
                assert [p for _, p in px] == pytest.approx([p for _, p in py], abs=2e-4)


def test_tokens_do_not_depend_on_the_batch_size(models):
    """Prompts of different lengths decode together (left-padded, each at its own pace, finished
    ones leaving the batch): every token and accept count equals one-at-a-time."""
    draft, target = models
    prompts = [p[:n] for p, n in zip(read_prompts(SAMPLES / "prompts.jsonl", target, 5),
                                     (40, 17, 33, 9, 26))]
    together = simulate(draft, target, prompts, 4, 24, TRAINED, batch_size=3)
    assert_same_runs(simulate(draft, target, prompts, 4, 24, TRAINED, batch_size=1), together)
    assert len({len(r.steps) for r in together.samples}) > 1   # rows really finished apart


@pytest.mark.parametrize("draft_name,wiring", [
    ("multilayer-flat", "vllm==0.33"),               # a second, plain decoder layer
    ("norm-before-residual-flat", "vllm==0.33"),     # the normed residual
    ("layers0-flat", "sglang==0.5.9"),               # reset parameters, a collapse
])
def test_batching_is_exact_for_other_drafts(models, draft_name, wiring):
    from eagle3_nb.session import load_for_run

    draft, _, presets = load_for_run(DRAFTS / draft_name, TARGET, SAMPLE_ENGINES, device="cpu")
    target = models[1]
    prompts = [p[:n] for p, n in zip(read_prompts(SAMPLES / "prompts.jsonl", target, 4),
                                     (31, 12, 40, 20))]
    assert_same_runs(simulate(draft, target, prompts, 4, 20, presets[wiring], batch_size=1),
                     simulate(draft, target, prompts, 4, 20, presets[wiring], batch_size=4))


class EosTarget:
    """The target with a chosen token as its EOS."""

    def __init__(self, target, eos: int):
        self.target, self.eos_token_ids = target, {eos}

    def __getattr__(self, name):
        return getattr(self.target, name)


def test_stop_at_eos_retires_each_row_on_its_own(models):
    draft, target = models
    prompts = [p[:30] for p in read_prompts(SAMPLES / "prompts.jsonl", target, 4)]
    free = simulate(draft, target, prompts, 4, 32, TRAINED)
    eos = free.samples[1].generated[5]                     # a token row 1 produces mid-run
    stopped = simulate(draft, EosTarget(target, eos), prompts, 4, 32, TRAINED, stop_at_eos=True,
                       batch_size=4)
    for f, s in zip(free.samples, stopped.samples):
        new = f.generated
        cut = new.index(eos) if eos in new else None
        assert s.generated == new[:len(s.generated)]
        if cut is None:
            assert s.generated == new
        else:                       # stops after the verify step that committed EOS, kept whole
            assert cut < len(s.generated) <= cut + 1 + 4 and len(s.generated) < len(new)


def test_bad_batch_size_is_a_clear_error(models):
    from eagle3_nb.errors import Eagle3NbError

    draft, target = models
    prompt = read_prompts(SAMPLES / "prompts.jsonl", target, 1)[0][:10]
    with pytest.raises(Eagle3NbError, match="batch_size"):
        simulate(draft, target, [prompt], 4, 8, TRAINED, batch_size=0)
    with pytest.raises(Eagle3NbError, match="at least 2 tokens"):
        simulate(draft, target, [prompt[:1]], 4, 8, TRAINED)


def test_bfloat16_run_agrees_with_float32(models):
    """The dtype a GPU run uses (bf16), here on CPU: same code path bar the device. Rounding
    flips a few near-tie tokens, after which a prompt's continuation differs, so the figure moves
    by sampling noise (measured: 2.42 -> 2.25 on 26 steps), not by a collapse (~1.0), which a
    dtype bug gives; the structural failure stays a collapse."""
    from eagle3_nb.model import load_draft
    from eagle3_nb.target import TargetModel

    draft, target = models
    prompts = [p[:48] for p in read_prompts(SAMPLES / "prompts.jsonl", target, 4)]
    ref = simulate(draft, target, prompts, 4, 32, TRAINED).stats()["mean_accept_length"]
    bf_target = TargetModel.load(TARGET, dtype=torch.bfloat16)
    bf_draft = load_draft(DRAFTS / "good", dtype=torch.bfloat16, embed_from=TARGET)
    assert bf_draft.fc.weight.dtype == torch.bfloat16 and bf_draft.inv_freq.dtype == torch.float32
    got = simulate(bf_draft, bf_target, prompts, 4, 32, TRAINED).stats()["mean_accept_length"]
    single = Wiring("single_layer", None, "final_norm", "engine")
    bad = simulate(bf_draft, bf_target, prompts, 4, 32, single).stats()["mean_accept_length"]
    assert got - 1 >= 0.7 * (ref - 1) and (bad - 1) <= 0.5 * (got - 1), (ref, got, bad)


def test_statistics_conventions(models):
    draft, target = models
    prompts = [p[:48] for p in read_prompts(SAMPLES / "prompts.jsonl", target, 4)]
    stats = simulate(draft, target, prompts, num_steps=4, max_new_tokens=32,
                     wiring=TRAINED).stats()
    n = stats["n_verify_steps"]
    hist = stats["accept_length_histogram"]
    assert sum(hist.values()) == n
    mean = sum(int(length) * c for length, c in hist.items()) / n
    assert stats["mean_accept_length"] == pytest.approx(mean)
    assert stats["mean_acceptance_length"] == pytest.approx(mean)
    alpha = stats["per_position_acceptance"]
    assert all(a >= b for a, b in zip(alpha, alpha[1:]))          # P(accepted > i) decreases
    assert stats["mean_accept_length"] == pytest.approx(1 + sum(alpha))
    assert stats["n_tokens"] >= 4 * 32


def test_single_layer_wiring_collapses_acceptance(models):
    draft, target = models
    prompts = [p[:48] for p in read_prompts(SAMPLES / "prompts.jsonl", target, 4)]
    good = simulate(draft, target, prompts, 4, 32, TRAINED).stats()["mean_accept_length"]
    single = Wiring("single_layer", None, "final_norm", "engine")
    bad = simulate(draft, target, prompts, 4, 32, single).stats()["mean_accept_length"]
    assert good > 1.5 and (bad - 1) <= 0.5 * (good - 1), (good, bad)


def test_accept_cli_json_contract(run_cli):
    rc, out, err = run_cli("accept", DRAFTS / "good", "--target", TARGET, "--n-samples", "2",
                           "--max-new-tokens", "16", "--json")
    assert rc == 0, err
    data = __import__("json").loads(out)
    assert {"wiring", "num_steps", "n_samples", "n_verify_steps", "n_tokens",
            "mean_accept_length", "mean_acceptance_length", "per_position_acceptance",
            "accept_length_histogram"} <= set(data)
    assert data["wiring"] == "trained" and data["n_samples"] == 2 and data["num_steps"] == 4
    assert "Loading weights" not in err


def test_accept_cli_lists_wirings_and_rejects_bad_input(run_cli, tmp_path):
    rc, out, _ = run_cli("accept", DRAFTS / "good", "--target", TARGET, "--list-wirings")
    assert rc == 0 and "single_layer" in out and "sglang==0.5.23" in out
    rc, _, err = run_cli("accept", DRAFTS / "good", "--target", TARGET, "--wiring", "nope")
    assert rc == 2 and "unknown wiring" in err and "Traceback" not in err
    rc, _, err = run_cli("accept", DRAFTS / "good")
    assert rc == 2 and "--target" in err
    for extra in ([], ["--what-if"]):
        rc, _, err = run_cli("accept", DRAFTS / "good", "--target", TARGET, "--batch-size", "0",
                             *extra)
        assert rc == 2 and "batch_size" in err and "Traceback" not in err


def test_accept_on_speculators_dumps_is_teacher_forced_and_labelled(run_cli, tmp_path, models):
    """Dumps as vLLM's extract_hidden_states writes them (layers [2, L//2, L-3, L]), made from the
    bundled target: the trained wiring scores well, the single last state does not."""
    import json

    write_dumps(tmp_path, n=3, target=models[1])
    runs = {}
    for wiring in ("trained", "single_layer"):
        rc, out, err = run_cli("accept", DRAFTS / "good", "--hidden-states", tmp_path,
                               "--target", TARGET, "--wiring", wiring, "--json")
        assert rc == 0, err
        runs[wiring] = json.loads(out)
    trained = runs["trained"]
    assert "not an accept length" in trained["metric"] and trained["n_samples"] == 3
    assert trained["per_step_accuracy"][0] >= 0.3
    assert runs["single_layer"]["per_step_accuracy"][0] <= 0.5 * trained["per_step_accuracy"][0]
    rc, _, err = run_cli("accept", DRAFTS / "good", "--hidden-states", tmp_path,
                         "--target", TARGET, "--wiring", "layers_plus_one")
    assert rc == 2 and "needs a live target" in err
    rc, out, err = run_cli("accept", DRAFTS / "layers0-flat", "--hidden-states", tmp_path,
                           "--target", TARGET, "--wiring", "sglang==0.5.9", "--json")
    assert rc == 0, err      # the engine's dropped layer, reset as it leaves it: collapses here too
    assert json.loads(out)["per_step_accuracy"][0] <= 0.5 * trained["per_step_accuracy"][0]
