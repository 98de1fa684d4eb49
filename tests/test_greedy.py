"""The greedy fast path (greedy/: one target generation, then the draft alone) against its oracle,
the step-by-step simulation (acceptance.simulate(stepwise=True)): the same verify steps, token
for token, for every wiring the kit simulates, chain and tree, on the bundled pair."""

import gc

import pytest
import torch

from conftest import DRAFTS, SAMPLES
from eagle3_nb.acceptance import Drafting, simulate
from eagle3_nb.errors import DraftIdOutOfRange, Eagle3NbError
from eagle3_nb.session import read_prompts

pytestmark = pytest.mark.slow  # runs the target model

DRAFTINGS = {"chain": (Drafting(4), None), "tree": (Drafting(3, 3, 7), None),
             "tree at topk 1": (Drafting(3), True)}


@pytest.fixture(scope="module")
def bundled():
    from eagle3_nb.session import load_for_run

    torch.set_num_threads(1)
    draft, target, presets = load_for_run(DRAFTS / "good", SAMPLES / "target", None, "cpu")
    return draft, target, presets, read_prompts(SAMPLES / "eval_prompts.jsonl", target, 4)


def same_steps(fast, oracle) -> None:
    """Every field equal; the draft's probabilities (rounded to 4 places) within rounding."""
    assert [r.first_token for r in fast.samples] == [r.first_token for r in oracle.samples]
    for run_f, run_o in zip(fast.samples, oracle.samples, strict=True):
        assert len(run_f.steps) == len(run_o.steps)
        for f, o in zip(run_f.steps, run_o.steps):
            jf, jo = f.to_json(), o.to_json()
            for key in ("position", "drafted", "target", "accepted", "accept_flags"):
                assert jf[key] == jo[key], (key, jf, jo)
            assert _ids(jf["candidates"]) == _ids(jo["candidates"])
            assert _probs(jf["candidates"]) == pytest.approx(_probs(jo["candidates"]), abs=2e-4)
            if o.tree is not None:
                assert f.tree["tokens"] == o.tree["tokens"]
                assert f.tree["parents"] == o.tree["parents"]
                assert f.tree["scores"] == pytest.approx(o.tree["scores"], abs=2e-4)
    assert fast.stats()["mean_accept_length"] == oracle.stats()["mean_accept_length"]


def _ids(candidates):
    return [[c[0] for c in pos] for pos in candidates]


def _probs(candidates):
    return [c[1] for pos in candidates for c in pos]


@pytest.mark.parametrize("shape", list(DRAFTINGS))
def test_fast_path_equals_the_step_by_step_oracle_for_every_wiring(bundled, shape):
    draft, target, presets, prompts = bundled
    drafting, tree = DRAFTINGS[shape]
    compared = 0
    for name, wiring in presets.items():
        if wiring.engine_error:
            continue
        try:
            oracle = simulate(draft, target, prompts, max_new_tokens=16, wiring=wiring,
                              drafting=drafting, tree=tree, batch_size=2, stepwise=True)
        except Eagle3NbError as exc:
            with pytest.raises(type(exc)):
                simulate(draft, target, prompts, max_new_tokens=16, wiring=wiring,
                         drafting=drafting, tree=tree, batch_size=2)
            continue
        fast = simulate(draft, target, prompts, max_new_tokens=16, wiring=wiring,
                        drafting=drafting, tree=tree, batch_size=2)
        same_steps(fast, oracle)
        compared += 1
    assert compared >= 5, presets.keys()


@pytest.mark.parametrize("shape", ["chain", "tree"])
def test_wirings_simulated_together_equal_each_ones_oracle(bundled, shape, monkeypatch):
    """simulate_each shares work between wirings (one generation; the drafts of wirings with
    the same draft module and layer switches stacked in one batch, their extend once per
    distinct input; wirings that compute the same walked once; one target pass per batch for
    every wiring's last steps, merged by token): each wiring's steps must still be its own
    oracle's, token for token."""
    from eagle3_nb.acceptance import simulate_each
    from eagle3_nb.greedy.generation import Tail
    from eagle3_nb.model import Eagle3Draft

    draft, target, presets, prompts = bundled
    drafting = DRAFTINGS[shape][0]
    wirings = [w for w in presets.values() if not w.engine_error]
    passes, tails = [], []
    run, predict = Eagle3Draft.run, Tail.predict
    monkeypatch.setattr(Eagle3Draft, "run", lambda *a, **k: passes.append(1) or run(*a, **k))
    monkeypatch.setattr(Tail, "predict", lambda self, tries: tails.append(tries) or
                        predict(self, tries))
    together = simulate_each(draft, target, prompts, wirings, max_new_tokens=16,
                             batch_size=2, drafting=drafting)
    shared_passes = len(passes)
    monkeypatch.undo()
    assert any(len(nodes) > 1 for tries in tails for nodes in tries.values())  # the tail ran
    compared = 0
    for wiring, outcome in zip(wirings, together, strict=True):
        try:
            oracle = simulate(draft, target, prompts, max_new_tokens=16, wiring=wiring,
                              drafting=drafting, batch_size=2, stepwise=True)
        except Eagle3NbError as exc:
            assert type(outcome) is type(exc), (wiring.name, outcome)
            continue
        assert outcome.wiring == wiring.name
        same_steps(outcome, oracle)
        compared += 1
    assert compared >= 5
    passes.clear()
    monkeypatch.setattr(Eagle3Draft, "run", lambda *a, **k: passes.append(1) or run(*a, **k))
    simulate(draft, target, prompts, max_new_tokens=16, wiring=presets["trained"],
             drafting=drafting, batch_size=2)
    # the trained wiring's draft passes, and a few more: one batch per set of layer switches
    assert shared_passes <= 2 * len(passes), (shared_passes, len(passes))
    assert gc.isenabled()


def test_stop_at_eos_ends_where_the_oracle_ends(bundled):
    draft, target, presets, prompts = bundled
    free = simulate(draft, target, prompts, max_new_tokens=32, wiring=presets["trained"])
    eos = free.samples[0].generated[5]   # a token the first prompt commits early on

    class EosTarget:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        eos_token_ids = {eos}

    for drafting in (Drafting(4), Drafting(3, 2, 5)):
        oracle = simulate(draft, EosTarget(target), prompts, max_new_tokens=32,
                          wiring=presets["trained"], stop_at_eos=True, drafting=drafting,
                          stepwise=True)
        fast = simulate(draft, EosTarget(target), prompts, max_new_tokens=32,
                        wiring=presets["trained"], stop_at_eos=True, drafting=drafting)
        same_steps(fast, oracle)
        assert len(fast.samples[0].generated) < len(free.samples[0].generated)


def test_an_id_outside_the_vocabulary_stops_both_paths(bundled):
    """A d2t that sends a drafted id outside the vocabulary stops the engine (a device-side
    assert) when a verify step drafts it, and only then."""
    from eagle3_nb.session import load_for_run

    draft, target, presets = load_for_run(DRAFTS / "d2t-absolute", SAMPLES / "target", None,
                                          "cpu")
    prompts = bundled[3][:2]
    for drafting in (Drafting(4), Drafting(3, 2, 5)):
        for stepwise in (True, False):
            with pytest.raises(DraftIdOutOfRange, match="outside the vocabulary"):
                simulate(draft, target, prompts, max_new_tokens=16, wiring=presets["trained"],
                         drafting=drafting, stepwise=stepwise)


def test_what_if_shares_one_target_generation(bundled, monkeypatch):
    """Every wiring's row comes from one greedy generation: the target runs once per token
    generated, not once per verify step per wiring."""
    from eagle3_nb.whatif import run_what_if

    draft, target, presets, prompts = bundled
    calls = []
    real = type(target).forward_cached

    def counted(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(target), "forward_cached", counted)
    rows = run_what_if(draft, target, prompts, presets, max_new_tokens=12, batch_size=8,
                       drafting=Drafting(4))
    assert sum(r.result is not None for r in rows) >= 5
    # for all prompts and wirings: the prefill, a pass per further token up to the one the last
    # verify step drafts after, one pass verifying the last steps
    assert len(calls) == 1 + 10 + 1


def test_a_trace_of_other_prompts_or_too_short_is_not_reused(bundled):
    from eagle3_nb.greedy import greedy_trace

    draft, target, presets, prompts = bundled
    wiring = presets["trained"]
    alone = simulate(draft, target, prompts, max_new_tokens=12, wiring=wiring)
    others = greedy_trace(target, [p.reshape(-1) for p in prompts[::-1]], 16, [wiring], 8)
    short = greedy_trace(target, [p.reshape(-1) for p in prompts], 6, [wiring], 8)
    for trace in (others, short):
        reused = simulate(draft, target, prompts, max_new_tokens=12, wiring=wiring, trace=trace)
        same_steps(reused, alone)
