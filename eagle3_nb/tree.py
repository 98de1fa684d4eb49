"""SGLang's tree drafting and greedy tree verification (--speculative-eagle-topk > 1), as rules
that acceptance.simulate applies on a real target. Read in sglang 0.5.23 (the rule is cited per
release in engines/sglang/profiles.py, TREE_DRAFTING):

1. Level 0: the draft extends over the committed positions; its topk most probable tokens
   (softmax of the draft logits, mapped through d2t) are the first candidates, each scored by its
   probability, and the first beams (srt/speculative/spec_utils.py `select_top_k_tokens`, i = 0).
2. Each of num_steps - 1 draft forwards runs the topk beams. A beam is fed its parent's output
   feature; its attention sees the prefix plus whatever earlier beams ran in the same beam slot
   (kernels/ops/speculative/cache_locs.py `generate_draft_decode_kv_indices`: slot topk_id reads
   `seq_len + topk_id * num_steps + [0, iter)`), which are its ancestors only while the ranking
   keeps the slots in place. Every beam's topk children are candidates scored parent score x
   child probability, and the topk best of those topk^2 become the next beams (`select_top_k_tokens`,
   i > 0; eagle_worker_v2.py `draft_forward`).
3. The num_draft_tokens - 1 best-scored candidates of all levels, in candidate order, are the
   tree (eagle_utils.py `organize_draft_results`). A candidate's parent is found among them
   (spec_tree.py `build_tree_kernel_efficient`); one whose parent was not kept cannot be reached.
4. The target verifies the tree in one pass: each node sees the prefix, its ancestors and itself,
   at position prefix + depth. From the root, the first child in candidate order equal to the
   target's greedy token at the current node is accepted, and so on down; the target's token at
   the last accepted node is the bonus (spec_tree.py `verify_tree_greedy_kernel_triton`).
5. Sampling (temperature > 0): target-only rejection sampling, SGLang's default
   (kernels/jit/include/sgl_kernel/speculative/sampling.cuh `TreeSpeculativeSamplingTargetOnly`
   with threshold_single = threshold_acc = 1) and, for a chain, vLLM's rejection sampler when
   the draft hands it no probabilities (v1/sample/rejection_sampler.py, NO_DRAFT_PROBS, read in
   0.33.0; vLLM's path with cached draft probabilities is not modelled). At each node one
   uniform draw u: the children, in candidate order, are accepted where u first falls below the
   running sum of their target probabilities; if none is, the bonus is drawn from the target's
   distribution there with the rejected children's tokens removed. Each committed token is
   then distributed exactly as the target's own sample (tests/test_tree.py).

At topk 1 this is the chain acceptance.simulate runs, token for token (tests/test_tree.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from eagle3_nb.model import DraftCache, Wiring


@dataclass
class DraftTree:
    """Per row of a batch: node 0 is the root (the last committed token), nodes 1..N-1 the kept
    candidates in candidate order, so a parent always comes before its children."""
    tokens: torch.Tensor                 # [B, N - 1] target ids of nodes 1..N-1
    scores: torch.Tensor                 # [B, N - 1] their cumulative draft probabilities
    parents: list[list[int | None]]      # per row, per node: its parent (root -1, unreachable None)
    depths: list[list[int]]              # per row, per node: its depth (root 0)

    def children(self, row: int, node: int) -> list[int]:
        """The reachable children of a node, in candidate order (the order verify tries them)."""
        return [n for n, p in enumerate(self.parents[row]) if p == node]

    def visible(self, row: int) -> list[list[int]]:
        """Per node, the nodes its verify query sees: itself and its ancestors."""
        out: list[list[int]] = []
        for node, parent in enumerate(self.parents[row]):
            out.append((out[parent] if parent is not None and parent >= 0 else []) + [node])
        return out


def _top_children(logits: torch.Tensor, topk: int, target_ids,
                  step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[R, Vd] draft logits -> (probabilities, target ids) of the topk best, each [R, topk];
    target_ids(draft_ids, step) maps them through d2t."""
    probs = torch.softmax(logits.float(), -1)
    top = probs.topk(topk, -1)
    return top.values, target_ids(top.indices, step)


@torch.no_grad()
def draft_tree(draft, ids, feats, positions, valid, cache: DraftCache, wiring: Wiring,
               num_steps: int, topk: int, num_draft_tokens: int) -> DraftTree:
    """Extend the draft over the committed positions (ids, feats, positions, valid: [B, T]),
    grow the candidate levels, keep the tree. The cache ends as it began plus the extend."""
    B, K = ids.shape[0], topk
    out = draft.run(ids, feats, positions, cache, wiring, last_only=True, valid=valid)
    prefix = cache.length
    cache.select(torch.arange(B, device=ids.device).repeat_interleave(K))  # one row per slot
    slot_pos = positions[:, -1:].repeat_interleave(K, 0)

    def run_beams(beam_ids, feature, i):
        nxt = draft.run(beam_ids, feature, slot_pos + i, cache, wiring, own_features=True)
        return nxt.logits[:, -1], nxt.features

    tree = grow_levels(out.logits[:, -1], out.features, run_beams,
                       lambda draft_ids, step: draft.checked_target_ids(draft_ids, wiring, step),
                       num_steps, K, num_draft_tokens)
    cache.select(torch.arange(B, device=ids.device) * K)
    cache.truncate(prefix)
    return tree


def grow_levels(logits: torch.Tensor, features: torch.Tensor, run_beams, target_ids,
                num_steps: int, topk: int, num_draft_tokens: int) -> DraftTree:
    """The candidate levels from the extend's last logits [R, Vd] and features [R, 1, H], and
    the tree kept from them. run_beams(beam_ids [R*K, 1], features [R*K, 1, H], step) runs the
    draft's forward `step` over the beams (slot fastest) and returns (logits [R*K, Vd],
    features [R*K, ..., H])."""
    B, K = logits.shape[0], topk
    scores, tokens = _top_children(logits, K, target_ids, 0)
    levels = [(scores, tokens, torch.full((B, K), -1, dtype=torch.long, device=logits.device))]
    beams = torch.arange(K, device=logits.device).expand(B, K)   # candidate index of each beam
    beam_ids, feature = tokens.reshape(B * K, 1), features.repeat_interleave(K, 0)
    rows = torch.arange(B, device=logits.device)[:, None]
    for i in range(1, num_steps):
        step_logits, step_features = run_beams(beam_ids, feature, i)
        probs, child = _top_children(step_logits, K, target_ids, i)
        expanded = (scores[:, :, None] * probs.view(B, K, K)).view(B, K * K)
        levels.append((expanded, child.view(B, K * K), beams.repeat_interleave(K, 1)))
        scores, pick = expanded.topk(K, -1)
        beams = K + K * K * (i - 1) + pick
        beam_ids = child.view(B, K * K).gather(1, pick).reshape(B * K, 1)
        feature = step_features.reshape(B, K, 1, -1)[rows, pick // K].reshape(B * K, 1, -1)
    return _keep_best(levels, num_draft_tokens)


def _keep_best(levels, num_draft_tokens: int) -> DraftTree:
    scores = torch.cat([lv[0] for lv in levels], 1)
    tokens = torch.cat([lv[1] for lv in levels], 1)
    parents = torch.cat([lv[2] for lv in levels], 1)
    keep = scores.topk(num_draft_tokens - 1, -1).indices.sort(-1).values
    kept_parents = parents.gather(1, keep).tolist()
    tree_parents, depths = [], []
    for row_keep, row_parents in zip(keep.tolist(), kept_parents):
        node_of = {cand: n + 1 for n, cand in enumerate(row_keep)}
        nodes: list[int | None] = [-1]
        for cand in row_parents:
            nodes.append(0 if cand == -1 else node_of.get(cand))
        tree_parents.append(nodes)
        depths.append(_depths(nodes))
    return DraftTree(tokens.gather(1, keep), scores.gather(1, keep), tree_parents, depths)


def _depths(parents: list[int | None]) -> list[int]:
    """Root 0, a child one below its parent; an unreachable node sits one below the root (its
    verify result is never read, as in SGLang, where it joins no path)."""
    out: list[int] = []
    for parent in parents:
        out.append(0 if parent == -1 else 1 + (out[parent] if parent is not None else 0))
    return out


def verify_mask(tree: DraftTree, past_valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive [B, 1, N, P + N] attention mask of the verify pass: every node sees the
    valid cache slots and its own ancestors and itself (0), nothing else (the dtype's minimum)."""
    B, P = past_valid.shape
    N = tree.tokens.shape[1] + 1
    sees = torch.zeros(B, N, P + N, dtype=torch.bool)
    sees[:, :, :P] = past_valid.bool().cpu()[:, None, :]
    rows, nodes, cols = [], [], []
    for b in range(B):
        for node, visible in enumerate(tree.visible(b)):
            rows += [b] * len(visible)
            nodes += [node] * len(visible)
            cols += [P + v for v in visible]
    sees[rows, nodes, cols] = True
    mask = torch.zeros(B, 1, N, P + N, dtype=dtype)
    return mask.masked_fill(~sees[:, None], torch.finfo(dtype).min)


def accepted_path(tree: DraftTree, row: int, predicted: list[int]) -> list[int]:
    """The nodes greedy verification accepts below the root: at each node, the first child in
    candidate order whose token is the target's prediction there (predicted: per node)."""
    path, node = [], 0
    drafted = tree.tokens[row].tolist()
    while True:
        match = next((c for c in tree.children(row, node) if drafted[c - 1] == predicted[node]),
                     None)
        if match is None:
            return path
        path.append(match)
        node = match


def shown_path(tree: DraftTree, row: int, accepted: list[int]) -> list[int]:
    """The accepted nodes, then the draft's own favourite continuation (the best-scored child,
    down to a leaf): the path a per-token view shows, its first unaccepted node the miss."""
    path = list(accepted)
    node = path[-1] if path else 0
    scores = tree.scores[row].tolist()
    while children := tree.children(row, node):
        node = max(children, key=lambda c: scores[c - 1])
        path.append(node)
    return path


def target_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The target's sampling distribution at each position, on the CPU in float32."""
    return torch.softmax(logits.float().cpu() / temperature, -1)


def sampled_path(tree: DraftTree, row: int, probs: torch.Tensor,
                 generator: torch.Generator) -> tuple[list[int], int]:
    """(accepted nodes below the root, bonus token) by target-only rejection sampling; probs
    [N, V]: the target's distribution at each node (node 0: the root)."""
    path, node = [], 0
    drafted = tree.tokens[row].tolist()
    while True:
        p = probs[node]
        u = float(torch.rand((), generator=generator))
        mass, rejected, chosen = 0.0, [], None
        for child in tree.children(row, node):
            token = drafted[child - 1]
            mass += float(p[token])
            if p[token] > 0 and u < mass:
                chosen = child
                break
            rejected.append(token)
        if chosen is None:
            residual = p.clone()
            residual[rejected] = 0.0
            return path, int(torch.multinomial(residual, 1, generator=generator))
        path.append(chosen)
        node = chosen

