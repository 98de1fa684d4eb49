"""The walk over the verify points: each step read from the drafts and the target's known
continuation; the last steps that check tokens past it verified by one target pass (Tail)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_nb.decoding import Drafting, SampleRun, VerifyStep, tree_step
from eagle3_nb.greedy.drafts import Drafted
from eagle3_nb.greedy.generation import Generation
from eagle3_nb.model import Wiring, out_of_range_error
from eagle3_nb.tree import DraftTree, accepted_path


@dataclass
class Pending:
    """A last verify step that checks tokens past the generated ones: drafted from position p
    of prompt b, its drafts having followed the target's tokens up to `at`, the node at the last
    generated position. `below`: every node under `at` (and `at`) by its tokens from there."""
    run: SampleRun
    b: int
    p: int
    drafts: _Drafts
    at: int
    below: dict[int, tuple[int, ...]]


def walk_job(gen: Generation, drafted: Drafted, offset: int, wiring: Wiring, vocab: int,
             drafting: Drafting, max_new_tokens: int, eos: set[int],
             tree: bool) -> tuple[list[SampleRun], list[Pending]]:
    """One job's verify steps over the batch, its drafts rows offset + b of `drafted`; its last
    steps that check tokens past the generated ones are left pending (finish)."""
    runs, pending = [], []
    for b, (prompt, seq) in enumerate(zip(gen.prompts, gen.tokens)):
        run = SampleRun(prompt, seq[len(prompt)])
        runs.append(run)
        if run.first_token in eos:
            continue

        def refused(p, b=b, prompt=prompt):
            bad = drafted.bad[offset + b][p - len(prompt)]
            return bad and out_of_range_error(*bad, vocab, wiring)

        def step_at(p, b=b, seq=seq, prompt=prompt):
            # a verify step from position p drafts from row p - len(prompt)
            found = drafted.at(offset + b, p - len(prompt))
            if not tree:               # the many chain steps: no _Drafts unless pending
                known = seq[p + 1:p + len(found[0]) + 2]
                step = _chain_step(found, p, known + [None] * (len(found[0]) + 1 - len(known)))
                return step, (None if step else _Drafts.of_chain(*found, seq[p]))
            drafts = _Drafts.of_tree(*found, seq[p])
            return drafts.step(p, drafts.predicted(seq, p)), drafts
        left = _walk(run, max_new_tokens, eos, step_at, refused)
        if left is not None:
            p, drafts = left
            path = drafts.accepted(drafts.predicted(seq, p))
            at = path[-1] if path else 0
            pending.append(Pending(run, b, p, drafts, at, drafts.below(at)))
    return runs, pending


def _walk(run: SampleRun, max_new_tokens: int, eos: set[int], step_at, refused):
    """Verify steps from the first token on, until max_new_tokens are generated (the last step
    kept whole) or, with eos, a step commits one. refused(p): the error an engine stops on when
    drafting from position p, or None. step_at(p): (the step, or None when it checks tokens
    past the generated ones, what was drafted); such a step is the last: (p, drafts) is
    returned for it."""
    p = len(run.prompt)            # the position of the last committed token, next to verify
    while p - len(run.prompt) + 1 < max_new_tokens:
        error = refused(p)
        if error:
            raise error
        step, drafts = step_at(p)
        if step is None:
            return p, drafts
        run.steps.append(step)
        committed = step.drafted[:step.accepted] + [step.bonus]
        p += len(committed)
        if eos.intersection(committed):
            return None
    return None


def finish(gen: Generation, pending: list[Pending]) -> None:
    """The pending last steps of every job: one target pass per batch over, per prompt, the
    drafted tokens past its generated ones that followed the target's (merged by their tokens:
    the same tokens after the same context get the same answer), then each step whole."""
    if not pending:
        return
    if gen.tail is None:
        raise RuntimeError("a reused generation too short for its last verify steps")
    tries: dict[int, dict[tuple, int]] = {}
    for item in pending:
        trie = tries.setdefault(item.b, {(): 0})
        for tokens in item.below.values():
            for depth in range(1, len(tokens) + 1):
                trie.setdefault(tokens[:depth], len(trie))
    nodes = {b: [(gen.tokens[b][-1], 0)] + [(path[-1], trie[path[:-1]])
                                             for path in list(trie)[1:]]
             for b, trie in tries.items()}
    preds = gen.tail.predict(nodes)
    for item in pending:
        trie, seq = tries[item.b], gen.tokens[item.b]
        predicted = item.drafts.predicted(seq, item.p)
        for node, tokens in item.below.items():
            predicted[node] = preds[item.b][trie[tokens]]
        item.run.steps.append(item.drafts.step(item.p, predicted))


def _chain_step(found: tuple, p: int, predicted: list[int | None]) -> VerifyStep | None:
    """A chain's verify step from position p: found (drafts, top ids, top probabilities, those
    rounded) against predicted, the target's token after the root and after each draft (None
    where not known: then None when the step needs it)."""
    drafted, top_ids, top_probs = found
    accepted = 0
    while accepted < len(drafted) and drafted[accepted] == predicted[accepted]:
        accepted += 1
    if predicted[accepted] is None:
        return None
    candidates = [[[i, q] for i, q in zip(ids, probs)] for ids, probs in zip(top_ids, top_probs)]
    return VerifyStep(p + 1, drafted, predicted[:accepted + 1], accepted, candidates)


@dataclass
class _Drafts:
    """What a verify step from position p drafted, as a tree (a chain: each node the child of
    the one before): node 0 the root (the token at p), the target ids of the others, their
    parents and depths; `found` as drafted (a chain: drafts, top ids, top probabilities; a
    tree: the tree and its row)."""
    tokens: list[int]
    parents: list[int | None]
    depths: list[int]
    found: tuple
    tree: bool

    @classmethod
    def of_chain(cls, drafted: list[int], top_ids, top_probs, root: int) -> _Drafts:
        k = len(drafted)
        return cls([root] + drafted, [-1] + list(range(k)), list(range(k + 1)),
                   (drafted, top_ids, top_probs), False)

    @classmethod
    def of_tree(cls, drafts: DraftTree, row: int, root: int) -> _Drafts:
        return cls([root] + drafts.tokens[row].tolist(), drafts.parents[row],
                   drafts.depths[row], (drafts, row), True)

    def predicted(self, seq: list[int], p: int) -> list[int | None]:
        """Per node, the target's token after it where the generation knows it: at depth d on
        the target's own continuation that is token p + d + 1 (None past the generated ones;
        off that continuation it is never read)."""
        return [seq[p + d + 1] if p + d + 1 < len(seq) else None for d in self.depths]

    def accepted(self, predicted: list[int | None]) -> list[int]:
        if self.tree:
            drafts, row = self.found
            return accepted_path(drafts, row, predicted)
        path: list[int] = []       # a chain: nodes 1.. while each is the target's token
        while len(path) + 1 < len(self.tokens) and \
                self.tokens[len(path) + 1] == predicted[len(path)]:
            path.append(len(path) + 1)
        return path

    def step(self, p: int, predicted: list[int | None]) -> VerifyStep | None:
        """The verify step from position p; None when the nodes' tokens known do not decide it."""
        path = self.accepted(predicted)
        bonus = predicted[path[-1] if path else 0]
        if bonus is None:
            return None
        if self.tree:
            drafts, row = self.found
            return tree_step(drafts, row, path, self.tokens, bonus, p + 1)
        return _chain_step(self.found, p, predicted)

    def below(self, node: int) -> dict[int, tuple[int, ...]]:
        """node and every node under it, by their tokens after node's."""
        out = {node: ()}
        for n in range(node + 1, len(self.tokens)):
            parent = self.parents[n]
            if parent is not None and parent in out:
                out[n] = out[parent] + (self.tokens[n],)
        return out
