"""The serving command, read by the dialect of the engine it starts (engines/<engine>/launch.py).

What a draft cannot show: the algorithm the engine runs it with, whether it is given at all,
the attention backend its worker inherits, the decoding settings a simulation should copy, and
whether CUDA graphs are on. The checks that hold for every engine live here; each engine's
dialect adds its own.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig
from eagle3_nb.engines.profile import EngineProfile
from eagle3_nb.engines.registry import engine, engines
from eagle3_nb.errors import ConfigError
from eagle3_nb.findings import ERROR, INFO, WARNING, Finding

@dataclass
class LaunchSettings:
    engine: str
    model: str | None = None
    draft: str | None = None
    method: str | None = None             # the speculative algorithm or method the command names
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    tensor_parallel: int | None = None
    cuda_graphs: bool = True
    attention_backend: str | None = None
    draft_attention_backend: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    # where the draft comes from when the command names none but the engine may still find one
    # (the served model being a speculators checkpoint): said, and the check is a warning
    implied_draft: str = ""
    # why a simulation of what the engine drafts is refused ("": it can be simulated)
    refuses_simulation: str = ""
    # the aux layer ids the command itself gives, in the engine's own numbering (an engine that
    # takes them from its launch config, never from the draft); None: it gives none
    aux_ids: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "flags"}


MAX_COMMAND_BYTES = 64 << 10   # a serving command is a few hundred bytes; its file no more


def read_launch(text_or_file: str) -> LaunchSettings:
    """A serving command line, or a file holding one (backslash continuations allowed)."""
    text = text_or_file
    if names_a_file(text_or_file):
        text = _command_file(Path(text_or_file))
    elif len(text) > MAX_COMMAND_BYTES:
        raise ConfigError(f"the launch command is {len(text)} characters long: not a serving "
                          "command", "--launch", "pass the command as you run it")
    for found in engines().values():
        settings = found.launch.read_text(text) if found.launch and found.launch.read_text \
            else None
        if settings is not None:
            return _within_bounds(settings)
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError as exc:
        raise ConfigError(f"cannot read the launch command ({exc})", "--launch",
                          "quote it as the shell would") from None
    joined = " ".join(words)
    for found in engines().values():
        if found.launch and found.launch.starts(joined):
            return _within_bounds(found.launch.parse(words))
    known = [e for e in engines().values() if e.launch]
    raise ConfigError(f"the launch command starts no {' or '.join(e.title for e in known)} server",
                      "--launch", "pass the command as you run it, e.g. " +
                      " or ".join(repr(e.launch.example) for e in known))


def _command_file(path: Path) -> str:
    """The file's text, read no further than a command can be long."""
    with path.open("rb") as handle:
        data = handle.read(MAX_COMMAND_BYTES + 1)
    if len(data) > MAX_COMMAND_BYTES:
        raise ConfigError(f"the file is over {MAX_COMMAND_BYTES >> 10} KiB: not a serving command",
                          str(path), "pass a file holding only the command (or the command "
                          "itself) to --launch")
    return data.decode("utf-8", errors="replace")


def _within_bounds(launch: LaunchSettings) -> LaunchSettings:
    """A drafting count beyond anything an engine runs is refused, naming the engine's flag."""
    from eagle3_nb.config import launch_count_problem

    names = engine(launch.engine).launch.setting_names
    for setting in ("num_steps", "topk", "num_draft_tokens"):
        value = getattr(launch, setting)
        problem = launch_count_problem(setting, value) if value is not None else ""
        if problem:
            raise ConfigError(f"{names.get(setting, setting)} {value} {problem}", "--launch",
                              "pass the command the engine runs (engines draft 3 to 8 steps, "
                              "topk 1 to 8)")
    return launch


_COUNTS = ("num_steps", "topk", "num_draft_tokens", "tensor_parallel")


def launch_from_args(args: dict[str, Any]) -> LaunchSettings:
    """The settings a server showed (observe's server info, a log's resolved arguments); a
    count that is no whole number is left out (these are claims read as evidence, and the
    checks compare counts)."""
    fields = {k: args.get(k) for k in LaunchSettings.__dataclass_fields__
              if k != "flags" and k in args}
    for key in _COUNTS:
        if key in fields and _whole(fields[key]) is None:
            fields[key] = None
    return LaunchSettings(**fields)


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def names_a_file(text: str) -> bool:
    """Whether --launch names a file rather than holding the command (a long command is no
    file name: the OS refuses it, ENAMETOOLONG)."""
    if len(text) >= 4096 or "\n" in text:
        return False
    try:
        return Path(text).is_file()
    except OSError:
        return False


def read_flags(words: list[str], booleans: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
            out[name] = value
        elif word.startswith("-") and word in booleans:
            out[word] = True
        elif word.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[word] = words[i + 1]
            i += 1
        elif word.startswith("-"):
            out[word] = True
        i += 1
    return out


def as_int(value: Any, flag: str | None = None) -> int | None:
    """A count the command gives: None when it gives none. With FLAG (the engine's own name for
    it), a value that is no whole number (the flag left without its value, 'inf', a JSON NaN or
    Infinity) is refused, naming the flag; without, it is None."""
    if value is None:
        return None
    whole = _whole(value)
    if whole is None and isinstance(value, str):
        try:
            whole = int(value.strip())
        except ValueError:   # also an integer of more than 4300 digits
            whole = None
    if whole is None and flag:
        shown = "no value" if value is True else f"{str(value)[:40]!r}"
        raise ConfigError(f"{flag} has {shown}, not a whole number", "--launch",
                          "give it the count the engine runs with")
    return whole


def launch_findings(launch: LaunchSettings, cfg: DraftConfig | None,
                    profiles: list[EngineProfile], num_layers: int | None = None) -> list[Finding]:
    """What the command does to this draft, per profile of the engine it starts. cfg None: the
    draft's config is not at hand (a running server's own view); what needs it is not checked.
    NUM_LAYERS: the target's layer count, when known."""
    out = []
    for p in (p for p in profiles if p.name == launch.engine):
        out += [Finding(code, sev, msg, ev, p.key)
                for code, sev, msg, ev in _checks(launch, cfg, p, num_layers)]
    return out


def _checks(launch: LaunchSettings, cfg: DraftConfig | None, p: EngineProfile,
            num_layers: int | None) -> list[tuple]:
    out = []
    ev = {"launch": launch.to_json()}
    if not launch.draft and launch.implied_draft:
        out.append(("LAUNCH_SETTING", WARNING, "the command names no draft model: nothing is "
                    f"speculated unless {launch.implied_draft}", ev))
    elif not launch.draft:
        out.append(("LAUNCH_SETTING", ERROR, "the command names no draft model: nothing is "
                    "speculated", ev))
    out += engine(launch.engine).launch.checks(launch, cfg, p, ev, num_layers)
    backend = launch.attention_backend or ""
    if "mla" in backend and cfg is not None and not cfg.mla \
            and not launch.draft_attention_backend \
            and p.draft_attention_flag:
        out.append(("LAUNCH_SETTING", WARNING, f"--attention-backend {backend} is an MLA "
                    f"backend, and the draft worker inherits it without "
                    f"{p.draft_attention_flag}: this draft's attention is not MLA", ev))
    if cfg is not None and not cfg.mla:
        out += _tensor_parallel_checks(launch, cfg, ev)
    if p.graphs_use_default_ids and not launch.cuda_graphs:
        out.append(("LAUNCH_SETTING", INFO, "CUDA graphs are off, so this release's graph "
                    "replay of the default aux layers does not apply", ev))
    return out


def _tensor_parallel_checks(launch: LaunchSettings, cfg: DraftConfig, ev: dict) -> list[tuple]:
    """Startup assertions the draft's own sizes fail at this tensor-parallel size."""
    dialect = engine(launch.engine).launch
    tp = dialect.draft_tensor_parallel(launch)
    if not tp or tp <= 1:
        return []
    heads, kv, inter = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    broken = [f"num_attention_heads {heads}" if heads % tp else "",
              f"num_key_value_heads {kv}" if (kv % tp if kv >= tp else tp % kv) else "",
              f"intermediate_size {inter}" if inter % tp else ""]
    broken = [b for b in broken if b]
    if not broken:
        return []
    fix = dialect.tensor_parallel_fix
    return [("LAUNCH_SETTING", ERROR,
             f"the draft is sharded {tp} ways, and {', '.join(broken)} "
             f"{'is' if len(broken) == 1 else 'are'} not divisible by {tp}: the engine fails at "
             f"startup (an assertion in its Llama layer); {fix}, or train the draft with sizes "
             f"{tp} divides", {**ev, "draft_tensor_parallel": tp,
                                "cite": dialect.tensor_parallel_cite})]

