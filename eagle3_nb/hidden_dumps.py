"""Notebooks 03 and 04 on hidden-state dumps instead of a live target (a target too big for
one machine: speculators `hs_*.safetensors`, SpecForge `.ckpt`): `check_dumps` (03's wirings
table and findings) and `score_on_dumps` (04's per-step teacher-forced accuracy).

A dump holds the layers that were captured when it was written; for an offline-trained draft,
that is its training data. So `trained` reads the dump's aux concat, `single_layer` its last
state, `embeddings_only` zeros, and every other wiring (an engine's, `layers_plus_one`) reads the
slots of the dump that hold the layers it captures. A wiring that captures layers the dump does
not hold gets no number: it needs the live target. With no target head there is no greedy
reference: first-step accuracy is teacher-forced against the recorded tokens, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .errors import Eagle3NbError
from .wiring import Wiring

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

    def features(self, wiring: Wiring) -> list[torch.Tensor]:
        """What `wiring` feeds the draft on each dump (NotInDump when the dump cannot say)."""
        return [dump_features(s, wiring, self.held, self.draft.cfg.Ht) for s in self.samples]


def load_dump_run(checkpoint: str | Path, hidden_states: str | Path, engines: list[str] | None,
                  n_samples: int | None, device: str | None, target: str | Path | None = None,
                  dump_layer_ids=None) -> DumpRun:
    """`target` (optional) is a local target directory: its config gives the layer count (so
    default aux ids resolve) and its embed_tokens stand in for a draft without its own, as the
    engines share them. dump_layer_ids: the layers the dump captured, in file order
    (speculators: its last, loss layer included), as a list or "2,4,5,8"; unknown, the dump is
    taken to hold the trained layers."""
    from .hidden_check import named_wirings, pick_device
    from .model import load_draft
    from .target import read_dump

    dev, dtype = pick_device(device)
    named = named_wirings(checkpoint, target, engines)
    draft = load_draft(checkpoint, dev, dtype, embed_from=target)
    ids = parse_layer_ids(dump_layer_ids)
    samples = read_dump(hidden_states, **({"layer_ids": ids} if ids else {}))
    samples = (samples if isinstance(samples, list) else [samples])[:n_samples]
    return DumpRun(draft, samples, named.presets, named.profiles, named.target_info, named.cfg,
                   named.checkpoint, dev, dtype)


@torch.no_grad()
def check_dumps(checkpoint: str | Path, hidden_states: str | Path, engines: list[str] | None,
                n_samples: int, device: str | None, wirings: tuple[str, ...],
                target: str | Path | None = None, dump_layer_ids=None) -> dict[str, Any]:
    """The same answer as hidden_check.check_hidden_states, from dumps (load_dump_run says what
    target and dump_layer_ids give)."""
    from .findings import sort_findings
    from .hidden_findings import hidden_findings

    run = load_dump_run(checkpoint, hidden_states, engines, n_samples, device, target,
                        dump_layer_ids)
    presets, trained = run.presets, run.presets["trained"]
    chosen = [presets[w] for w in wirings if w in presets] + [presets[p.key] for p in run.profiles]
    rows = [_evaluate(run, w) for w in chosen]
    data = {"checkpoint": str(run.checkpoint), "target": str(target) if target else None,
            "hidden_states": str(hidden_states), "source": "dumps", "reference": REFERENCE,
            "device": str(run.device), "dtype": str(run.dtype).replace("torch.", ""),
            "n_samples": len(run.samples), "hidden_size": run.cfg.H,
            "trained_width": run.draft.fc.in_features,
            "num_layers": run.info.num_hidden_layers if run.info else None, "wirings": rows,
            "dump_layer_ids": run.held,
            "trained_layer_ids": list(trained.layer_ids or ()) or None, "layer_similarity": None}
    data["findings"] = [f.to_json() for f in sort_findings(hidden_findings(data))]
    return data


@torch.no_grad()
def score_on_dumps(checkpoint: str | Path, hidden_states: str | Path, num_steps: int = 4,
                   wirings: list[str] | None = None, n_samples: int | None = None,
                   device: str | None = None, target: str | Path | None = None,
                   engines: list[str] | None = None, dump_layer_ids=None) -> list[dict[str, Any]]:
    """Teacher-forced per-step accuracy (acceptance.score_dumps) under each named wiring, the
    engine's unloaded parameters reset as in a live run; default: trained, single_layer and
    every engine. A wiring the engine refuses or the dump cannot feed is a row with `error` or
    `unmeasured` instead of numbers."""
    from .acceptance import score_dumps
    from .model import as_engine_leaves

    run = load_dump_run(checkpoint, hidden_states, engines, n_samples, device, target,
                        dump_layer_ids)
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


def _evaluate(run: DumpRun, wiring: Wiring) -> dict[str, Any]:
    from .drift import features_drift, weighted_mean
    from .features import first_step_accuracy_on_dump
    from .hidden_check import no_number
    from .model import as_engine_leaves
    from .trace import trace_shapes

    draft, samples, trained = run.draft, run.samples, run.presets["trained"]
    row: dict[str, Any] = {"wiring": wiring.to_json()}
    if wiring.hidden_source == "final_norm" and samples[0].last_hidden_kind == "pre_norm":
        row["wiring"]["note"] += ("; here the dump's last layer, before the final norm, stands "
                                  "in for it")
    try:
        if wiring.engine_error:
            raise Eagle3NbError(f"{wiring.name} does not serve this draft: {wiring.engine_error}")
        served = as_engine_leaves(draft, wiring)
        feats = run.features(wiring)
        ids = samples[0].token_ids.reshape(-1).to(draft.fc.weight.device)
        trace = trace_shapes(served, ids[1:][None], feats[0][:-1][None].to(ids.device), wiring)
        row.update(width=trace.hidden_width, fc_applied=trace.fc_applied,
                   trace=[r.to_json() for r in trace.rows])
        accs = [first_step_accuracy_on_dump(served, s, wiring, f) for s, f in zip(samples, feats)]
        drift = [features_drift(draft, served, f, b, wiring, trained)
                 for f, b in zip(feats, run.features(trained))]
        weights = [len(s) for s in samples]
        n, correct = sum(a.n for a in accs), sum(a.correct for a in accs)
        row.update(n=n, correct=correct, accuracy=correct / n if n else 0.0, error=None,
                   feature_cosine=weighted_mean([d[0] for d in drift], weights),
                   aux_cosine=weighted_mean([d[1] for d in drift], weights))
    except NotInDump as exc:
        row.update(no_number(), error=None, unmeasured=f"{exc.what}: needs the live target")
    except Eagle3NbError as exc:  # the engine would crash here: say so instead of a number
        row.update(no_number(), error=exc.one_line())
    return row
