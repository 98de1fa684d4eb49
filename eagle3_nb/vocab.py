"""VocabMapping: d2t / t2d semantics, validation, format detection with evidence, building from
token counts, coverage. Never guesses: when both readings of a table fit and nothing decides, the
answer is "ambiguous" with what each reading maps to.

Facts (docs/domain.md "d2t"): d2t [Vd] int64 holds offsets, target_id = i + d2t[i]; t2d [Vt] bool marks
the kept target ids; trainers (SafeAILab cnets.py scandata, SpecForge process_token_dict_to_mappings,
speculators build_vocab_mappings_from_distribution) take the Vd most frequent loss-masked ids,
sort them ascending and store offsets, so d2t is non-decreasing and arange(Vd) + d2t == nonzero(t2d).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from eagle3_nb.config import token_id_list
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import (ABSOLUTE, AMBIGUOUS, ARANGE_SUBTRACTED, ERROR, IDENTITY, INVALID,
                                LOW_COVERAGE, MISSING, OFFSET, WARNING, Finding)
from eagle3_nb.io.checkpoint import iter_jsonl

_SHOW = 8             # offending indices spelled out in evidence


@dataclass
class Reading:
    """One interpretation of the stored table: the target id each draft id maps to."""
    name: str                      # "offsets" | "absolute"
    ids: np.ndarray                # int64 [Vd]
    n_out_of_range: int
    out_of_range: list[int]        # first offending draft ids
    n_duplicates: int              # draft ids whose target id repeats an earlier one
    duplicates: list[int]
    increasing: bool               # strictly increasing (what a sorted top-Vd list gives)
    matches_t2d: bool | None       # None without t2d

    @property
    def valid(self) -> bool:
        return self.n_out_of_range == 0 and self.n_duplicates == 0


@dataclass
class VocabMapping:
    draft_vocab_size: int
    vocab_size: int
    d2t: np.ndarray | None
    t2d: np.ndarray | None
    source: str = "checkpoint"
    format: str = ""
    evidence: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    readings: dict[str, Reading] = field(default_factory=dict)

    def __post_init__(self):
        self.format = self._detect()

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, ckpt, cfg) -> "VocabMapping":
        names = ckpt.canonical_keys
        d2t = ckpt.read_array(names["d2t"]) if "d2t" in names else None
        t2d = ckpt.read_array(names["t2d"]) if "t2d" in names else None
        return cls(cfg.Vd, cfg.vocab_size, d2t, t2d, str(ckpt.path))

    # --- detection ---------------------------------------------------------------------------
    def _detect(self) -> str:
        Vd, Vt = self.draft_vocab_size, self.vocab_size
        if self.d2t is None:
            return self._detect_without_d2t()
        if not self._check_table():
            return INVALID
        if self.t2d is not None:
            self._check_t2d()
        self.readings = {"offsets": self._reading("offsets", np.arange(Vd) + self.d2t),
                         "absolute": self._reading("absolute", self.d2t.copy())}
        if Vd == Vt and not self.d2t.any():
            self.evidence.append(f"draft vocab == target vocab ({Vt}) and d2t is all zeros: "
                                 "the identity mapping")
            return IDENTITY
        return self._decide()

    def _detect_without_d2t(self) -> str:
        if self.draft_vocab_size == self.vocab_size:
            self.evidence.append(f"no d2t and draft vocab == target vocab ({self.vocab_size}): "
                                 "draft ids are target ids")
            return IDENTITY
        self.evidence.append(f"no d2t but draft vocab {self.draft_vocab_size} < target vocab "
                             f"{self.vocab_size}: every engine will use draft id i as target id i")
        if self.t2d is not None:
            self.evidence.append("t2d is present, and no engine reads it: d2t can be rebuilt "
                                 "from it (eagle3-nb convert --fix-d2t)")
        return MISSING

    def _check_table(self) -> bool:
        d2t, Vd = self.d2t, self.draft_vocab_size
        if d2t.ndim != 1:
            self.problems.append(f"d2t has shape {list(d2t.shape)}, expected [{Vd}]")
            return False
        if not np.issubdtype(d2t.dtype, np.integer):
            self.problems.append(f"d2t has dtype {d2t.dtype}; engines index with it, it must be "
                                 "an integer tensor (int64)")
            return False
        if len(d2t) == 0:
            self.problems.append("d2t is empty")
            return False
        if len(d2t) != Vd:
            self.problems.append(f"d2t has {len(d2t)} entries, draft_vocab_size is {Vd}")
            return False
        if d2t.dtype != np.int64:
            self.evidence.append(f"d2t is {d2t.dtype}; trainers write int64 (engines cast it)")
        self.d2t = d2t.astype(np.int64)
        return True

    def _check_t2d(self) -> None:
        t2d, Vt, Vd = self.t2d, self.vocab_size, self.draft_vocab_size
        if t2d.ndim != 1 or len(t2d) != Vt:
            self.problems.append(f"t2d has shape {list(t2d.shape)}, expected [{Vt}]")
            self.t2d = None
            return
        if t2d.dtype != np.bool_:
            self.evidence.append(f"t2d is {t2d.dtype}, not bool; read as nonzero entries")
            self.t2d = t2d != 0
        if int(self.t2d.sum()) != Vd:
            self.problems.append(f"t2d marks {int(self.t2d.sum())} target ids, draft vocab is {Vd}")

    def _reading(self, name: str, ids: np.ndarray) -> Reading:
        bad = np.flatnonzero((ids < 0) | (ids >= self.vocab_size))
        _, first = np.unique(ids, return_index=True)
        dup = np.setdiff1d(np.arange(len(ids)), first)
        match = None if self.t2d is None else bool(
            len(ids) == int(self.t2d.sum()) and np.array_equal(np.sort(ids), np.flatnonzero(self.t2d)))
        return Reading(name, ids, len(bad), bad[:_SHOW].tolist(), len(dup), dup[:_SHOW].tolist(),
                       bool(np.all(np.diff(ids) > 0)), match)

    def _decide(self) -> str:
        off, ab = self.readings["offsets"], self.readings["absolute"]
        self.evidence.append(self._describe(off))
        self.evidence.append(self._describe(ab))
        if self.t2d is not None:
            return self._decide_by_t2d(off, ab)
        if off.valid and ab.valid:
            self.evidence.append("no t2d to decide, and both readings are valid tables: "
                                 "trainers always write offsets, but nothing in the file proves it")
            return AMBIGUOUS
        if off.valid:
            return OFFSET
        if ab.valid:
            return ABSOLUTE
        return INVALID

    def _decide_by_t2d(self, off: Reading, ab: Reading) -> str:
        if off.matches_t2d:
            self.evidence.append("as offsets, the ids equal nonzero(t2d): offsets (correct)")
            return OFFSET
        if ab.matches_t2d:
            self.evidence.append("as absolute ids, d2t equals nonzero(t2d): absolute ids were "
                                 "stored where offsets belong")
            return ABSOLUTE
        twice = self._reading("arange_subtracted", self.d2t + 2 * np.arange(len(self.d2t)))
        if twice.matches_t2d:
            self.readings["arange_subtracted"] = twice
            self.evidence.append("d2t + 2 x arange equals nonzero(t2d): correct offsets had "
                                 "arange subtracted once more (a mistaken repair of offsets "
                                 "taken for absolute ids)")
            return ARANGE_SUBTRACTED
        self.problems.append("neither reading agrees with t2d")
        if off.valid and ab.valid:
            return AMBIGUOUS
        return OFFSET if off.valid else (ABSOLUTE if ab.valid else INVALID)

    def _describe(self, r: Reading) -> str:
        parts = [f"as {r.name}: ids {_span(r.ids)}"]
        parts.append("strictly increasing" if r.increasing else "not strictly increasing")
        if r.n_out_of_range:
            parts.append(f"{r.n_out_of_range} ids outside [0, {self.vocab_size}) "
                         f"(draft ids {r.out_of_range}...)")
        if r.n_duplicates:
            parts.append(f"{r.n_duplicates} repeated targets (draft ids {r.duplicates}...)")
        if r.matches_t2d is not None:
            parts.append("equals nonzero(t2d)" if r.matches_t2d else "differs from nonzero(t2d)")
        return ", ".join(parts)

    # --- answers -----------------------------------------------------------------------------
    @property
    def intended_ids(self) -> np.ndarray | None:
        """Target id per draft id as the trainer meant it; None when that cannot be known."""
        if self.format == OFFSET or (self.format == IDENTITY and self.d2t is not None):
            return self.readings["offsets"].ids if self.readings else np.arange(self.draft_vocab_size)
        if self.format == ABSOLUTE:
            return self.readings["absolute"].ids
        if self.format == ARANGE_SUBTRACTED:
            return self.readings["arange_subtracted"].ids
        if self.format == IDENTITY:
            return np.arange(self.draft_vocab_size)
        return None

    def engine_ids(self, profile) -> np.ndarray | None:
        """Target id per draft id as the engine computes it from the stored table; None when
        the table is unusable (wrong dtype or length: the engine fails or indexes garbage)."""
        if self.d2t is None:
            return np.arange(self.draft_vocab_size)
        if not self.readings:
            return None
        return self.readings["offsets"].ids if profile.d2t_reading == "offsets" else self.d2t

    def engine_view(self, profiles: Iterable) -> list[dict[str, Any]]:
        intended = self.intended_ids
        rows = []
        for p in profiles:
            ids = self.engine_ids(p)
            row = {"engine": p.name, "version": p.version, "profile": p.key,
                   "param": p.d2t_param, "n_out_of_range": None, "n_duplicates": None,
                   "n_wrong": None}
            if ids is not None:
                row.update(n_out_of_range=int(((ids < 0) | (ids >= self.vocab_size)).sum()),
                           n_duplicates=int(len(ids) - len(np.unique(ids))),
                           n_wrong=None if intended is None else int((ids != intended).sum()))
            rows.append(row)
        return rows

    def tables(self) -> "MappingTables":
        return MappingTables(self)

    def suspicious_entries(self) -> dict[int, list[str]]:
        return suspicious_entries(self)

    @property
    def t2d_agrees(self) -> bool | None:
        if self.t2d is None or not self.readings:
            return None
        return bool(self.readings["offsets"].matches_t2d)

    def valid(self, profiles: Iterable) -> bool | None:
        if self.format == AMBIGUOUS:
            return None
        if self.format in (MISSING, INVALID):
            return False
        view = self.engine_view(profiles)
        return all(r["n_wrong"] == 0 and r["n_out_of_range"] == 0 for r in view)

    def findings(self) -> list[Finding]:
        ev = {"format": self.format, "evidence": self.evidence, "problems": self.problems}
        fmt = self.format
        out: list[Finding] = []
        if fmt == MISSING:
            out.append(Finding("D2T_MISSING", ERROR, f"draft vocab {self.draft_vocab_size} < "
                               f"target vocab {self.vocab_size} but there is no d2t: every engine "
                               "maps draft id i to target id i (silent garbage). Rebuild it from "
                               "t2d or the training token counts", ev))
        elif fmt == ABSOLUTE:
            out.append(Finding("D2T_ABSOLUTE", ERROR, "d2t holds absolute target ids, engines add "
                               "arange to it (hot_token_id = d2t + arange): draft id i becomes "
                               "target id i + d2t[i]. Fix with eagle3-nb convert SRC DST --fix-d2t", ev))
        elif fmt == ARANGE_SUBTRACTED:
            out.append(Finding("D2T_ARANGE_SUBTRACTED", ERROR, "d2t holds correct offsets minus "
                               "arange: engines compute target id = i + d2t[i], which is now the "
                               "offset, not the token; t2d proves what it was. Repair a copy with "
                               "eagle3-nb convert SRC DST --fix-d2t", ev))
        elif fmt == AMBIGUOUS:
            out.append(Finding("D2T_AMBIGUOUS", WARNING, "d2t reads as valid offsets and as valid "
                               "absolute ids and there is no t2d to decide; trainers write offsets. "
                               "Check a few draft ids against the tokenizer before changing anything", ev))
        elif fmt == INVALID or (fmt == OFFSET and not self.readings["offsets"].valid):
            out.append(Finding("D2T_INVALID", ERROR, "d2t is not a usable table: "
                               + "; ".join(self.problems or [self._describe(self.readings["offsets"])]), ev))
        if fmt == OFFSET and self.d2t is not None and self.draft_vocab_size < self.vocab_size \
                and not self.d2t.any():
            out.append(Finding("D2T_FIRST_N", WARNING, f"d2t is all zeros: the draft's "
                               f"{self.draft_vocab_size} tokens are target ids 0..."
                               f"{self.draft_vocab_size - 1}. Valid, but trainers keep the most "
                               "frequent tokens, which are almost never the first ids: was the "
                               "table written before the token counts were?", ev))
        if self.t2d is not None and fmt in (OFFSET, IDENTITY) and self.t2d_agrees is False:
            out.append(Finding("T2D_MISMATCH", WARNING, "t2d disagrees with d2t (engines ignore t2d, "
                               "training used it to mask targets): " + "; ".join(self.problems), ev))
        return out


def _span(ids: np.ndarray) -> str:
    if len(ids) <= 6:
        return str(ids.tolist())
    return f"[{', '.join(map(str, ids[:3].tolist()))}, ..., {', '.join(map(str, ids[-3:].tolist()))}]"


# --- building and coverage ---------------------------------------------------------------------

def count_tokens(sequences: Iterable[Iterable[int]], loss_masks: Iterable[Iterable[int]] | None = None,
                 vocab_size: int | None = None) -> np.ndarray:
    """Token counts over target ids, only where loss_mask == 1 (as trainers count)."""
    size = vocab_size or 0
    counts = np.zeros(size, dtype=np.int64)
    masks = iter(loss_masks) if loss_masks is not None else None
    for seq in sequences:
        ids = np.asarray(list(seq), dtype=np.int64)
        if masks is not None:
            ids = ids[np.asarray(list(next(masks)), dtype=bool)]
        if ids.size and ids.max() >= len(counts):
            counts = np.pad(counts, (0, int(ids.max()) + 1 - len(counts)))
        if ids.size and ids.min() < 0:
            raise Eagle3NbError("negative token id in the corpus", None, "check the corpus file")
        counts += np.bincount(ids, minlength=len(counts))[: len(counts)]
    return counts


def build_from_counts(counts, draft_vocab_size: int, vocab_size: int) -> VocabMapping:
    """Top-Vd ids by (count desc, id asc), padded with the lowest unseen ids when fewer were
    seen (SpecForge PR #76), sorted ascending, stored as offsets."""
    counts = np.zeros(vocab_size, np.int64) if counts is None else np.asarray(counts, np.int64)
    if len(counts) > vocab_size:
        raise Eagle3NbError(f"counts cover {len(counts)} ids, more than vocab_size {vocab_size}",
                            None, "pass the target vocab size")
    if draft_vocab_size > vocab_size:
        raise Eagle3NbError("draft_vocab_size exceeds vocab_size", None, "check the sizes")
    full = np.zeros(vocab_size, np.int64)
    full[: len(counts)] = counts
    order = np.lexsort((np.arange(vocab_size), -full))  # count desc, then id asc
    ids = np.sort(order[:draft_vocab_size])
    t2d = np.zeros(vocab_size, dtype=bool)
    t2d[ids] = True
    return VocabMapping(draft_vocab_size, vocab_size, ids - np.arange(draft_vocab_size), t2d,
                        "built from counts")


def coverage(ids: np.ndarray | None, counts: np.ndarray) -> float | None:
    """Share of the counted target tokens that lie inside the draft vocab: the ceiling on
    per-token acceptance."""
    total = int(counts.sum())
    if ids is None or total == 0:
        return None
    inside = ids[(ids >= 0) & (ids < len(counts))]
    return float(counts[np.unique(inside)].sum()) / total


def coverage_finding(value: float | None, threshold: float = LOW_COVERAGE) -> list[Finding]:
    if value is None or value >= threshold:
        return []
    return [Finding("LOW_VOCAB_COVERAGE", WARNING, f"only {value:.1%} of the corpus's target "
                    f"tokens are in the draft vocab: at most that share can ever be accepted. "
                    "Rebuild d2t from counts on data like what you serve", {"coverage": value})]


# --- corpus and tokenizer input (local files only) ----------------------------------------------

def load_tokenizer(path: str | Path):
    """An HF `tokenizer.json` (or a directory holding one) through the `tokenizers` package."""
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise Eagle3NbError("tokenizer.json not found", str(p),
                            "pass a tokenizer.json file or the directory that holds it")
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(p))
    except Exception as exc:  # noqa: BLE001 - the Rust error types are not importable
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise Eagle3NbError(f"cannot read the tokenizer ({why})", str(p),
                            "pass an HF tokenizer.json") from None


def read_corpus(path: str | Path, tokenizer=None, vocab_size: int = 1 << 24
                ) -> tuple[list[list[int]], list[list[int]] | None]:
    """Token sequences (and loss masks when given) from JSON Lines (`input_ids` [+ `loss_mask`],
    or `text`/`prompt` with a tokenizer) or a plain text file (with a tokenizer). Ids must lie in
    [0, vocab_size); loss masks are 0/1 lists as long as their ids."""
    p = Path(path)
    if not p.is_file():
        raise Eagle3NbError("corpus file not found", str(p), "pass a .jsonl or text file")
    if p.suffix not in (".jsonl", ".json"):
        return [_encode(tokenizer, p.read_text(encoding="utf-8", errors="replace"), p)], None
    seqs, masks = [], []
    for n, row in iter_jsonl(p):
        if isinstance(row.get("input_ids"), list):
            ids = token_id_list(row["input_ids"], f"line {n} input_ids", str(p), vocab_size)
            mask = row.get("loss_mask") or [1] * len(ids)
            if not isinstance(mask, list) or len(mask) != len(ids) or any(
                    m not in (0, 1) or isinstance(m, float) for m in mask):
                raise Eagle3NbError(f"line {n} loss_mask is not {len(ids)} zeros and ones",
                                    str(p), "write loss_mask as a 0/1 list beside input_ids")
            seqs.append(ids)
            masks.append(mask)
        elif isinstance(row.get("text", row.get("prompt")), str):
            seqs.append(_encode(tokenizer, row.get("text", row.get("prompt")), p))
            masks.append([1] * len(seqs[-1]))
        else:
            raise Eagle3NbError(f"line {n} has neither input_ids nor text/prompt", str(p),
                                "write one JSON object per line")
    return seqs, masks


def _encode(tokenizer, text: str, where: Path) -> list[int]:
    if tokenizer is None:
        raise Eagle3NbError("text in the corpus needs a tokenizer", str(where),
                            "pass --tokenizer (the target's tokenizer.json)")
    return tokenizer.encode(text, add_special_tokens=False).ids


class MappingTables:
    """The arrays every view of a VocabMapping needs, derived once (VocabMapping.tables())."""

    def __init__(self, mapping):
        self.Vd, self.Vt = int(mapping.draft_vocab_size), int(mapping.vocab_size)
        self.format = mapping.format
        self.problems = list(mapping.problems)
        # a d2t that failed the shape/dtype checks has no readings: nothing to map with
        self.usable = mapping.d2t is None or bool(mapping.readings)
        self.d2t = mapping.d2t if (mapping.d2t is not None and self.usable) else None
        if self.d2t is not None:
            self.offsets = mapping.readings["offsets"].ids
            self.absolute = mapping.readings["absolute"].ids
        else:
            self.offsets = np.arange(self.Vd, dtype=np.int64)  # what engines do without d2t
            self.absolute = None
        t2d = mapping.t2d
        self.t2d = t2d if t2d is not None and t2d.ndim == 1 and len(t2d) == self.Vt else None
        self.kept = np.flatnonzero(self.t2d) if self.t2d is not None else None
        self.intended = mapping.intended_ids if self.usable else None

    @property
    def absolute_is_candidate(self) -> bool:
        """The absolute reading is worth showing (not just the mistake engines never make)."""
        return self.absolute is not None and self.format in (ABSOLUTE, AMBIGUOUS, INVALID)

    @staticmethod
    def duplicates(ids: np.ndarray) -> dict[int, int]:
        return duplicates(ids)

    def in_range(self, ids: np.ndarray) -> np.ndarray:
        return (ids >= 0) & (ids < self.Vt)

    def in_t2d(self, ids: np.ndarray) -> np.ndarray | None:
        if self.t2d is None:
            return None
        ok = self.in_range(ids)
        out = np.zeros(len(ids), dtype=bool)
        out[ok] = self.t2d[ids[ok]]
        return out


def duplicates(ids: np.ndarray) -> dict[int, int]:
    """draft id -> the earlier draft id with the same target id."""
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    owner = first[inverse]
    dup = np.flatnonzero(owner != np.arange(len(ids)))
    return {int(i): int(owner[i]) for i in dup}


def suspicious_entries(mapping) -> dict[int, list[str]]:
    """draft id -> why it is suspicious, most serious first; the dict is ordered by seriousness
    (out of range, repeated target, not in t2d, d2t decreasing, engines vs trainer intent) and
    then by draft id."""
    t = MappingTables(mapping)
    if not t.usable:
        return {}
    reasons: dict[int, list[tuple[int, str]]] = {}

    def add(idx, prio, text_of):
        for i in np.asarray(idx).tolist():
            reasons.setdefault(int(i), []).append((prio, text_of(int(i))))

    readings = [("offsets", t.offsets)] if t.d2t is not None else []
    if t.absolute_is_candidate:
        readings.append(("absolute", t.absolute))
    for name, ids in readings:
        what = "i + d2t[i]" if name == "offsets" else "d2t[i]"
        add(np.flatnonzero(~t.in_range(ids)), 0,
            lambda i, ids=ids, name=name, what=what:
            f"as {name}: {what} = {ids[i]} is outside [0, {t.Vt})")
        for i, j in duplicates(ids).items():
            reasons.setdefault(i, []).append(
                (1, f"as {name}: target {ids[i]} repeats draft id {j}'s"))
        inside = t.in_t2d(ids)
        if inside is not None:
            add(np.flatnonzero(t.in_range(ids) & ~inside), 2,
                lambda i, ids=ids, name=name: f"as {name}: target {ids[i]} is not marked in t2d")
    if t.d2t is not None:
        add(np.flatnonzero(np.diff(t.d2t) < 0) + 1, 3,
            lambda i: f"d2t[{i}] = {t.d2t[i]} < d2t[{i - 1}] = {t.d2t[i - 1]}: trainers store a "
                      "sorted list, so d2t never decreases")
    elif t.t2d is not None and t.Vd != t.Vt:
        add(np.flatnonzero(~t.in_t2d(t.offsets)), 2,
            lambda i: f"no d2t: engines use target {i}, which t2d does not keep")
    if t.intended is not None:
        add(np.flatnonzero(t.offsets != t.intended), 4,
            lambda i: f"engines compute target {t.offsets[i]}, the trainer meant {t.intended[i]}")
    order = sorted(reasons, key=lambda i: (min(p for p, _ in reasons[i]), i))
    return {i: [text for _, text in sorted(reasons[i])] for i in order}
