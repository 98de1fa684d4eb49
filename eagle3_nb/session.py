"""One run's inputs, loaded once (Session: the device, torch's threads, the draft, its named
wirings planned from headers and JSON only, and the target), and the features a wiring feeds the
draft, from a live target or from an engine's hidden-state dumps. Notebooks 03 and 04 and
`eagle3-nb accept` all start here.

A dump holds the layers that were captured when it was written; for an offline-trained draft,
that is its training data. So `trained` reads the dump's aux concat, `single_layer` its last
state, `embeddings_only` zeros, and every other wiring (an engine's, `layers_plus_one`) reads the
slots of the dump that hold the layers it captures. A wiring that captures layers the dump does
not hold gets no number (NotInDump): it needs the live target.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from eagle3_nb.defaults import THREADS_VARIABLE
from eagle3_nb.drift import n_positions
from eagle3_nb.config import token_id_list
from eagle3_nb.engines import resolve_engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.features import (StepAccuracy, draft_features, first_step_accuracy,
                                first_step_accuracy_on_dump)
from eagle3_nb.io.checkpoint import (Checkpoint, directory_state, iter_jsonl, load_target_info,
                                     open_once)
from eagle3_nb.model import Wiring, load_draft
from eagle3_nb.progress import progress_bar
from eagle3_nb.target import TargetModel, TargetOutput, read_dump
from eagle3_nb.wirings import Served, wiring_presets


def pick_device(device: str | None = None) -> tuple[torch.device, torch.dtype]:
    """CUDA in bf16 when present (or asked for), else CPU in float32."""
    name = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise Eagle3NbError("device cuda asked for but no GPU is visible", "--device", "use cpu")
    dev = torch.device(name)
    return dev, (torch.bfloat16 if dev.type == "cuda" else torch.float32)


def read_prompts(path: str | Path, target, limit: int | None = None) -> list[torch.Tensor]:
    """JSON Lines: {"prompt": str} (tokenized with the target's tokenizer, no special tokens
    added unless its post-processor does) or {"input_ids": [...]}."""
    rows = []
    for n, row in iter_jsonl(path):
        if isinstance(row.get("input_ids"), list):
            ids = token_id_list(row["input_ids"], f"line {n} input_ids", str(path),
                                target.vocab_size)
            if not ids:
                raise Eagle3NbError(f"line {n} has no input_ids", str(path), "give each prompt "
                                    "at least one token")
            rows.append(torch.tensor(ids, dtype=torch.long))
        elif isinstance(row.get("prompt"), str):
            rows.append(target.encode(row["prompt"]).reshape(-1).cpu())
        else:
            raise Eagle3NbError(f"line {n} has neither prompt nor input_ids", str(path),
                                "one JSON object per line")
        if limit and len(rows) >= limit:
            break
    return rows


@dataclass
class NamedWirings:
    """Every named wiring of a draft, from headers and JSON only (no weights loaded)."""
    checkpoint: Path
    ckpt: Checkpoint              # opened once: headers and config, no tensor read yet
    cfg: Any
    target_info: Any              # None without a target config
    profiles: list
    presets: dict[str, Any]


def engines_with(engines: list[str] | None, *wirings: str | None) -> list[str] | None:
    """The engines of a run plus any engine release named as a wiring ("sglang==0.5.9"), so
    that wiring exists although the default engines are only each engine's newest releases."""
    named = [w for w in wirings if w and "==" in w]
    if not named:
        return engines
    base = list(engines) if engines else [p.key for p in resolve_engines(engines)]
    return base + [w for w in named if w not in base]


def named_wirings(checkpoint: str | Path, target: str | Path | None = None,
                  engines: list[str] | None = None, served: Served = Served()) -> NamedWirings:
    """SERVED: what the serving command says about the draft, when one was given (the path
    an engine's guesses see, the aux ids an engine takes from its launch config)."""
    ckpt = open_once(checkpoint)
    cfg = ckpt.config
    info = load_target_info(target) if target else None
    profiles = resolve_engines(engines)
    shapes = {n: t.shape for n, t in ckpt.tensors.items()}
    planned = ckpt.derived.setdefault(("engine wirings", repr(info), served), {})
    return NamedWirings(ckpt.path, ckpt, cfg, info, profiles,
                        wiring_presets(cfg, shapes, info, profiles, planned, served))


# Below this many parameters (draft and target together) a matmul is too short for more torch
# threads to pay, and on a busy machine they contend (issue #26 timed the bundled pair at 2.8x
# on torch's default threads); benchmarks/bench_threads.py compares the choice on this machine.
SMALL_MODEL_PARAMS = 50_000_000


@dataclass(frozen=True)
class Threads:
    count: int
    why: str

    def label(self) -> str:
        return f"{self.count} torch thread{'s' if self.count != 1 else ''} ({self.why})"


def choose_threads(params: int) -> Threads:
    """--threads (EAGLE3NB_THREADS), else OMP_NUM_THREADS, else one thread for a small model
    and every core the process may use for a larger one."""
    for variable, why in ((THREADS_VARIABLE, "--threads"), ("OMP_NUM_THREADS", "OMP_NUM_THREADS")):
        value = os.environ.get(variable, "").strip()
        if value:
            if not value.isdigit() or int(value) < 1:
                raise Eagle3NbError(f"{variable}={value!r} is not a thread count", variable,
                                    "set a positive whole number, or unset it")
            return Threads(int(value), why)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if params < SMALL_MODEL_PARAMS:
        return Threads(1, f"{params / 1e6:.1f}M parameters: more threads only contend")
    return Threads(cores or 1, f"{params / 1e6:.0f}M parameters, {cores} cores")


def apply_threads(*models) -> Threads:
    threads = choose_threads(sum(p.numel() for m in models for p in m.parameters()))
    torch.set_num_threads(threads.count)
    return threads


class Session:
    """One process's run: the device and dtype it computes on, torch's threads, and what it has
    opened, each once. The draft checkpoint is io.checkpoint.open_once's (one per unchanged
    directory), the engine wirings are planned once per checkpoint and target (named_wirings
    keeps them with the checkpoint), and the target model is the session's own. Checks take
    Session.current(): a report's notebooks share one kernel, and so one session."""

    _current: "Session | None" = None

    def __init__(self, device: str | None = None):
        self.device, self.dtype = pick_device(device)
        self.threads: Threads | None = None  # set for the models last loaded (use_threads)
        self._target: tuple[str, TargetModel] | None = None  # (directory state, model)

    @classmethod
    def current(cls, device: str | None = None) -> "Session":
        """This process's session on DEVICE (None: CUDA when present). Another device starts a
        new session, and the old one's target goes with it."""
        wanted, _ = pick_device(device)
        if cls._current is None or cls._current.device != wanted:
            cls._current = None  # its target is freed before another is loaded
            cls._current = cls(device)
        return cls._current

    def wirings(self, checkpoint: str | Path, target: str | Path | None = None,
                engines: list[str] | None = None, served: Served = Served()) -> NamedWirings:
        return named_wirings(checkpoint, target, engines, served)

    def target(self, target: str | Path) -> TargetModel:
        """The target model, loaded once while its directory is unchanged; another target
        replaces it (never two in memory at once). Errors are TargetModel.load's."""
        root = Path(target)
        if not root.is_dir():
            return TargetModel.load(target, device=self.device, dtype=self.dtype)
        key = repr((str(root.resolve()), directory_state(root.resolve())))
        if self._target is None or self._target[0] != key:
            self._target = None
            self._target = (key, TargetModel.load(root, device=self.device, dtype=self.dtype))
        return self._target[1]

    def draft(self, named: NamedWirings, target: str | Path | None = None):
        """A fresh draft model of NAMED's checkpoint, its embed_tokens from TARGET where it
        ships none (the engines share the target's)."""
        return load_draft(named.ckpt, self.device, self.dtype, embed_from=target)

    def use_threads(self, *models) -> Threads:
        """torch's threads for MODELS' size (choose_threads), kept as the session's."""
        self.threads = apply_threads(*models)
        return self.threads

    def load_for_run(self, checkpoint: str | Path, target: str | Path,
                     engines: list[str] | None = None, served: Served = Served()):
        """Draft, target and every named wiring for one run, torch's threads set for their
        size (the target's `threads` says how); SERVED as named_wirings'."""
        named = self.wirings(checkpoint, target, engines, served)
        tgt = self.target(target)
        draft = self.draft(named, target)
        tgt.threads = self.use_threads(tgt.model, draft)
        return draft, tgt, named.presets

    def load_dumps(self, checkpoint: str | Path, hidden_states: str | Path,
                   engines: list[str] | None, n_samples: int | None,
                   target: str | Path | None = None, dump_layer_ids=None,
                   served: Served = Served()) -> "DumpRun":
        """The draft and its hidden-state dumps, ready to evaluate. `target` (optional) is a
        local target directory: its config gives the layer count (so default aux ids resolve)
        and its embed_tokens stand in for a draft without its own, as the engines share them.
        dump_layer_ids: the layers the dump captured, in file order (speculators: its last, loss
        layer included), as a list or "2,4,5,8"; unknown, the dump is taken to hold the trained
        layers. SERVED as named_wirings'."""
        named = self.wirings(checkpoint, target, engines, served)
        draft = self.draft(named, target)
        self.use_threads(draft)
        ids = parse_layer_ids(dump_layer_ids)
        # engines dump in the target's dtype (bf16 mostly): the states meet the draft in its own
        samples = read_dump(hidden_states, dtype=self.dtype, **({"layer_ids": ids} if ids else {}))
        samples = (samples if isinstance(samples, list) else [samples])[:n_samples]
        for sample in samples:
            _check_dump_tokens(sample, named.cfg.vocab_size)
        return DumpRun(draft, samples, named.presets, named.profiles, named.target_info,
                       named.cfg, named.checkpoint, self.device, self.dtype)


def load_for_run(checkpoint: str | Path, target: str | Path, engines: list[str] | None = None,
                 device: str | None = None):
    """Session.load_for_run on this process's session on DEVICE (CUDA bf16 when present)."""
    return Session.current(device).load_for_run(checkpoint, target, engines)


REFERENCE = "recorded tokens (teacher-forced)"


class NotInDump(Eagle3NbError):
    """The wiring reads layers the dump does not hold: no number, and no finding."""


@dataclass
class DumpRun:
    """A draft, its dumps and every named wiring, ready to evaluate."""
    draft: Any
    samples: list
    presets: dict[str, Wiring]
    profiles: list
    info: Any
    cfg: Any
    checkpoint: Path
    device: torch.device
    dtype: torch.dtype

    @property
    def held(self) -> list[int] | None:
        return held_layers(self.samples[0], self.presets["trained"])

    # --- as a feature source (LiveFeatures has the same methods) -------------------------------
    def features(self, wiring: Wiring) -> list[torch.Tensor]:
        """What `wiring` feeds the draft on each dump (NotInDump when the dump cannot say)."""
        return [dump_features(s, wiring, self.held, self.draft.cfg.Ht) for s in self.samples]

    def first_ids(self) -> torch.Tensor:
        return self.samples[0].token_ids.reshape(-1)

    def masks(self) -> list[torch.Tensor | None]:
        return [None] * len(self.samples)

    def weights(self) -> list[int]:
        return [len(s) for s in self.samples]

    def first_step(self, served, wiring: Wiring, feats: list[torch.Tensor]) -> list[StepAccuracy]:
        return [first_step_accuracy_on_dump(served, s, wiring, f)
                for s, f in zip(self.samples, feats)]

    def wiring_note(self, wiring: Wiring) -> str:
        if wiring.hidden_source == "final_norm" and self.samples[0].last_hidden_kind == "pre_norm":
            return "; here the dump's last layer, before the final norm, stands in for it"
        return ""


@dataclass
class LiveFeatures:
    """The live target as a feature source: one forward pass per prompt, shared by every
    wiring; accuracy against the target's own greedy tokens."""
    samples: list[torch.Tensor]
    outs: list[TargetOutput]

    @classmethod
    def run(cls, target: TargetModel, samples: list[torch.Tensor]) -> "LiveFeatures":
        outs = []
        with progress_bar(len(samples), None, "target passes") as bar:
            for sample in samples:
                outs.append(target.forward_hidden(sample.to(target.device)))
                bar.update()
        return cls(samples, outs)

    def features(self, wiring: Wiring) -> list[torch.Tensor]:
        return [draft_features(o, wiring) for o in self.outs]

    def first_ids(self) -> torch.Tensor:
        return self.samples[0].reshape(-1)

    def masks(self) -> list[torch.Tensor | None]:
        return [o.attention_mask for o in self.outs]

    def weights(self) -> list[int]:
        return [n_positions(o) for o in self.outs]

    def first_step(self, served, wiring: Wiring, feats: list[torch.Tensor]) -> list[StepAccuracy]:
        return [first_step_accuracy(served, o, s, wiring) for o, s in zip(self.outs, self.samples)]

    def wiring_note(self, wiring: Wiring) -> str:
        return ""


def load_dump_run(checkpoint: str | Path, hidden_states: str | Path, engines: list[str] | None,
                  n_samples: int | None, device: str | None, target: str | Path | None = None,
                  dump_layer_ids=None) -> DumpRun:
    """Session.load_dumps on this process's session on DEVICE."""
    return Session.current(device).load_dumps(checkpoint, hidden_states, engines, n_samples,
                                              target, dump_layer_ids)


def _check_dump_tokens(sample, vocab_size: int) -> None:
    """A dump the draft can be scored on: three tokens at least (a position, the token it sees,
    the one it predicts) and ids inside the target vocabulary the embeddings index."""
    ids = sample.token_ids.reshape(-1)
    if ids.numel() < 3:
        raise Eagle3NbError(f"the dump holds {ids.numel()} token(s)", str(sample.source),
                            "score on dumps of three tokens or more")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise Eagle3NbError(f"the dump's token ids run from {int(ids.min())} to {int(ids.max())},"
                            f" outside the vocabulary [0, {vocab_size})", str(sample.source),
                            "dump with the target this draft was trained for")


def parse_layer_ids(value) -> list[int] | None:
    """None, "", a list of ints, or "2,4,5,8" -> a list (or None)."""
    if value in (None, "", []):
        return None
    if isinstance(value, str):
        try:
            return [int(v) for v in value.replace(" ", "").split(",") if v]
        except ValueError:
            raise Eagle3NbError(f"layer ids {value!r} are not integers", "dump_layer_ids",
                                "write them comma-separated, e.g. 2,4,5,8") from None
    return [int(v) for v in value]


def held_layers(sample, trained: Wiring) -> list[int] | None:
    """The aux layers the dump holds: as recorded, else (an offline draft's own training data)
    the ones the draft was trained on."""
    ids = sample.layer_ids or trained.layer_ids
    return list(ids) if ids else None


def dump_features(sample, wiring: Wiring, held: list[int] | None, width: int) -> torch.Tensor:
    """[T, W]: what `wiring` feeds the draft, read from the dump; `width` is one layer's."""
    aux = sample.aux_hidden_states
    if wiring.hidden_source == "zeros":
        return torch.zeros_like(aux)
    if wiring.hidden_source == "final_norm":
        if sample.last_hidden_state is None:
            raise NotInDump("the dump has no last hidden state", str(sample.source),
                            "dump the last layer too (speculators does by default)")
        return sample.last_hidden_state
    wanted = list(wiring.layer_ids) if wiring.layer_ids else held
    if wanted == held:
        slots = list(range(aux.shape[-1] // width))
    elif held and all(i in held for i in wanted):
        slots = [held.index(i) for i in wanted]
    else:
        raise NotInDump(f"captures hidden_states {wanted}; the dump holds {held}",
                        str(sample.source), "run notebook 03 with the live target (--target)")
    if wiring.hidden_source.startswith("aux:"):
        slots = [slots[int(wiring.hidden_source.split(":", 1)[1])]]
    return torch.cat([aux[:, s * width:(s + 1) * width] for s in slots], -1)


# Where a wiring's features come from: the live target or an engine's dumps. Both answer
# features, first_ids, masks, weights, first_step and wiring_note (checks.hidden.evaluate_wiring).
FeatureSource = LiveFeatures | DumpRun
