"""Notebook 04's question in one call: how many drafted tokens does the target accept, under the
wiring the draft was trained with and under each engine's, and which of them reproduces what the
engine reported?

checkpoint + target dir (+ prompts, + the engine's figure) -> the chosen wiring's simulation with
every step, a second wiring to compare, the what-if ranking of every wiring, and findings.
With hidden-state dumps instead of a target there is no greedy verification: the draft is scored
teacher-forced against the recorded tokens, and labelled so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import torch

from eagle3_nb.acceptance import Drafting, score_dumps, simulate
from eagle3_nb.checks.target_match import preflight
from eagle3_nb.config import SETTINGS_ENGINES_RUN, drafting_problem, parse_config
from eagle3_nb.defaults import (DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS, DEFAULT_N_SAMPLES,
                                DEFAULT_NUM_STEPS)
from eagle3_nb.engines.registry import engines as registered_engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import ERROR, WARNING, Finding, collapses, summary_part
from eagle3_nb.model import as_engine_leaves
from eagle3_nb.observed.metrics import parse_observed
from eagle3_nb.session import NotInDump, engines_with, load_dump_run, load_for_run, read_prompts
from eagle3_nb.whatif import (at_floor, observed_accept_length, rank, rule_out, run_what_if,
                              what_if_json)


@dataclass
class AcceptanceCheck:
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
    threads: str = ""                  # torch's threads and why (session.choose_threads)

    def summary(self, notebook: str = "04_acceptance") -> dict[str, Any]:
        return summary_part("acceptance", notebook, {
                "checkpoint": self.checkpoint, "target": self.target,
                "num_steps": self.num_steps, "max_new_tokens": self.max_new_tokens,
                "drafting": self.drafting.to_json() if self.drafting else None,
                "n_samples": self.n_samples, "settings": self.settings_line(),
                "evidence": self.evidence,
                "wiring": self.wiring,
                "headline": self.result.stats() if self.result else None,
                "compare": self.compare.stats() if self.compare else None,
                "what_if": what_if_json(self.rows, self.observed) if self.rows else None,
                "observed": self.observed.to_dict() if self.observed else None,
                "teacher_forced": self.teacher_forced or None,
                "findings": [f.to_json() for f in self.findings]})

    def settings_line(self) -> str:
        """What every figure of this check was measured on."""
        drafting = self.drafting or Drafting(self.num_steps, source="parameters")
        sample = f"{self.n_samples} prompts" if self.n_samples else "every prompt"
        line = (f"{drafting.label()} ({drafting.source}), {sample}, {self.max_new_tokens} new "
                f"tokens each, {drafting.to_json()['verification']} verification")
        return f"{line}; {self.threads}" if self.threads else line


def check_acceptance(checkpoint: str | Path, target: str | Path | None = None,
                     prompts: str | Path | None = None, *,
                     hidden_states: str | Path | None = None, wiring: str = "trained", compare: str | None = None,
                     num_steps: int | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                     n_samples: int | None = DEFAULT_N_SAMPLES, observed=None,
                     what_if: bool = True, engines: list[str] | None = None,
                     device: str | None = None, batch_size: int = 8, topk: int | None = None,
                     num_draft_tokens: int | None = None, launch=None,
                     temperature: float = 0.0) -> AcceptanceCheck:
    """num_steps, topk, num_draft_tokens: the drafting settings; unset ones come from the
    launch command (a LaunchSettings or its text), else from the observed figure's source,
    else from the kit's defaults (a chain of 4), see resolve_drafting."""
    if not target and not hidden_states:
        raise Eagle3NbError("no target and no hidden-state dumps", "target / hidden_states",
                            "give the target model directory (or the engine's dumps)")
    preflight(checkpoint, target)
    obs = parse_observed(observed) if observed not in (None, "") else None
    drafting = resolve_drafting(num_steps, topk, num_draft_tokens, _launch(launch), obs,
                                _architecture(target), engines, temperature,
                                limits=run_limits(checkpoint, batch_size, max_new_tokens))
    named = bool(engines)
    engines, evidence = evidence_engines(engines, _launch(launch), obs if what_if else None)
    check = AcceptanceCheck(str(checkpoint), str(target) if target else None,
                            drafting.num_steps, max_new_tokens, wiring, observed=obs,
                            drafting=drafting, n_samples=n_samples, evidence=evidence)
    if named and compare is None and len(engines) == 1:
        from eagle3_nb.engines import resolve_engine

        key = resolve_engine(engines[0]).key  # the wiring of the release the user named,
        compare = key if key != wiring else None  # shown beside the trained figure
    if hidden_states:  # the target, if given, only lends its embeddings (as engines share them)
        check.teacher_forced = score_on_dumps(checkpoint, hidden_states, drafting.num_steps,
                                              None if what_if else [wiring], n_samples, device,
                                              target, engines)
        return check
    _simulate_wirings(check, target, prompts, compare, n_samples, what_if, engines, device,
                      batch_size)
    check.findings = acceptance_findings(check.rows, obs)
    return check


def _simulate_wirings(check, target, prompts, compare, n_samples, what_if, engines, device,
                      batch_size):
    draft, tgt, presets = load_for_run(check.checkpoint, target,
                                       engines_with(engines, check.wiring, compare), device)
    for name in (check.wiring, compare):
        if name and name not in presets:
            raise Eagle3NbError(f"unknown wiring {name!r}", "wiring", f"one of: {', '.join(presets)}")
    chosen = presets if what_if else {n: presets[n] for n in {check.wiring, compare} if n}
    check.threads = tgt.threads.label()
    samples = read_prompts(prompts, tgt, n_samples)
    check_positions(samples, check.max_new_tokens, check.drafting, draft.cfg)
    rows = run_what_if(draft, tgt, samples, chosen, max_new_tokens=check.max_new_tokens,
                       batch_size=batch_size, drafting=check.drafting)
    by_name = {r.wiring.name: r for r in rows}
    if by_name[check.wiring].result is None:
        raise Eagle3NbError(f"wiring {check.wiring} cannot run: {by_name[check.wiring].error}",
                            "wiring", "pick another (eagle3-nb accept --list-wirings)")
    check.result = by_name[check.wiring].result
    compare = compare or _most_different(rows, check.wiring)
    check.compare = by_name[compare].result if compare else None
    rule_out(rows, *_d2t_evidence(check.checkpoint))
    check.rows = rank(rows, check.observed) if what_if else []
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


def _architecture(target) -> str | None:
    """The target config's architectures[0] (what SGLang picks its drafting defaults by)."""
    if not target:
        return None
    from eagle3_nb.io.checkpoint import load_target_info
    try:
        archs = load_target_info(target).architectures
    except Eagle3NbError:
        return None
    return archs[0] if archs else None


def _launch(launch):
    if launch in (None, ""):
        return None
    if isinstance(launch, str):
        from eagle3_nb.engines.launch import read_launch
        return read_launch(launch)
    return launch


@dataclass(frozen=True)
class RunLimits:
    """What bounds the drafting settings of one run: its batch and length, and the draft's
    max_position_embeddings and vocabulary when its config.json is at hand."""
    batch_size: int = DEFAULT_BATCH_SIZE
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    max_positions: int | None = None
    draft_vocab: int | None = None


def run_limits(checkpoint, batch_size: int = DEFAULT_BATCH_SIZE,
               max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> RunLimits:
    """The limits of a run on CHECKPOINT, read from its config.json only (no weights); a
    config that cannot be read here is refused later, by the load, with its own message."""
    from eagle3_nb.io.checkpoint import read_json

    try:
        cfg = parse_config(read_json(Path(checkpoint).resolve(), "config.json"))
    except (Eagle3NbError, OSError, TypeError):
        cfg = None
    return RunLimits(batch_size, max_new_tokens,
                     cfg.max_position_embeddings.value if cfg else None, cfg.Vd if cfg else None)


PARAMETERS = "num_steps / topk / num_draft_tokens (--num-steps, --topk, --num-draft-tokens)"


def resolve_drafting(num_steps: int | None = None, topk: int | None = None,
                     num_draft_tokens: int | None = None, launch=None, observed=None,
                     architecture: str | None = None, engines: list[str] | None = None,
                     temperature: float = 0.0, limits: RunLimits | None = None) -> Drafting:
    """The drafting settings a simulation copies, from the first source that states them: the
    parameters, the running server's own arguments (an `observe` JSON), the launch command
    (SGLang --speculative-num-steps / -eagle-topk / -num-draft-tokens, vLLM
    num_speculative_tokens), the engine's own default for this target (`architecture`, the
    target's architectures[0]) where the launch command or the observed figure names the engine
    but not the settings (engines/drafting.py, read per release), the draft positions the
    engine's log reports, else the kit's defaults. Parameters that contradict what the engine
    says it ran are refused: a simulation of other settings does not explain its figure.
    Settings the run cannot afford (config.drafting_problem, under LIMITS) are refused before
    anything runs, naming where they came from."""
    limits = limits or RunLimits()
    temperature = _temperature(temperature)
    asked_values = [_count(v, name, PARAMETERS, allow_unset=True) for v, name in
                    ((num_steps, "num_steps"), (topk, "topk"),
                     (num_draft_tokens, "num_draft_tokens"))]
    stated, where = _stated_by_engine(launch, observed,
                                      _engine_default(launch, observed, architecture, engines),
                                      limits)
    if any(asked_values):
        _bounded(*(v or 1 for v in asked_values[:2]), asked_values[2], PARAMETERS, limits)
        asked = _asked(*asked_values, stated)
        if stated and _shape(asked) != _shape(stated):
            raise Eagle3NbError(f"the parameters ask for a {asked.label()}, but {stated.source} "
                                f"states a {stated.label()}", "num_steps / topk / num_draft_tokens",
                                "drop the parameters to simulate what the engine ran, or compare "
                                "with a figure measured with the same settings")
        stated, where = asked, PARAMETERS
    drafting = replace(stated or Drafting(), temperature=temperature)
    _bounded(*_shape(drafting), where, limits)
    return drafting


def _temperature(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        raise Eagle3NbError(f"temperature {str(value)[:40]} is not a finite number >= 0",
                            "temperature (--temperature)",
                            "0 for greedy verification, or the engine's sampling temperature")
    return float(value)


def _count(value, name: str, where: str, allow_unset: bool = False) -> int | None:
    """A drafting count as a whole number >= 1 (an integral float from JSON too); None or 0 is
    unset where ALLOW_UNSET."""
    if allow_unset and value in (None, 0) and not isinstance(value, bool):
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)
                                       and value.is_integer())
    if isinstance(value, bool) or not whole or value < 1:
        raise Eagle3NbError(f"{name} is {str(value)[:40]}: not a whole number >= 1", where,
                            "give the count the engine was launched with")
    return int(value)


def _bounded(num_steps: int, topk: int, num_draft_tokens: int | None, where: str,
             limits: RunLimits) -> None:
    problem = drafting_problem(num_steps, topk, num_draft_tokens,
                               batch_size=limits.batch_size, max_new_tokens=limits.max_new_tokens,
                               max_positions=limits.max_positions, draft_vocab=limits.draft_vocab)
    if problem:
        raise Eagle3NbError(f"cannot simulate these drafting settings: {problem}", where,
                            _bounded_fix(where))


def _bounded_fix(where: str) -> str:
    if where == PARAMETERS:
        return f"{SETTINGS_ENGINES_RUN}, or lower --batch-size / --max-new-tokens"
    return ("check that this is what the engine really ran (its own log or server info); "
            "lower --batch-size / --max-new-tokens, or give smaller settings yourself and leave "
            "this source out")


def check_positions(samples, max_new_tokens: int, drafting: Drafting, cfg) -> None:
    """The draft never runs past its max_position_embeddings: the longest prompt, the new
    tokens and a last verify step's draft steps must fit (SGLang refuses a served context
    longer than the draft's unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set)."""
    limit = cfg.max_position_embeddings.value if cfg is not None else None
    longest = max((len(s) for s in samples), default=0)
    reach = longest + max_new_tokens + drafting.num_steps
    if limit and reach > limit:
        raise Eagle3NbError(f"the longest prompt ({longest} tokens), {max_new_tokens} new tokens "
                            f"and {drafting.num_steps} draft steps reach position {reach}, past "
                            f"the draft's max_position_embeddings {limit}", "prompts / "
                            "max_new_tokens (--prompts, --max-new-tokens)",
                            "use shorter prompts or fewer new tokens (the engine serves this "
                            "draft no longer context either)")


def _asked(num_steps, topk, num_draft_tokens, stated: Drafting | None) -> Drafting:
    """The parameters given, the rest as the engine stated them (or the kit's defaults)."""
    base = stated or Drafting()
    topk = topk or base.topk
    tokens = num_draft_tokens or (base.num_draft_tokens if stated and topk == base.topk else None)
    return Drafting(num_steps or base.num_steps, topk, tokens, "parameters")


def _shape(d: Drafting) -> tuple[int, int, int | None]:
    return d.num_steps, d.topk, d.num_draft_tokens


def _stated_by_engine(launch, observed, default: Drafting | None,
                      limits: RunLimits) -> tuple[Drafting | None, str]:
    """What the engine says it drafted, and where it says so (the flag or file to name when it
    cannot be simulated); each value is checked before a Drafting is built of it."""
    server = (getattr(observed, "details", None) or {}).get("settings") or {}
    if not isinstance(server, dict):
        raise Eagle3NbError("details.settings is not an object", f"--observed {observed.source}",
                            "pass the file eagle3-nb observe --out wrote, unedited")
    if server.get("num_steps"):          # the running server's own arguments (eagle3-nb observe)
        where = (f"--observed: the server's own arguments (details.settings) of "
                 f"{observed.source}")
        steps, topk, tokens = (_count(server.get(k), k, where, allow_unset=k != "num_steps")
                               for k in ("num_steps", "topk", "num_draft_tokens"))
        _bounded(steps, topk or 1, tokens, where, limits)
        return Drafting(steps, topk or 1, tokens,
                        f"the server's own arguments ({observed.source})"), where
    if launch is not None and getattr(launch, "refuses_simulation", ""):
        raise Eagle3NbError(f"cannot simulate this serving config: {launch.refuses_simulation}",
                            _launch_where(launch), "simulate a chain instead (give --num-steps "
                            "without --launch), or serve a chain to compare with")
    if launch is not None and (launch.num_steps or launch.topk or launch.num_draft_tokens):
        where = _launch_where(launch)
        steps, topk, tokens = (_count(getattr(launch, k), k, where, allow_unset=True)
                               for k in ("num_steps", "topk", "num_draft_tokens"))
        topk = topk or 1
        steps = steps or (tokens - 1 if tokens and topk == 1 else DEFAULT_NUM_STEPS)
        _bounded(steps, topk, tokens, where, limits)
        return Drafting(steps, topk, tokens, f"the launch command ({launch.engine})"), where
    drafts = getattr(observed, "draft_tokens_per_step", None)
    if drafts:
        where = f"--observed {observed.source} (its draft tokens per verify step)"
        drafts = _count(drafts, "draft_tokens_per_step", where)
        _bounded(drafts, 1, None, where, limits)
    if drafts and default and default.num_draft_tokens == drafts + 1:
        return replace(default, source=f"{default.source}, which verifies the {drafts} draft "
                                       f"tokens per step the observed figure reports"), where
    if drafts:
        return Drafting(drafts, 1, None, f"the observed figure ({observed.source}: {drafts} draft "
                        "tokens per verify step, read as a chain; give --launch if the engine "
                        "drafted a tree)"), where
    return default, default.source if default else "the kit's defaults"


def _launch_where(launch) -> str:
    """--launch and the engine's own flag names for the drafting settings."""
    dialect = registered_engines()[launch.engine].launch if launch.engine in \
        registered_engines() else None
    names = [(dialect.setting_names or {}).get(k) for k in ("num_steps", "topk",
                                                            "num_draft_tokens")] if dialect else []
    flags = ", ".join(n for n in names if n)
    return f"--launch ({flags})" if flags else "--launch"


def _engine_default(launch, observed, architecture: str | None,
                    engines: list[str] | None) -> Drafting | None:
    """The engine's own choice when the launch command or the observed figure names the engine
    but no drafting flag: SGLang picks by target architecture; vLLM has no default."""
    from eagle3_nb.engines.drafting import default_drafting
    engine = (launch.engine if launch is not None else getattr(observed, "engine", None)) or ""
    engine = engine.lower()
    if engine not in registered_engines() or registered_engines()[engine].drafting_rule is None:
        return None
    version = _engine_version(engine, engines, getattr(observed, "version_detected", None))
    try:
        found = default_drafting(engine, version, architecture)
    except ValueError:
        return None
    if not found.num_draft_tokens or not found.num_steps:
        return None
    target = architecture or "a target of unknown architecture"
    return Drafting(found.num_steps, found.topk or 1, found.num_draft_tokens,
                    f"{engine} {found.release}'s default for {target} ({found.source})")


def _engine_version(engine: str, engines: list[str] | None, detected: str | None) -> str:
    """The release named for this engine (--engine NAME==VERSION), else the one the observed
    figure reveals, else the newest surveyed."""
    from eagle3_nb.engines import engine as registered, split_spec
    named = [version for name, version in map(split_spec, engines or [])
             if name == engine and version]
    if named:
        return named[-1]
    if detected and detected[0].isdigit():
        return detected
    return registered(engine).newest


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
                   engines: list[str] | None = None, dump_layer_ids=None) -> list[dict[str, Any]]:
    """Teacher-forced per-step accuracy (acceptance.score_dumps) under each named wiring, the
    engine's unloaded parameters reset as in a live run; default: trained, single_layer and
    every engine. A wiring the engine refuses or the dump cannot feed is a row with `error` or
    `unmeasured` instead of numbers."""
    preflight(checkpoint, target)
    num_steps = _count(num_steps, "num_steps", "num_steps (--num-steps)")
    _bounded(num_steps, 1, None, "num_steps (--num-steps)", RunLimits())
    run = load_dump_run(checkpoint, hidden_states, engines_with(engines, *(wirings or [])),
                        n_samples, device, target, dump_layer_ids)
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
                       wiring: str = "trained", num_steps: int | None = None,
                       max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                       n_samples: int | None = DEFAULT_N_SAMPLES, device: str | None = None,
                       stop_at_eos: bool = False, batch_size: int = 8, topk: int | None = None,
                       num_draft_tokens: int | None = None, launch=None,
                       temperature: float = 0.0, seed: int = 0):
    """Simulated speculative decoding (a chain, or SGLang's tree at topk > 1) of the prompts
    under one named wiring."""
    preflight(checkpoint, target)
    drafting = resolve_drafting(num_steps, topk, num_draft_tokens, _launch(launch),
                                architecture=_architecture(target), temperature=temperature,
                                limits=run_limits(checkpoint, batch_size, max_new_tokens))
    draft, tgt, presets = load_for_run(checkpoint, target, engines_with(None, wiring), device)
    if wiring not in presets:
        raise Eagle3NbError(f"unknown wiring {wiring!r}", "--wiring",
                            f"one of: {', '.join(presets)}")
    samples = read_prompts(prompts, tgt, n_samples)
    check_positions(samples, max_new_tokens, drafting, draft.cfg)
    result = simulate(draft, tgt, samples, max_new_tokens=max_new_tokens, wiring=presets[wiring],
                      stop_at_eos=stop_at_eos, batch_size=batch_size, drafting=drafting,
                      seed=seed)
    result.threads = tgt.threads.label()
    return result


def what_if(checkpoint: str | Path, target: str | Path, prompts: str | Path, observed=None,
            num_steps: int | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
            n_samples: int | None = DEFAULT_N_SAMPLES, device: str | None = None,
            wirings: list[str] | None = None, batch_size: int = 8,
            engines: list[str] | None = None, topk: int | None = None,
            num_draft_tokens: int | None = None, launch=None,
            temperature: float = 0.0) -> dict[str, Any]:
    """Every named wiring (or the given ones) simulated on the prompts and ranked against what
    the engine reported (a number, a log, metrics text, SGLang JSON, or None), with the
    drafting settings the engine ran where its launch command or log states them."""
    preflight(checkpoint, target)
    obs = parse_observed(observed) if observed is not None else None
    drafting = resolve_drafting(num_steps, topk, num_draft_tokens, _launch(launch), obs,
                                _architecture(target), engines, temperature,
                                limits=run_limits(checkpoint, batch_size, max_new_tokens))
    engines, evidence = evidence_engines(engines, _launch(launch), obs)
    draft, tgt, presets = load_for_run(checkpoint, target,
                                       engines_with(engines, *(wirings or [])), device)
    unknown = [w for w in wirings or [] if w not in presets]
    if unknown:
        raise Eagle3NbError(f"unknown wiring(s) {unknown}", "wirings", f"one of: {', '.join(presets)}")
    chosen = {w: presets[w] for w in wirings} if wirings else presets
    samples = read_prompts(prompts, tgt, n_samples)
    check_positions(samples, max_new_tokens, drafting, draft.cfg)
    rows = run_what_if(draft, tgt, samples, chosen,
                       max_new_tokens=max_new_tokens, batch_size=batch_size, drafting=drafting)
    rule_out(rows, *_d2t_evidence(checkpoint))
    rows = rank(rows, obs)
    return {"checkpoint": str(checkpoint), "num_steps": drafting.num_steps,
            "drafting": drafting.to_json(), "n_samples": n_samples,
            "max_new_tokens": max_new_tokens, "evidence": evidence,
            "threads": tgt.threads.label(), **what_if_json(rows, obs)}


def drafting_of_run(checkpoint, target, num_steps: int | None = None, topk: int | None = None,
                    num_draft_tokens: int | None = None, launch=None, observed=None,
                    engines: list[str] | None = None, temperature: float = 0.0,
                    batch_size: int = DEFAULT_BATCH_SIZE,
                    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> Drafting:
    """The drafting settings check_acceptance will simulate, resolved (or refused) from the
    configs alone, without loading a model: the report asks before any notebook runs."""
    obs = parse_observed(observed) if observed not in (None, "") else None
    return resolve_drafting(num_steps, topk, num_draft_tokens, _launch(launch), obs,
                            _architecture(target), engines, temperature,
                            limits=run_limits(checkpoint, batch_size, max_new_tokens))


def evidence_engines(engines: list[str] | None, launch, observed) -> tuple[list[str] | None, str]:
    """The engine releases whose wirings a run simulates, and the line that says why.

    A named release (--engine) decides. Else a release the observed figure states. Else, with
    an observed figure to explain, every release range of the engine it names (of every engine
    when it names none): the wirings are cheap, most ranges share one. Without an observed
    figure, each engine's newest releases."""
    from eagle3_nb.engines import engine as registered, engines as registered_all, resolve_engines

    if engines:
        return engines, f"engine release: {', '.join(engines)} (--engine)"
    name = getattr(observed, "engine", None) or getattr(launch, "engine", None)
    name = name if name in registered_all() else None
    version = getattr(observed, "version_detected", None)
    if name and version and version[0].isdigit():
        return [f"{name}=={version}"], f"engine release: {name} {version} (the observed figure)"
    if observed is None:
        return None, ("engine release: not given, each engine's newest releases simulated "
                      "(--engine NAME==VERSION, --launch or --observed with the engine's log "
                      "decide it)")
    ranges = [p.key for p in (registered(name).profiles if name else resolve_engines(["all"]))]
    who = registered(name).title if name else "every engine"
    return ranges, (f"your engine release is not known; these are the wirings that match: "
                    f"{who}'s every release range (pass --engine NAME==VERSION to decide)")


def _d2t_evidence(checkpoint: str | Path) -> tuple[str | None, bool]:
    """(d2t format, valid) read from the checkpoint itself (eagle3-nb vocab's answer)."""
    from eagle3_nb.io.checkpoint import open_once
    from eagle3_nb.vocab import VocabMapping

    ckpt = open_once(checkpoint)
    mapping = VocabMapping.from_checkpoint(ckpt, ckpt.config)
    return mapping.format, not mapping.problems
