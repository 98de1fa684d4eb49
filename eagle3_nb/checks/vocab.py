"""Notebook 02's question: is the vocabulary mapping right? d2t/t2d format with its evidence,
validity per engine, corpus coverage, and the summary.json digest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_nb.checks.result import JsonResult
from eagle3_nb.engines import resolve_engines
from eagle3_nb.findings import given, release_given, sort_findings
from eagle3_nb.io.checkpoint import open_once
from eagle3_nb.vocab import (VocabMapping, count_tokens, coverage, coverage_finding,
                             load_tokenizer, read_corpus)


@dataclass(frozen=True)
class VocabCheck(JsonResult):
    """The vocab answer of `eagle3-nb vocab` and notebook 02 (`data`, its JSON form), with the
    mapping it read, which notebook 02's figures and lookup show."""
    kind = "vocab"
    notebook = "02_d2t_mapping"
    mapping: VocabMapping

    def summary_body(self) -> dict[str, Any]:
        return vocab_digest(self.data)


def check_vocab(path: str | Path, tokenizer: str | Path | None = None,
                corpus: str | Path | None = None, engines: list[str] | None = None) -> VocabCheck:
    """The vocab answer for one checkpoint: format with evidence, validity per engine, coverage."""
    ckpt = open_once(path)
    cfg = ckpt.config
    profiles = resolve_engines(engines)
    mapping = VocabMapping.from_checkpoint(ckpt, cfg)
    tok = load_tokenizer(tokenizer) if tokenizer else None
    findings = mapping.findings()
    cov = None
    if corpus:
        seqs, masks = read_corpus(corpus, tok, cfg.vocab_size)
        counts = count_tokens(seqs, masks, cfg.vocab_size)
        cov = {"intended": coverage(mapping.intended_ids, counts),
               "as_engines_read_it": coverage(mapping.engine_ids(profiles[0]), counts),
               "n_tokens": int(counts.sum())}
        if mapping.readings:  # evidence for an ambiguous table: real text favours one reading
            cov["per_reading"] = {name: coverage(r.ids, counts)
                                  for name, r in mapping.readings.items()}
        findings += coverage_finding(cov["intended"] if cov["intended"] is not None
                                     else cov["as_engines_read_it"])
    offsets = mapping.readings.get("offsets")
    view = mapping.engine_view(profiles)
    data = {"checkpoint": str(ckpt.path), "format": mapping.format,
            "valid": mapping.valid(profiles), "draft_vocab_size": cfg.Vd,
            "target_vocab_size": cfg.vocab_size,
            "n_out_of_range": offsets.n_out_of_range if offsets else 0,
            "n_duplicates": offsets.n_duplicates if offsets else 0,
            "t2d_agrees": mapping.t2d_agrees, "evidence": mapping.evidence,
            "problems": mapping.problems,
            "engines": [{k: r[k] for k in ("engine", "version", "profile", "param", "n_wrong",
                                            "n_out_of_range")} for r in view],
            "coverage": cov, "findings": [f.to_json() for f in sort_findings(findings)],
            "tokenizer": str(tokenizer) if tokenizer else None,
            "had": vocab_evidence(tokenizer, corpus, engines)}
    return VocabCheck(data, mapping)


def vocab_evidence(tokenizer, corpus, engines: list[str] | None) -> dict[str, str]:
    """What could change the vocab answer (`had`; "evidence" is the d2t format's reasons): the
    tokenizer (token strings, a text corpus), the corpus (coverage), the releases (validity)."""
    return {"checkpoint": "given", "tokenizer": given(tokenizer, "--tokenizer"),
            "corpus": given(corpus, "--corpus"), "engine release": release_given(engines)}


def vocab_digest(data: dict[str, Any]) -> dict[str, Any]:
    """What notebook 02's summary.json part holds, from the vocab answer's JSON form: format,
    validity, evidence, findings, per-engine wrong / out-of-range counts, corpus coverage."""
    findings = data.get("findings", [])
    return {
        "checkpoint": data.get("checkpoint"),
        "format": data.get("format"),
        "valid": data.get("valid"),
        "draft_vocab_size": data.get("draft_vocab_size"),
        "target_vocab_size": data.get("target_vocab_size"),
        "n_out_of_range": data.get("n_out_of_range"),
        "n_duplicates": data.get("n_duplicates"),
        "t2d_agrees": data.get("t2d_agrees"),
        "evidence": list(data.get("evidence", [])),
        "problems": list(data.get("problems", [])),
        "codes": [f["code"] for f in findings],
        "n_errors": sum(f["severity"] == "error" for f in findings),
        "n_warnings": sum(f["severity"] == "warning" for f in findings),
        "findings": [{k: f.get(k) for k in ("code", "severity", "engine", "message", "evidence")}
                     for f in findings],
        "engines": {e["profile"]: {"param": e.get("param"), "n_wrong": e.get("n_wrong"),
                                   "n_out_of_range": e.get("n_out_of_range")}
                    for e in data.get("engines", [])},
        "coverage": data.get("coverage"),
        "tokenizer": data.get("tokenizer"),
        "had": data.get("had"),
    }
