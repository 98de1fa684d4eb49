"""The drafting settings a simulation copies (num_steps, topk, num_draft_tokens, temperature),
resolved from the first source that states them and refused before anything loads when the run
cannot afford them. Notebook 04, `eagle3-nb accept` and the report's preflight resolve them here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from eagle3_nb.acceptance import Drafting
from eagle3_nb.checks.options import AcceptanceOptions
from eagle3_nb.config import SETTINGS_ENGINES_RUN, drafting_problem, parse_config
from eagle3_nb.defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS, DEFAULT_NUM_STEPS
from eagle3_nb.engines.registry import engines as registered_engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.observed.metrics import parse_observed
from eagle3_nb.wirings import Served


def observed_of(options: AcceptanceOptions):
    """The engine's figure the options name, parsed (ObservedMetrics), or None."""
    return parse_observed(options.observed) if options.observed not in (None, "") else None


def run_drafting(checkpoint, target, options: AcceptanceOptions, observed=None,
                 engines: list[str] | None = None) -> Drafting:
    """The drafting settings of a run of OPTIONS on CHECKPOINT and TARGET (resolve_drafting,
    under the run's own limits), with OBSERVED (parsed) and ENGINES where the run has them."""
    return resolve_drafting(options.num_steps, options.topk, options.num_draft_tokens,
                            launch_settings(options.launch), observed, _architecture(target),
                            engines, options.temperature,
                            limits=run_limits(checkpoint, options.batch_size,
                                              options.max_new_tokens))


def drafting_of_run(checkpoint, target, options: AcceptanceOptions) -> Drafting:
    """The drafting settings check_acceptance will simulate, resolved (or refused) from the
    configs alone, without loading a model: the report asks before any notebook runs."""
    return run_drafting(checkpoint, target, options, observed_of(options), options.engines)


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


def launch_settings(launch):
    """The serving command as LaunchSettings: its text or file read, None when not given."""
    if launch in (None, ""):
        return None
    if isinstance(launch, str):
        from eagle3_nb.engines.launch import read_launch
        return read_launch(launch)
    return launch


def served_by(launch) -> Served:
    """What the serving command (its text, its file, or LaunchSettings; None: no command) says
    about the draft, for the engine wirings: the path it names, the aux ids it gives."""
    return Served.of(launch_settings(launch))


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
    asked_values = [count_setting(v, name, PARAMETERS, allow_unset=True) for v, name in
                    ((num_steps, "num_steps"), (topk, "topk"),
                     (num_draft_tokens, "num_draft_tokens"))]
    stated, where = _stated_by_engine(launch, observed,
                                      _engine_default(launch, observed, architecture, engines),
                                      limits)
    if any(asked_values):
        refuse_unaffordable(*(v or 1 for v in asked_values[:2]), asked_values[2], PARAMETERS,
                            limits)
        asked = _asked(*asked_values, stated)
        if stated and _shape(asked) != _shape(stated):
            raise Eagle3NbError(f"the parameters ask for a {asked.label()}, but {stated.source} "
                                f"states a {stated.label()}", "num_steps / topk / num_draft_tokens",
                                "drop the parameters to simulate what the engine ran, or compare "
                                "with a figure measured with the same settings")
        stated, where = asked, PARAMETERS
    drafting = replace(stated or Drafting(), temperature=temperature)
    refuse_unaffordable(*_shape(drafting), where, limits)
    return drafting


def _temperature(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        raise Eagle3NbError(f"temperature {str(value)[:40]} is not a finite number >= 0",
                            "temperature (--temperature)",
                            "0 for greedy verification, or the engine's sampling temperature")
    return float(value)


def count_setting(value, name: str, where: str, allow_unset: bool = False) -> int | None:
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


def refuse_unaffordable(num_steps: int, topk: int, num_draft_tokens: int | None, where: str,
             limits: RunLimits) -> None:
    problem = drafting_problem(num_steps, topk, num_draft_tokens,
                               batch_size=limits.batch_size, max_new_tokens=limits.max_new_tokens,
                               max_positions=limits.max_positions, draft_vocab=limits.draft_vocab)
    if problem:
        raise Eagle3NbError(f"cannot simulate these drafting settings: {problem}", where,
                            _unaffordable_fix(where))


def _unaffordable_fix(where: str) -> str:
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
        steps, topk, tokens = (count_setting(server.get(k), k, where,
                                             allow_unset=k != "num_steps")
                               for k in ("num_steps", "topk", "num_draft_tokens"))
        refuse_unaffordable(steps, topk or 1, tokens, where, limits)
        return Drafting(steps, topk or 1, tokens,
                        f"the server's own arguments ({observed.source})"), where
    if launch is not None and getattr(launch, "refuses_simulation", ""):
        raise Eagle3NbError(f"cannot simulate this serving config: {launch.refuses_simulation}",
                            _launch_where(launch), "simulate a chain instead (give --num-steps "
                            "without --launch), or serve a chain to compare with")
    if launch is not None and (launch.num_steps or launch.topk or launch.num_draft_tokens):
        where = _launch_where(launch)
        steps, topk, tokens = (count_setting(getattr(launch, k), k, where, allow_unset=True)
                               for k in ("num_steps", "topk", "num_draft_tokens"))
        topk = topk or 1
        steps = steps or (tokens - 1 if tokens and topk == 1 else DEFAULT_NUM_STEPS)
        refuse_unaffordable(steps, topk, tokens, where, limits)
        return Drafting(steps, topk, tokens, f"the launch command ({launch.engine})"), where
    drafts = getattr(observed, "draft_tokens_per_step", None)
    if drafts:
        where = f"--observed {observed.source} (its draft tokens per verify step)"
        drafts = count_setting(drafts, "draft_tokens_per_step", where)
        refuse_unaffordable(drafts, 1, None, where, limits)
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
