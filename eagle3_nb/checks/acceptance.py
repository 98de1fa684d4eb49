"""Notebook 04's question in one call: how many drafted tokens does the target accept, under the
wiring the draft was trained with and under each engine's, and which of them reproduces what the
engine reported?

checkpoint + target dir (+ prompts, + the engine's figure) -> the chosen wiring's simulation with
every step, a second wiring to compare, the what-if ranking of every wiring, and findings.
With hidden-state dumps instead of a target there is no greedy verification: the draft is scored
teacher-forced against the recorded tokens, and labelled so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from eagle3_nb.acceptance import Drafting, score_dumps, simulate
from eagle3_nb.checks.drafting import (RunLimits, check_positions, count_setting,
                                       launch_settings, observed_of, refuse_unaffordable,
                                       run_drafting, served_by)
from eagle3_nb.checks.options import AcceptanceOptions
from eagle3_nb.checks.result import CheckResult
from eagle3_nb.checks.target_match import preflight
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import ERROR, WARNING, Finding, collapses, given
from eagle3_nb.io.resources import samples_dir
from eagle3_nb.model import as_engine_leaves
from eagle3_nb.session import NotInDump, Session, engines_with, read_prompts
from eagle3_nb.whatif import (at_floor, observed_accept_length, rank, rule_out, run_what_if,
                              what_if_json)
from eagle3_nb.wirings import Served


@dataclass
class AcceptanceCheck(CheckResult):
    """Notebook 04's answer: the simulations themselves (what its figures show) and, as JSON,
    their figures."""
    kind = "acceptance"
    notebook = "04_acceptance"

    checkpoint: str
    target: str | None
    num_steps: int
    max_new_tokens: int
    wiring: str
    result: Any = None                 # AcceptanceResult of `wiring`
    compare: Any = None                # AcceptanceResult of the wiring shown beside it
    rows: list = field(default_factory=list)   # ranked WhatIfRows
    observed: Any = None               # ObservedMetrics
    teacher_forced: list[dict] = field(default_factory=list)  # dumps only
    findings: list[Finding] = field(default_factory=list)
    decode: Callable[[int], str] | None = None
    drafting: Drafting | None = None
    n_samples: int | None = None
    evidence: str = ""                 # which engine evidence decided the wirings simulated
    had: dict[str, str] = field(default_factory=dict)  # acceptance_evidence
    threads: str = ""                  # torch's threads and why (session.choose_threads)

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "target": self.target,
                "num_steps": self.num_steps, "max_new_tokens": self.max_new_tokens,
                "drafting": self.drafting.to_json() if self.drafting else None,
                "n_samples": self.n_samples, "settings": self.settings_line(),
                "evidence": self.evidence, "had": self.had,
                "wiring": self.wiring,
                "headline": self.result.stats() if self.result else None,
                "compare": self.compare.stats() if self.compare else None,
                "what_if": what_if_json(self.rows, self.observed) if self.rows else None,
                "observed": self.observed.to_dict() if self.observed else None,
                "teacher_forced": self.teacher_forced or None,
                "findings": [f.to_json() for f in self.findings]}

    def settings_line(self) -> str:
        """What every figure of this check was measured on."""
        drafting = self.drafting or Drafting(self.num_steps, source="parameters")
        sample = f"{self.n_samples} prompts" if self.n_samples else "every prompt"
        line = (f"{drafting.label()} ({drafting.source}), {sample}, {self.max_new_tokens} new "
                f"tokens each, {drafting.to_json()['verification']} verification")
        return f"{line}; {self.threads}" if self.threads else line


def check_acceptance(checkpoint: str | Path, target: str | Path | None = None,
                     prompts: str | Path | None = None,
                     options: AcceptanceOptions | None = None) -> AcceptanceCheck:
    """Notebook 04's answer for CHECKPOINT against TARGET on PROMPTS (or, with
    options.hidden_states, teacher-forced on the engine's dumps)."""
    options = options or AcceptanceOptions()
    if not target and not options.hidden_states:
        raise Eagle3NbError("no target and no hidden-state dumps", "target / hidden_states",
                            "give the target model directory (or the engine's dumps)")
    preflight(checkpoint, target)
    obs = observed_of(options)
    drafting = run_drafting(checkpoint, target, options, obs, options.engines)
    engines, evidence, release = evidence_engines(
        options.engines, launch_settings(options.launch), obs if options.what_if else None)
    check = AcceptanceCheck(str(checkpoint), str(target) if target else None,
                            drafting.num_steps, options.max_new_tokens, options.wiring,
                            observed=obs, drafting=drafting, n_samples=options.n_samples,
                            evidence=evidence,
                            had=acceptance_evidence(target, prompts, options, release))
    compare = options.compare
    if options.engines and compare is None and len(engines) == 1:
        from eagle3_nb.engines import resolve_engine

        key = resolve_engine(engines[0]).key  # the wiring of the release the user named,
        compare = key if key != options.wiring else None  # shown beside the trained figure
    if options.hidden_states:  # the target, if given, only lends its embeddings
        check.teacher_forced = score_on_dumps(
            checkpoint, options.hidden_states, drafting.num_steps,
            None if options.what_if else [options.wiring], options.n_samples, options.device,
            target, engines, served=served_by(options.launch))
        return check
    _simulate_wirings(check, target, prompts, compare, options, engines)
    check.findings = acceptance_findings(check.rows, obs)
    return check


def _simulate_wirings(check, target, prompts, compare, options: AcceptanceOptions, engines):
    draft, tgt, presets = Session.current(options.device).load_for_run(
        check.checkpoint, target, engines_with(engines, check.wiring, compare),
        served_by(options.launch))
    for name in (check.wiring, compare):
        if name and name not in presets:
            raise Eagle3NbError(f"unknown wiring {name!r}", "wiring", f"one of: {', '.join(presets)}")
    chosen = presets if options.what_if else \
        {n: presets[n] for n in {check.wiring, compare} if n}
    check.threads = tgt.threads.label()
    samples = read_prompts(prompts, tgt, options.n_samples)
    check_positions(samples, check.max_new_tokens, check.drafting, draft.cfg)
    rows = run_what_if(draft, tgt, samples, chosen, max_new_tokens=check.max_new_tokens,
                       batch_size=options.batch_size, drafting=check.drafting)
    by_name = {r.wiring.name: r for r in rows}
    if by_name[check.wiring].result is None:
        raise Eagle3NbError(f"wiring {check.wiring} cannot run: {by_name[check.wiring].error}",
                            "wiring", "pick another (eagle3-nb accept --list-wirings)")
    check.result = by_name[check.wiring].result
    compare = compare or _most_different(rows, check.wiring)
    check.compare = by_name[compare].result if compare else None
    rule_out(rows, *_d2t_evidence(check.checkpoint))
    check.rows = rank(rows, check.observed) if options.what_if else []
    check.decode = _decoder(tgt)


def _most_different(rows, wiring: str) -> str | None:
    """The engine wiring whose accept length is furthest from the chosen one (what to look at
    side by side when nothing was asked for)."""
    base = next(r for r in rows if r.wiring.name == wiring).mean_accept_length
    engines = [r for r in rows if r.result and r.wiring.engine and r.wiring.name != wiring]
    if not engines:
        return None
    far = max(engines, key=lambda r: abs(r.mean_accept_length - base))
    return far.wiring.name if abs(far.mean_accept_length - base) > 0 else None


def _decoder(target) -> Callable[[int], str] | None:
    if target.tokenizer is None:
        return None
    return lambda token_id: target.tokenizer.decode([int(token_id)], skip_special_tokens=False)


def acceptance_findings(rows, observed=None) -> list[Finding]:
    """Findings from the what-if rows: the draft at its floor as trained, engine wirings that
    collapse it, and an observed figure the trained wiring does not explain."""
    by_name = {r.wiring.name: r for r in rows}
    trained = by_name.get("trained")
    if not trained or not trained.result:
        return []
    out = []
    if at_floor(trained, by_name.get("embeddings_only")):
        out.append(Finding("ACCEPT_AT_FLOOR", ERROR,
                           f"as trained the draft's simulated accept length is "
                           f"{trained.mean_accept_length:.2f}, no better than with no target "
                           f"state ({by_name['embeddings_only'].mean_accept_length:.2f})",
                           {"trained": trained.mean_accept_length}))
    else:
        out += _collapses(rows, trained)
    target = observed_accept_length(observed)
    if target is not None and trained.consistent is False:
        explaining = [r.wiring.name for r in rows if r.consistent]
        out.append(Finding("ACCEPT_MISMATCH", ERROR if target < trained.mean_accept_length else WARNING,
                           f"the engine reported {target:.2f}, the draft as trained simulates "
                           f"{trained.mean_accept_length:.2f}; consistent with: "
                           f"{', '.join(explaining) or 'no simulated wiring'}",
                           {"observed": target, "trained": trained.mean_accept_length,
                            "consistent": explaining}))
    return out


def _collapses(rows, trained) -> list[Finding]:
    gain = trained.mean_accept_length - 1
    out = []
    for r in rows:
        if not r.wiring.engine:
            continue
        if r.result is None:
            continue  # an engine that refuses the draft is notebook 01's LOAD_ERROR
        if collapses(r.mean_accept_length - 1, gain):
            out.append(Finding("ACCEPT_COLLAPSES", ERROR,
                               f"served as the engine would, the simulated accept length is "
                               f"{r.mean_accept_length:.2f} against {trained.mean_accept_length:.2f} "
                               f"as trained{_resets(r.wiring)}",
                               {"served": r.mean_accept_length,
                                "trained": trained.mean_accept_length}, engine=r.wiring.name))
    return out


def _resets(wiring) -> str:
    n = len(wiring.reset_params)
    return f" ({n} draft parameter(s) left at their initial values)" if n else ""


@torch.no_grad()
def score_on_dumps(checkpoint: str | Path, hidden_states: str | Path, num_steps: int = 4,
                   wirings: list[str] | None = None, n_samples: int | None = None,
                   device: str | None = None, target: str | Path | None = None,
                   engines: list[str] | None = None, dump_layer_ids=None,
                   served: Served = Served()) -> list[dict[str, Any]]:
    """Teacher-forced per-step accuracy (acceptance.score_dumps) under each named wiring, the
    engine's unloaded parameters reset as in a live run; default: trained, single_layer and
    every engine (as SERVED says it is served). A wiring the engine refuses or the dump cannot
    feed is a row with `error` or `unmeasured` instead of numbers."""
    preflight(checkpoint, target)
    num_steps = count_setting(num_steps, "num_steps", "num_steps (--num-steps)")
    refuse_unaffordable(num_steps, 1, None, "num_steps (--num-steps)", RunLimits())
    run = Session.current(device).load_dumps(checkpoint, hidden_states,
                                             engines_with(engines, *(wirings or [])), n_samples,
                                             target, dump_layer_ids, served)
    names = wirings or ["trained", "single_layer", *(p.key for p in run.profiles)]
    unknown = [n for n in names if n not in run.presets]
    if unknown:
        raise Eagle3NbError(f"unknown wiring(s) {unknown}", "wiring",
                            f"one of: {', '.join(run.presets)}")
    rows = []
    for name in names:
        wiring = run.presets[name]
        try:
            if wiring.engine_error:
                raise Eagle3NbError(f"{name} does not serve this draft: {wiring.engine_error}")
            rows.append(score_dumps(as_engine_leaves(run.draft, wiring), run.samples,
                                    run.features(wiring), num_steps, wiring))
        except NotInDump as exc:
            rows.append({"wiring": name, "unmeasured": f"{exc.what}: needs a live target"})
        except Eagle3NbError as exc:
            rows.append({"wiring": name, "error": exc.one_line()})
    return rows


def measure_acceptance(checkpoint: str | Path, target: str | Path, prompts: str | Path,
                       options: AcceptanceOptions | None = None):
    """Simulated speculative decoding (a chain, or SGLang's tree at topk > 1) of the prompts
    under the one wiring options.wiring; the engines and the observed figure of OPTIONS play
    no part."""
    options = options or AcceptanceOptions()
    preflight(checkpoint, target)
    drafting = run_drafting(checkpoint, target, options)
    draft, tgt, presets = Session.current(options.device).load_for_run(
        checkpoint, target, engines_with(None, options.wiring))
    if options.wiring not in presets:
        raise Eagle3NbError(f"unknown wiring {options.wiring!r}", "--wiring",
                            f"one of: {', '.join(presets)}")
    samples = read_prompts(prompts, tgt, options.n_samples)
    check_positions(samples, options.max_new_tokens, drafting, draft.cfg)
    result = simulate(draft, tgt, samples, max_new_tokens=options.max_new_tokens,
                      wiring=presets[options.wiring], stop_at_eos=options.stop_at_eos,
                      batch_size=options.batch_size, drafting=drafting, seed=options.seed)
    result.threads = tgt.threads.label()
    return result


def what_if(checkpoint: str | Path, target: str | Path, prompts: str | Path,
            options: AcceptanceOptions | None = None,
            wirings: list[str] | None = None) -> dict[str, Any]:
    """Every named wiring (or the given WIRINGS) simulated on the prompts and ranked against
    what the engine reported (options.observed: a number, a log, metrics text, SGLang JSON, or
    None), with the drafting settings the engine ran where its launch command or log states
    them."""
    options = options or AcceptanceOptions()
    preflight(checkpoint, target)
    obs = observed_of(options)
    drafting = run_drafting(checkpoint, target, options, obs, options.engines)
    engines, evidence, release = evidence_engines(options.engines,
                                                  launch_settings(options.launch), obs)
    draft, tgt, presets = Session.current(options.device).load_for_run(
        checkpoint, target, engines_with(engines, *(wirings or [])),
        served_by(options.launch))
    unknown = [w for w in wirings or [] if w not in presets]
    if unknown:
        raise Eagle3NbError(f"unknown wiring(s) {unknown}", "wirings", f"one of: {', '.join(presets)}")
    chosen = {w: presets[w] for w in wirings} if wirings else presets
    samples = read_prompts(prompts, tgt, options.n_samples)
    check_positions(samples, options.max_new_tokens, drafting, draft.cfg)
    rows = run_what_if(draft, tgt, samples, chosen, max_new_tokens=options.max_new_tokens,
                       batch_size=options.batch_size, drafting=drafting)
    rule_out(rows, *_d2t_evidence(checkpoint))
    rows = rank(rows, obs)
    return {"checkpoint": str(checkpoint), "num_steps": drafting.num_steps,
            "drafting": drafting.to_json(), "n_samples": options.n_samples,
            "max_new_tokens": options.max_new_tokens, "evidence": evidence,
            "had": acceptance_evidence(target, prompts, options, release),
            "threads": tgt.threads.label(), **what_if_json(rows, obs)}


def evidence_engines(engines: list[str] | None, launch, observed
                     ) -> tuple[list[str] | None, str, str]:
    """The engine releases whose wirings a run simulates, the line that says why, and the
    "engine release" entry of the evidence line (findings.evidence_line).

    A named release (--engine) decides. Else a release the observed figure states. Else, with
    an observed figure to explain, every release range of the engine it names (of every engine
    when it names none): the wirings are cheap, most ranges share one. Without an observed
    figure, each engine's newest releases."""
    from eagle3_nb.engines import engine as registered, engines as registered_all, resolve_engines

    if engines:
        return engines, f"engine release: {', '.join(engines)} (--engine)", "named (--engine)"
    name = getattr(observed, "engine", None) or getattr(launch, "engine", None)
    name = name if name in registered_all() else None
    version = getattr(observed, "version_detected", None)
    if name and version and version[0].isdigit():
        return ([f"{name}=={version}"], f"engine release: {name} {version} (the observed figure)",
                f"{name} {version}, from the observed figure")
    if observed is None:
        return None, ("engine release: not given, each engine's newest releases simulated "
                      "(--engine NAME==VERSION, --launch or --observed with the engine's log "
                      "decide it)"), "not given, each engine's newest releases simulated (--engine)"
    ranges = [p.key for p in (registered(name).profiles if name else resolve_engines(["all"]))]
    who = registered(name).title if name else "every engine"
    return ranges, (f"your engine release is not known; these are the wirings that match: "
                    f"{who}'s every release range (pass --engine NAME==VERSION to decide)"), \
        f"not known, {who}'s every release range simulated (--engine)"


def acceptance_evidence(target, prompts, options: AcceptanceOptions, release: str | None = None
                        ) -> dict[str, str]:
    """What could change notebook 04's and `accept`'s answer, and the flag of each missing
    piece: the target run live (or only the engine's dumps), the prompts, the engine release
    (RELEASE: evidence_engines' entry; None: as a run without an observed figure says), the
    launch command and the engine's own figure."""
    if release is None:
        release = evidence_engines(options.engines, None, None)[2]
    bundled = Path(prompts or "").resolve() == (samples_dir() / "prompts.jsonl").resolve()
    had = {"checkpoint": "given",
           "target weights": "given (run live)" if target else
           "not given, teacher-forced on the dumps only (--target)"}
    if options.hidden_states:
        had["hidden-state dumps"] = "given"
    else:
        had["prompts"] = ("not given, the bundled ones simulated (--prompts)"
                         if bundled or not prompts else "given")
    return {**had, "engine release": release,
            "launch command": given(options.launch, "--launch",
                                    "not given, the drafting settings defaulted"),
            "observed figure": given(options.observed, "--observed")}


def _d2t_evidence(checkpoint: str | Path) -> tuple[str | None, bool]:
    """(d2t format, valid) read from the checkpoint itself (eagle3-nb vocab's answer)."""
    from eagle3_nb.io.checkpoint import open_once
    from eagle3_nb.vocab import VocabMapping

    ckpt = open_once(checkpoint)
    mapping = VocabMapping.from_checkpoint(ckpt, ckpt.config)
    return mapping.format, not mapping.problems
