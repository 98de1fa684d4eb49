"""Tree drafting (SGLang's --speculative-eagle-topk > 1) against a brute-force reference written
here from the engine's rule, not from the kit's code:

- level 0: the topk most probable draft tokens after the committed text, scored by probability;
- each later draft forward runs the topk beams; beam slot j sees the committed text plus the
  beams that ran in slot j before (SGLang's draft KV layout), fed its parent's output feature;
  children are scored parent score x probability, and the topk best children are the next
  beams, the best in slot 0;
- the num_draft_tokens - 1 best-scored candidates, in candidate order, form the tree;
- greedy verification: from the root, the first child (candidate order) equal to the target's
  greedy token at the node is accepted, and so on; then the target's token there is the bonus.

Everything is recomputed from scratch (no KV cache, one prompt at a time) in float64, so that
no near-tie can round apart between the two.
"""

import pytest
import torch

from conftest import DRAFTS, SAMPLES
from eagle3_nb.acceptance import Drafting, simulate
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.features import draft_features
from eagle3_nb.model import Wiring
from eagle3_nb.session import read_prompts
from test_acceptance import assert_same_runs, cache_free_pass

pytestmark = pytest.mark.slow

TARGET = SAMPLES / "target"
TRAINED = Wiring("trained", (2, 4, 5))


@pytest.fixture(scope="module")
def models64():
    from eagle3_nb.model import load_draft
    from eagle3_nb.target import TargetModel
    return (load_draft(DRAFTS / "good", embed_from=TARGET, dtype=torch.float64),
            TargetModel.load(TARGET, dtype=torch.float64))


@pytest.fixture(scope="module")
def prompts(models64):
    return [p[:n] for p, n in zip(read_prompts(SAMPLES / "prompts.jsonl", models64[1], 4),
                                  (30, 12, 21, 8))]


def top(draft, logits, k):
    probs = torch.softmax(logits, -1)
    values, idx = probs.topk(k)
    return values.tolist(), draft.to_target_ids(idx, TRAINED).tolist()


def grow_candidates(draft, target, seq, steps, k):
    """All candidates as (score, token, parent candidate index or -1), in candidate order."""
    projected, _ = draft.project(draft_features(target.forward_hidden(seq[:-1]), TRAINED), TRAINED)
    base_tokens = seq[1:]
    logits, feature = cache_free_pass(draft, base_tokens, projected, TRAINED)
    probs, tokens = top(draft, logits, k)
    candidates = [(p, t, -1) for p, t in zip(probs, tokens)]
    beams = [(j, tokens[j], feature, probs[j]) for j in range(k)]  # (candidate, token, fed, score)
    history = [[] for _ in range(k)]                               # per slot: (token, feature)
    for i in range(1, steps):
        children, outputs = [], []
        for slot, (cand, token, fed, score) in enumerate(beams):
            history[slot].append((token, fed))
            tokens_in = torch.cat([base_tokens, torch.tensor([t for t, _ in history[slot]])])
            h0 = torch.cat([projected, torch.stack([f for _, f in history[slot]])])
            logits, out = cache_free_pass(draft, tokens_in, h0, TRAINED)
            outputs.append(out)
            for p, t in zip(*top(draft, logits, k)):
                children.append((score * p, t, cand))
        first = len(candidates)
        candidates += children
        best = sorted(range(len(children)), key=lambda c: -children[c][0])[:k]
        beams = [(first + c, children[c][1], outputs[c // k], children[c][0]) for c in best]
    return candidates


def verify_tree(target, seq, candidates, n_tokens):
    kept = sorted(sorted(range(len(candidates)), key=lambda c: -candidates[c][0])[:n_tokens - 1])
    node_of = {c: n + 1 for n, c in enumerate(kept)}
    parent = {n + 1: (0 if candidates[c][2] == -1 else node_of.get(candidates[c][2]))
              for n, c in enumerate(kept)}
    token = {0: int(seq[-1]), **{n + 1: candidates[c][1] for n, c in enumerate(kept)}}

    def prediction(node):
        path = []
        while node:
            path.append(token[node])
            node = parent[node]
        full = torch.cat([seq, torch.tensor(path[::-1], dtype=torch.long)])
        return int(target.forward_hidden(full).next_tokens[-1])

    node, accepted = 0, []
    while True:
        want = prediction(node)
        match = next((n for n in sorted(parent) if parent[n] == node and token[n] == want), None)
        if match is None:
            return accepted, want
        accepted.append(token[match])
        node = match


@torch.no_grad()
def brute_force_tree(draft, target, prompt, drafting, max_new):
    seq = torch.cat([prompt, target.forward_hidden(prompt).next_tokens[-1:]])
    counts = []
    while len(seq) - len(prompt) < max_new:
        candidates = grow_candidates(draft, target, seq, drafting.num_steps, drafting.topk)
        accepted, bonus = verify_tree(target, seq, candidates, drafting.num_draft_tokens)
        counts.append(len(accepted))
        seq = torch.cat([seq, torch.tensor(accepted + [bonus], dtype=torch.long)])
    return seq[len(prompt):].tolist(), counts


@pytest.mark.parametrize("drafting", [Drafting(3, 2, 5), Drafting(4, 3, 8), Drafting(2, 4, 21)])
def test_tree_matches_brute_force(models64, prompts, drafting):
    draft, target = models64
    result = simulate(draft, target, prompts, max_new_tokens=14, wiring=TRAINED,
                      drafting=drafting, batch_size=4)
    for run, prompt in zip(result.samples, prompts):
        tokens, counts = brute_force_tree(draft, target, prompt, drafting, 14)
        assert run.generated == tokens
        assert [s.accepted for s in run.steps] == counts
    stats = result.stats()
    assert stats["drafting"]["topk"] == drafting.topk
    assert max(int(k) for k, v in stats["accept_length_histogram"].items() if v) <= drafting.num_steps + 1


def test_topk_one_tree_is_the_chain_token_for_token(models64, prompts):
    """The tree code at topk 1 (not a shortcut to the chain) reproduces the chain simulation."""
    draft, target = models64
    chain = simulate(draft, target, prompts, 4, 20, TRAINED, batch_size=2)
    tree = simulate(draft, target, prompts, 4, 20, TRAINED, batch_size=2, tree=True)
    for a, b in zip(chain.samples, tree.samples):
        assert a.generated == b.generated
        assert [(s.drafted, s.target, s.accepted) for s in a.steps] == \
               [(s.drafted, s.target, s.accepted) for s in b.steps]
    assert all(s.tree is not None for s in tree.steps) and all(s.tree is None for s in chain.steps)


def test_tree_tokens_do_not_depend_on_the_batch_size(models64, prompts):
    draft, target = models64
    drafting = Drafting(3, 3, 7)
    alone = simulate(draft, target, prompts, max_new_tokens=16, wiring=TRAINED,
                     drafting=drafting, batch_size=1)
    together = simulate(draft, target, prompts, max_new_tokens=16, wiring=TRAINED,
                        drafting=drafting, batch_size=4)
    assert_same_runs(alone, together)


def test_a_tree_step_shows_its_path_and_tree(models64, prompts):
    draft, target = models64
    result = simulate(draft, target, prompts[:2], max_new_tokens=12, wiring=TRAINED,
                      drafting=Drafting(3, 2, 6))
    for step in result.steps:
        tree = step.to_json()["tree"]
        assert len(tree["tokens"]) == 6 and tree["parents"][0] == -1
        # the shown path agrees with the target up to the accepted count, then misses
        agree = [d == t for d, t in zip(step.drafted, step.target)]
        assert agree[:step.accepted] == [True] * step.accepted
        assert step.accepted == len(step.drafted) or not agree[step.accepted]
        assert step.bonus == step.target[step.accepted]


@pytest.mark.parametrize("kwargs,message", [
    ({"num_steps": 3, "topk": 2, "num_draft_tokens": 12}, "2 to 11"),
    ({"num_steps": 3, "topk": 2, "num_draft_tokens": 1}, "2 to 11"),
    ({"num_steps": 0}, "must be >= 1"),
    ({"topk": 0}, "must be >= 1"),
])
def test_impossible_tree_sizes_are_clear_errors(kwargs, message):
    with pytest.raises(Eagle3NbError, match=message):
        Drafting(**kwargs)


def test_topk_one_takes_the_chain_size_as_sglang_does():
    assert Drafting(5, 1, 8).num_draft_tokens == 6
    assert Drafting(5, 4).num_draft_tokens == 1 + 4 + 4 * 16


# --- sampling: target-only rejection sampling commits the target's own distribution ---------

def chi_square_ok(counts: dict[int, int], probs: torch.Tensor, n: int) -> bool:
    """Pearson's statistic over the bins expected 5 times or more (the rest lumped together)
    below df + 6 sqrt(2 df): a false alarm is rarer than 1 in 10^5."""
    expected = (probs * n).tolist()
    big = [t for t, e in enumerate(expected) if e >= 5]
    observed = [counts.get(t, 0) for t in big] + [n - sum(counts.get(t, 0) for t in big)]
    expect = [expected[t] for t in big] + [n - sum(expected[t] for t in big)]
    pairs = [(o, e) for o, e in zip(observed, expect) if e > 0]
    stat = sum((o - e) ** 2 / e for o, e in pairs)
    df = len(pairs) - 1
    return stat < df + 6 * (2 * df) ** 0.5


def hand_tree():
    """root -> 1 (token 2), 2 (token 4); 1 -> 3 (token 1); 2 -> 4 (token 2)."""
    from eagle3_nb.tree import DraftTree
    return DraftTree(torch.tensor([[2, 4, 1, 2]]), torch.tensor([[0.5, 0.3, 0.2, 0.1]]),
                     [[-1, 0, 0, 1, 2]], [[0, 1, 1, 2, 2]])


def test_sampled_verification_commits_the_targets_distribution():
    from eagle3_nb.tree import sampled_path
    tree, gen = hand_tree(), torch.Generator().manual_seed(7)
    probs = torch.distributions.Dirichlet(torch.ones(6)).sample((5,))
    n, first, second_after_2 = 20000, {}, {}
    for _ in range(n):
        path, bonus = sampled_path(tree, 0, probs, gen)
        tokens = [int(tree.tokens[0, c - 1]) for c in path] + [bonus]
        first[tokens[0]] = first.get(tokens[0], 0) + 1
        if tokens[0] == 2:          # token 2 first can only be node 1 accepted
            second_after_2[tokens[1]] = second_after_2.get(tokens[1], 0) + 1
    assert chi_square_ok(first, probs[0], n)
    assert chi_square_ok(second_after_2, probs[1], sum(second_after_2.values()))
    # the rule is not vacuous: a bonus drawn from the full distribution (rejected children
    # left in) commits the wrong one
    skewed = probs[0].clone()
    skewed[2] += probs[0][2] * (1 - probs[0][2])
    assert not chi_square_ok(first, skewed / skewed.sum(), n)


def test_sampled_simulation_commits_the_targets_distribution(models64):
    """End to end on the real target: one prompt, many rows; the token after the first
    (committed by the first verify step) follows the target's distribution at temperature 1."""
    draft, target = models64
    prompt = read_prompts(SAMPLES / "prompts.jsonl", target, 1)[0][:12]
    n = 1500
    result = simulate(draft, target, [prompt] * n, max_new_tokens=2, wiring=TRAINED,
                      drafting=Drafting(2, temperature=1.0), batch_size=n, seed=3)
    firsts = [r.generated[0] for r in result.samples]
    top = max(set(firsts), key=firsts.count)
    seconds = {}
    for r in result.samples:
        if r.generated[0] == top:
            seconds[r.generated[1]] = seconds.get(r.generated[1], 0) + 1
    with torch.no_grad():
        first_p = torch.softmax(target.forward_hidden(prompt).logits[-1].double(), -1)
        after = torch.softmax(target.forward_hidden(
            torch.cat([prompt, torch.tensor([top])])).logits[-1].double(), -1)
    assert chi_square_ok({t: firsts.count(t) for t in set(firsts)}, first_p, n)
    assert chi_square_ok(seconds, after, sum(seconds.values()))
    assert result.stats()["drafting"]["verification"] == "target-only rejection sampling"


def test_sampling_is_reproducible_by_seed(models64, prompts):
    draft, target = models64
    runs = [simulate(draft, target, prompts[:2], max_new_tokens=10, wiring=TRAINED,
                     drafting=Drafting(3, 2, 5, temperature=0.8), seed=s) for s in (1, 1, 2)]
    tokens = [[r.generated for r in run.samples] for run in runs]
    assert tokens[0] == tokens[1] and tokens[0] != tokens[2]
