"""Checks 8 and 10: the draft vocabulary against the supervised tokens, and the serving prompts
against the training set.

The trainers build the draft vocab from loss-masked token counts and reuse a cached file
whenever it exists (SpecForge `generate_vocab_mapping_file`, speculators
`save_token_frequency_distribution`): a mapping older than the data, or built from other data,
is the stale case this finds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_nb.errors import UnsafeInputError
from eagle3_nb.findings import INFO, WARNING, Finding
from eagle3_nb.io.torchfile import check_torch_file
from eagle3_nb.vocab import build_from_counts, coverage

# A mapping rebuilt from this data by the trainers' rule keeps every frequent id (overlap 1.0);
# reading only --max-rows rows shifts a few ids at the margin. Below this it came from other data.
STALE_OVERLAP = 0.9
# Files written together (a git checkout, a copy) differ by well under this many seconds.
MTIME_SLACK_S = 60.0
# Serving prompts whose draft-vocab coverage falls this far below the training rows' differ in
# domain enough to cap acceptance (coverage is the ceiling on per-token acceptance).
DOMAIN_GAP = 0.1


def counts_of(ids, vocab_size: int) -> np.ndarray:
    arr = np.frombuffer(ids, dtype=np.int64) if len(ids) else np.zeros(0, np.int64)
    arr = arr[(arr >= 0) & (arr < vocab_size)]
    return np.bincount(arr, minlength=vocab_size).astype(np.int64)


# a vocab mapping or a token-frequency table is a few MB at most
MAPPING_FILE_LIMIT = 256 << 20


def read_mapping_file(path: Path) -> Any:
    """A trainer's `vocab_mapping/*.pt` or `token_freq.pt`: bounded (size, then the archive's
    layout, io.torchfile), then `torch.load(weights_only=True)`, the one way the kit opens a
    pickle. torch is imported here only, when such a file is present."""
    if path.stat().st_size > MAPPING_FILE_LIMIT:
        raise UnsafeInputError(f"over {MAPPING_FILE_LIMIT >> 20} MiB", str(path),
                               "a vocab mapping or token-frequency file is far smaller")
    check_torch_file(path)
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a refused or damaged pickle raises many types
        raise UnsafeInputError(f"torch.load(weights_only=True) refused it ({type(exc).__name__})",
                               str(path), "pass the trainer's own vocab_mapping .pt or "
                               "token_freq.pt") from None


def kept_ids_of(path: Path, vocab_size: int, draft_vocab: int) -> np.ndarray:
    """The target ids a mapping file keeps: t2d of a {d2t, t2d} .pt, or the top ids of a
    token_freq.pt's counts by the trainers' rule."""
    obj = read_mapping_file(path)
    if isinstance(obj, dict) and hasattr(obj.get("t2d"), "numpy"):
        return np.flatnonzero(obj["t2d"].numpy().astype(bool))
    if isinstance(obj, dict) and all(isinstance(k, int) for k in obj):
        counts = np.zeros(vocab_size, np.int64)
        for k, v in obj.items():
            if 0 <= k < vocab_size:
                counts[k] = int(v)
        return build_from_counts(counts, draft_vocab, vocab_size).intended_ids
    return np.zeros(0, np.int64)


def overlap(kept: np.ndarray, counts: np.ndarray, draft_vocab: int) -> float | None:
    """Share of the k most frequent supervised ids (k = draft vocab, or fewer when fewer were
    seen) that the mapping keeps."""
    seen = int((counts > 0).sum())
    k = min(draft_vocab, seen)
    if k == 0:
        return None
    top = np.lexsort((np.arange(len(counts)), -counts))[:k]
    return float(np.isin(top, kept).sum()) / k


def mapping_rows(sources: dict[str, np.ndarray], counts: np.ndarray, draft_vocab: int,
                 ages: dict[str, float | None], data_mtime: float | None) -> list[dict[str, Any]]:
    rows = []
    for name, kept in sources.items():
        age = ages.get(name)
        rows.append({"source": name, "kept": int(len(kept)),
                     "top_overlap": overlap(kept, counts, draft_vocab),
                     "supervised_coverage": coverage(kept, counts),
                     "older_than_data_s": (data_mtime - age) if age and data_mtime else None})
    return rows


def stale_findings(rows: list[dict[str, Any]], rebuilt: float | None) -> list[Finding]:
    out = []
    for r in rows:
        ov, old = r["top_overlap"], r["older_than_data_s"]
        why = []
        if ov is not None and ov < STALE_OVERLAP:
            why.append(f"it keeps {ov:.0%} of the data's most frequent supervised ids and covers "
                       f"{r['supervised_coverage']:.1%} of supervised tokens (a mapping rebuilt "
                       f"from this data covers {rebuilt:.1%})")
        if old is not None and old > MTIME_SLACK_S:
            why.append(f"the file is {old / 3600:.1f} h older than the data (trainers reuse a "
                       "cached mapping without recounting)")
        if why:
            out.append(Finding("VOCAB_MAPPING_STALE", WARNING,
                               f"the vocab mapping {r['source']} looks built from other data: "
                               + "; ".join(why), {**r, "rebuilt_coverage": rebuilt}))
    return out


def mapping_sources(files, draft, vocab_size: int, draft_vocab: int
                    ) -> tuple[dict[str, np.ndarray], dict[str, float | None]]:
    """name -> kept ids, name -> mtime, for the data's mapping files and the draft's t2d."""
    sources, ages = {}, {}
    for p in files:
        sources[str(p)] = kept_ids_of(p, vocab_size, draft_vocab)
        ages[str(p)] = os.stat(p).st_mtime
    if draft is not None:
        kept = draft["mapping"].intended_ids
        if kept is not None:
            sources[draft["path"]] = kept
            ages[draft["path"]] = None  # a draft is trained after its data: no age test
    return sources, ages


def domain_findings(prompt_ids: list[list[int]], train_counts: np.ndarray,
                    kept: np.ndarray | None, vocab_size: int, where: str) -> tuple[
                        dict[str, Any], list[Finding]]:
    """Check 10: draft-vocab coverage and unseen share of serving prompts vs the training rows."""
    serve = np.zeros(vocab_size, np.int64)
    for ids in prompt_ids:
        arr = np.asarray([i for i in ids if 0 <= i < vocab_size], dtype=np.int64)
        serve += np.bincount(arr, minlength=vocab_size)
    total = int(serve.sum())
    unseen = float(serve[train_counts == 0].sum()) / total if total else None
    result = {"prompts": len(prompt_ids), "prompt_tokens": total, "unseen_in_training": unseen,
              "serving_coverage": coverage(kept, serve) if kept is not None else None,
              "training_coverage": coverage(kept, train_counts) if kept is not None else None}
    sc, tc = result["serving_coverage"], result["training_coverage"]
    if sc is not None and tc is not None and sc < tc - DOMAIN_GAP:
        return result, [Finding("TRAIN_DOMAIN_GAP", WARNING,
                                f"the draft vocab covers {sc:.1%} of the serving prompts' tokens "
                                f"({where}) against {tc:.1%} of the training rows': the prompts "
                                f"are of another domain; {unseen:.1%} of their tokens never "
                                "occur in training", result)]
    return result, [Finding("TRAIN_DOMAIN_GAP", INFO,
                            f"serving prompts ({where}): draft-vocab coverage "
                            f"{_pct(sc)} vs training {_pct(tc)}; {_pct(unseen)} of their tokens "
                            "never occur in training"
                            + ("" if kept is not None else " (no pruned draft vocab to "
                               "measure: --draft DRAFT gives the draft's own; a mapping file "
                               "beside the data need not be the one it was trained with)"),
                            result)]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _vocab_size(scan, drafted) -> int:
    if drafted is not None:
        return int(drafted["config"].vocab_size)
    if scan.tokenizer is not None:
        return int(scan.tokenizer.get_vocab_size(with_added_tokens=True))
    ids = scan.supervised_ids
    return (max(ids) + 1) if len(ids) else 1


def _prompt_ids(path, tokenizer) -> list[list[int]]:
    from eagle3_nb.io.training_data import iter_jsonl_texts

    return [tokenizer.encode(t, add_special_tokens=False).ids for t in iter_jsonl_texts(path)]


def vocab_checks(files, scan, drafted, prompts) -> tuple[dict[str, Any], list[Finding]]:
    """Checks 8 (mapping freshness) and 10 (domain, with serving prompts)."""
    from eagle3_nb.io.training_data import newest_mtime

    vocab = _vocab_size(scan, drafted)
    draft_vocab = int(drafted["config"].Vd) if drafted else None
    counts = counts_of(scan.supervised_ids, vocab)
    sources, ages = mapping_sources(files.mappings, drafted, vocab, draft_vocab or 0)
    if draft_vocab is None:
        draft_vocab = max((len(k) for k in sources.values()), default=0) or None
    rebuilt = build_from_counts(counts, draft_vocab, vocab).intended_ids if draft_vocab else None
    rebuilt_cov = coverage(rebuilt, counts) if rebuilt is not None else None
    rows = mapping_rows(sources, counts, draft_vocab or 0, ages,
                        newest_mtime(files.data_files()))
    out: dict[str, Any] = {"vocab_size": vocab, "draft_vocab_size": draft_vocab,
                           "distinct_supervised_ids": int((counts > 0).sum()),
                           "rebuilt_coverage": rebuilt_cov, "mappings": rows, "domain": None}
    findings = stale_findings(rows, rebuilt_cov)
    if prompts and scan.tokenizer is not None:
        # the draft's own vocab: a mapping file may not be the one the draft was trained with
        kept = sources.get(drafted["path"]) if drafted is not None else None
        scan.fold()
        seen = np.zeros(vocab, np.int64)
        n = min(vocab, len(scan.all_counts))
        seen[:n] = scan.all_counts[:n]
        out["domain"], more = domain_findings(_prompt_ids(prompts, scan.tokenizer), seen, kept,
                                              vocab, str(prompts))
        findings += more
    return out, findings
