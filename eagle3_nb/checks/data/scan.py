"""One streamed pass over the training rows: what each data check needs, counted as it goes.

A Sample is one training row as the trainer tokenised it: stored token rows as they are, or a
conversation tokenised the way SpecForge's parser does (render.specforge_tokens). Memory stays
bounded: counters, a token-count array and a few examples, never the rows.
"""

from __future__ import annotations

from array import array
from collections import Counter
from functools import lru_cache
from itertools import compress
from dataclasses import dataclass, field
from typing import Any

from eagle3_nb.checks.data.render import (ChatTemplate, ParsedTurns, TrainerTemplate,
                                          has_think_marker, served_completions)
from eagle3_nb.io.training_data import Row

EXAMPLES = 3        # rows quoted per problem
FOLD = 1 << 22      # token ids kept before they are folded into counts (32 MiB)
EDGE_TOKENS = 3     # tokens shown on each side of a supervised span


@dataclass
class Sample:
    ids: list[int] | None
    mask: list[int] | None
    row: Row
    cut: int = 0                       # supervised tokens lost to max_length (emulated rows)
    parsed: ParsedTurns | None = None  # SpecForge's message list (emulated rows)
    rendered: str | None = None


def spans(mask: list[int]) -> list[tuple[int, int]]:
    """Contiguous runs of supervised positions, [start, end) (searched in C, not per token)."""
    flags = bytes(1 if m else 0 for m in mask) if any(m not in (0, 1) for m in mask[:1]) \
        else bytes(mask)
    out, at = [], flags.find(1)
    while at >= 0:
        end = flags.find(0, at)
        end = len(flags) if end < 0 else end
        out.append((at, end))
        at = flags.find(1, end)
    return out


@dataclass
class Scan:
    """Running totals of one pass (see check_data for what each check makes of them)."""
    tokenizer: Any = None
    served: ChatTemplate | None = None
    trainer: TrainerTemplate | None = None
    markers: dict[str, str] = field(default_factory=dict)
    served_think: bool | None = None
    max_length: int | None = None
    last_turn_only: bool = False
    rows: int = 0
    conversations: int = 0
    token_rows: int = 0
    tokens: int = 0
    supervised: int = 0
    empty: int = 0
    status: Counter = field(default_factory=Counter)
    dropped_leading: int = 0
    truncated_turns: int = 0
    no_conversation: int = 0
    assistant_turns: int = 0
    turns_covered: int = 0
    turns_kept: int = 0
    header_missing: int = 0
    eot_missing: int = 0
    at_max_length: int = 0
    rows_cut: int = 0
    tokens_cut: int = 0
    spans: int = 0
    bad_starts: int = 0
    bad_ends: int = 0
    edges: Counter = field(default_factory=Counter)
    think_supervised: int = 0
    think_missing: int = 0
    rerendered: int = 0
    rerender_equal: int = 0
    reasoning_turns: int = 0
    content_markers: int = 0
    examples: dict[str, list] = field(default_factory=dict)
    supervised_ids: array = field(default_factory=lambda: array("q"))
    all_ids: array = field(default_factory=lambda: array("q"))
    all_counts: Any = None   # all_ids folded into counts past FOLD ids (bounded memory)

    def fold(self) -> None:
        """Every token seen so far as counts per id (the domain check needs no more)."""
        import numpy as np

        ids = np.frombuffer(self.all_ids, dtype=np.int64)
        ids = ids[ids >= 0]
        counts = np.bincount(ids) if ids.size else np.zeros(0, np.int64)
        if self.all_counts is not None:
            size = max(len(counts), len(self.all_counts))
            counts = np.pad(counts, (0, size - len(counts))) + \
                np.pad(self.all_counts, (0, size - len(self.all_counts)))
        self.all_counts, self.all_ids = counts, array("q")

    def example(self, kind: str, what: Any) -> None:
        got = self.examples.setdefault(kind, [])
        if len(got) < EXAMPLES:
            got.append(what)

    # ------------------------------------------------------------------ per row

    def add_row(self, row: Row) -> None:
        """Conversation-level facts (coverage, provenance, reasoning): checks 3 and 7."""
        self.rows += 1
        if row.has_status:
            self.status[str(row.status)] += 1
            if row.status != "success":
                self.example("failed_rows", {"line": row.line, "status": row.status,
                                             "error": (row.error or "")[:120]})
        if row.conversation is None:
            if row.input_ids is None:
                self.no_conversation += 1
            return
        self.conversations += 1
        for turn in row.conversation:
            if turn.get("role") != "assistant":
                continue
            self.assistant_turns += 1
            reasoning = turn.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning.strip():
                self.reasoning_turns += 1
            if has_think_marker(str(turn.get("content", ""))):
                self.content_markers += 1
                self.example("content_markers", {"line": row.line,
                                                 "content": str(turn["content"])[:80]})

    def add_sample(self, s: Sample) -> None:
        """Token-level facts: checks 1, 2, 3 (spans), 4, 8 and 10's training side."""
        if s.parsed is not None:
            self._parsed(s)
        if s.ids is None or s.mask is None:
            return
        self.token_rows += 1
        n_sup = sum(s.mask)
        self.tokens += len(s.ids)
        self.supervised += n_sup
        self.all_ids.extend(s.ids)
        if len(self.all_ids) > FOLD:
            self.fold()
        self.supervised_ids.extend(compress(s.ids, s.mask))
        runs = spans(s.mask)
        self.spans += len(runs)
        turns = s.parsed.messages if s.parsed is not None else s.row.conversation
        if turns is not None:
            kept = sum(1 for m in turns if m.get("role") == "assistant")
            self.turns_kept += kept
            self.turns_covered += min(len(runs), kept)
        if n_sup == 0:
            self.empty += 1
            self.example("empty", {"line": s.row.line, "tokens": len(s.ids)})
        self._truncation(s)
        if self.tokenizer is not None:
            self._edges(s, runs)
            self._template_mode(s, runs)

    def _parsed(self, s: Sample) -> None:
        self.dropped_leading += s.parsed.dropped_leading
        if s.parsed.truncated_at is not None:
            conv = [m for m in s.row.conversation or [] if m.get("role") != "system"]
            lost = len(conv) - s.parsed.dropped_leading - s.parsed.truncated_at
            self.truncated_turns += max(lost, 0)
            self.example("truncated_turns", {"line": s.row.line, "at": s.parsed.truncated_at})
        if s.parsed.dropped_leading:
            self.example("dropped_leading", {"line": s.row.line,
                                             "dropped": s.parsed.dropped_leading})
        if self.trainer is not None and s.rendered is not None:
            self.header_missing += self.trainer.assistant_header not in s.rendered
            self.eot_missing += self.trainer.end_of_turn not in s.rendered

    def _truncation(self, s: Sample) -> None:
        limit = self.max_length
        if limit is None or len(s.ids) < limit:
            return
        self.at_max_length += 1
        cut = s.cut if s.parsed is not None else int(bool(s.mask and s.mask[-1]))
        if cut:
            self.rows_cut += 1
            self.tokens_cut += s.cut
            self.example("cut", {"line": s.row.line, "supervised_cut": s.cut or None})

    def _decode(self, ids: list[int]) -> str:
        return _decoder(self.tokenizer)(tuple(ids))

    def _edges(self, s: Sample, runs: list[tuple[int, int]]) -> None:
        starts = [m for m in [self.markers.get("assistant_header"),
                              *self.markers.get("generation_prompts", [])] if m]
        end = (self.markers.get("end_of_turn") or "").strip()
        # every token holds at least one character: this many tokens hold the longest marker
        lookback = max((len(m) for m in starts), default=0) + 2
        for a, b in runs:
            before = self._decode(s.ids[max(0, a - lookback):a])
            span = self._decode(s.ids[a:b])
            edge = (before[-12:], self._decode(s.ids[a:a + EDGE_TOKENS]),
                    self._decode(s.ids[max(a, b - EDGE_TOKENS):b]),
                    self._decode(s.ids[b:b + EDGE_TOKENS]))
            self.edges[edge] += 1
            if starts and not any(_straddles(before, span, m) for m in starts):
                self.bad_starts += 1
                self.example("bad_start", {"line": s.row.line, "before": before[-24:],
                                           "first": span[:24]})
            if end and b < len(s.ids) and not span.rstrip().endswith(end):
                self.bad_ends += 1
                self.example("bad_end", {"line": s.row.line, "last": span[-24:]})

    def _template_mode(self, s: Sample, runs: list[tuple[int, int]]) -> None:
        if self.served_think is None or not runs:
            return
        trained = any(has_think_marker(self._decode(s.ids[a:b])) for a, b in runs)
        if trained and not self.served_think:
            self.think_supervised += 1
            self.example("think_supervised", {"line": s.row.line, "span": self._decode(
                s.ids[runs[0][0]:runs[0][1]])[:60]})
        elif self.served_think and not trained:
            self.think_missing += 1
            self.example("think_missing", {"line": s.row.line})
        if s.row.conversation and s.row.input_ids is not None and self.served is not None:
            self._rerender(s)

    def _rerender(self, s: Sample) -> None:
        """Stored tokens against the conversation rendered in the serving mode."""
        completions = served_completions(self.served, s.row.conversation)
        text = self.served.render(s.row.conversation)
        self.rerendered += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        if ids == s.ids:
            self.rerender_equal += 1
        elif len(self.examples.get("rerender_differs", [])) < EXAMPLES:
            first = next((i for i, (a, b) in enumerate(zip(ids, s.ids)) if a != b),
                         min(len(ids), len(s.ids)))
            self.example("rerender_differs", {"line": s.row.line, "at_token": first,
                                              "served": self._decode(ids[first:first + 8]),
                                              "stored": self._decode(s.ids[first:first + 8]),
                                              "served_completion": (completions or [""])[0]
                                              and (completions[0] or "")[:40]})


@lru_cache(maxsize=4)
def _decoder(tokenizer):
    """A memoised decode: span edges repeat (the same header, the same end-of-turn) row after
    row."""
    @lru_cache(maxsize=1 << 16)
    def decode(ids: tuple[int, ...]) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=False)
    return decode


def _straddles(before: str, span: str, marker: str) -> bool:
    """The marker ends where the span starts, allowing one token merged across the edge."""
    if before.endswith(marker):
        return True
    joined = before + span[:8]
    at = joined.rfind(marker)
    return at >= 0 and abs(at + len(marker) - len(before)) <= 8
