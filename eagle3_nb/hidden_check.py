"""Notebook 03's question in one call: do the hidden states reaching the draft have the shape it
was trained on, under each engine's wiring, and does the draft still predict the target?

checkpoint + (target dir | hidden-state dumps) -> per wiring: captured layers, width, fc applied
or skipped, the shape trace, and first-step accuracy on real samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .checkpoint import Checkpoint, iter_jsonl
from .config import parse_config
from .engines import resolve_engines
from .errors import Eagle3NbError
from .findings import sort_findings

DEFAULT_WIRINGS = ("trained", "single_layer", "layers_plus_one")


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
            rows.append(torch.tensor(row["input_ids"], dtype=torch.long))
        elif isinstance(row.get("prompt"), str):
            rows.append(target.encode(row["prompt"]).reshape(-1).cpu())
        else:
            raise Eagle3NbError(f"line {n} has neither prompt nor input_ids", str(path),
                                "one JSON object per line")
        if limit and len(rows) >= limit:
            break
    return rows


def check_hidden_states(checkpoint: str | Path, target: str | Path | None = None,
                        prompts: str | Path | None = None, engines: list[str] | None = None,
                        n_samples: int = 8, device: str | None = None,
                        wirings: tuple[str, ...] = DEFAULT_WIRINGS,
                        hidden_states: str | Path | None = None,
                        dump_layer_ids=None) -> dict[str, Any]:
    """On the live target (prompts run through it), or on hidden-state dumps (hidden_states;
    the target then only lends its config and embeddings: hidden_dumps.check_dumps)."""
    if hidden_states:
        from .hidden_dumps import check_dumps
        return check_dumps(checkpoint, hidden_states, engines, n_samples, device, wirings, target,
                           dump_layer_ids)
    if not target or not prompts:
        raise Eagle3NbError("no target (with prompts) and no hidden-state dumps",
                            "target / hidden_states",
                            "give the target model directory, or the engine's dumps")
    from .drift import mean_layer_similarity
    from .hidden_findings import hidden_findings
    from .model import load_draft
    from .target import TargetModel

    dev, dtype = pick_device(device)
    named = named_wirings(checkpoint, target, engines)
    cfg, info, presets = named.cfg, named.target_info, named.presets
    chosen = [presets[w] for w in wirings if w in presets] + [presets[p.key] for p in named.profiles]
    tgt = TargetModel.load(target, device=dev, dtype=dtype)
    draft = load_draft(checkpoint, dev, dtype, embed_from=target)
    samples = read_prompts(prompts, tgt, n_samples)
    # one target pass per prompt serves every wiring's drift and the layer similarity
    outs = [tgt.forward_hidden(s.to(tgt.device)) for s in samples]
    rows = [_evaluate(draft, tgt, samples, outs, w, presets["trained"]) for w in chosen]
    data = {"checkpoint": str(named.checkpoint), "target": str(target), "device": str(dev),
            "dtype": str(dtype).replace("torch.", ""), "n_samples": len(samples),
            "hidden_size": cfg.H, "trained_width": draft.fc.in_features,
            "num_layers": info.num_hidden_layers, "wirings": rows,
            "trained_layer_ids": list(presets["trained"].layer_ids or ()) or None,
            "layer_similarity": mean_layer_similarity(outs)}
    data["findings"] = [f.to_json() for f in sort_findings(hidden_findings(data))]
    return data


def _evaluate(draft, target, samples, outs, wiring, trained):
    from .drift import feature_drift
    from .features import draft_features, first_step_accuracy
    from .model import as_engine_leaves
    from .trace import trace_shapes

    row: dict[str, Any] = {"wiring": wiring.to_json()}
    try:
        if wiring.engine_error:
            raise Eagle3NbError(f"{wiring.name} does not serve this draft: {wiring.engine_error}")
        served = as_engine_leaves(draft, wiring)  # what the engine computes with unloaded params
        ids = samples[0].to(target.device)
        feats = draft_features(outs[0], wiring)[:-1]
        trace = trace_shapes(served, ids[1:][None], feats[None], wiring)
        row.update(width=trace.hidden_width, fc_applied=trace.fc_applied,
                   trace=[r.to_json() for r in trace.rows])
        accs = [first_step_accuracy(served, o, s, wiring) for o, s in zip(outs, samples)]
        n, correct = sum(a.n for a in accs), sum(a.correct for a in accs)
        drift = feature_drift(draft, outs, wiring, trained, served_draft=served)
        row.update(n=n, correct=correct, accuracy=correct / n if n else 0.0, error=None,
                   feature_cosine=drift.feature_cosine, aux_cosine=drift.aux_cosine)
    except Eagle3NbError as exc:  # the engine would crash here: say so instead of a number
        row.update(no_number(), error=exc.one_line())
    return row


def no_number() -> dict[str, Any]:
    """A wiring row's measured fields when there is no measurement."""
    return {"width": None, "fc_applied": None, "trace": [], "n": 0, "correct": 0,
            "accuracy": None, "feature_cosine": None, "aux_cosine": None}


@dataclass
class NamedWirings:
    """Every named wiring of a draft, from headers and JSON only (no weights loaded)."""
    checkpoint: Path
    cfg: Any
    target_info: Any              # None without a target config
    profiles: list
    presets: dict[str, Any]


def named_wirings(checkpoint: str | Path, target: str | Path | None = None,
                  engines: list[str] | None = None) -> NamedWirings:
    from .inspection import load_target_info
    from .wiring import wiring_presets

    ckpt = Checkpoint.open(checkpoint)
    cfg = parse_config(ckpt.config_raw, str(ckpt.path / "config.json"))
    info = load_target_info(target) if target else None
    profiles = resolve_engines(engines)
    shapes = {n: t.shape for n, t in ckpt.tensors.items()}
    return NamedWirings(ckpt.path, cfg, info, profiles,
                        wiring_presets(cfg, shapes, info, profiles))


def load_for_run(checkpoint: str | Path, target: str | Path, engines: list[str] | None = None,
                 device: str | None = None):
    """Draft, target and every named wiring for one run (CUDA bf16 when present)."""
    from .model import load_draft
    from .target import TargetModel

    dev, dtype = pick_device(device)
    presets = named_wirings(checkpoint, target, engines).presets
    tgt = TargetModel.load(target, device=dev, dtype=dtype)
    return load_draft(checkpoint, dev, dtype, embed_from=target), tgt, presets


def measure_acceptance(checkpoint: str | Path, target: str | Path, prompts: str | Path,
                       wiring: str = "trained", num_steps: int = 4, max_new_tokens: int = 64,
                       n_samples: int | None = None, device: str | None = None,
                       stop_at_eos: bool = False, batch_size: int = 8):
    """Simulated chain speculative decoding of the prompts under one named wiring."""
    from .acceptance import simulate

    draft, tgt, presets = load_for_run(checkpoint, target, device=device)
    if wiring not in presets:
        raise Eagle3NbError(f"unknown wiring {wiring!r}", "--wiring",
                            f"one of: {', '.join(presets)}")
    samples = read_prompts(prompts, tgt, n_samples)
    return simulate(draft, tgt, samples, num_steps, max_new_tokens, presets[wiring],
                    stop_at_eos=stop_at_eos, batch_size=batch_size)


def what_if(checkpoint: str | Path, target: str | Path, prompts: str | Path, observed=None,
            num_steps: int = 4, max_new_tokens: int = 64, n_samples: int | None = None,
            device: str | None = None, wirings: list[str] | None = None,
            batch_size: int = 8) -> dict[str, Any]:
    """Every named wiring (or the given ones) simulated on the prompts and ranked against what
    the engine reported (a number, a log, metrics text, SGLang JSON, or None)."""
    from .metrics import parse_observed
    from .whatif import rank, run_what_if, what_if_json

    obs = parse_observed(observed) if observed is not None else None
    draft, tgt, presets = load_for_run(checkpoint, target, device=device)
    unknown = [w for w in wirings or [] if w not in presets]
    if unknown:
        raise Eagle3NbError(f"unknown wiring(s) {unknown}", "wirings", f"one of: {', '.join(presets)}")
    chosen = {w: presets[w] for w in wirings} if wirings else presets
    rows = rank(run_what_if(draft, tgt, read_prompts(prompts, tgt, n_samples), chosen, num_steps,
                            max_new_tokens, batch_size=batch_size), obs)
    return {"checkpoint": str(checkpoint), "num_steps": num_steps,
            "max_new_tokens": max_new_tokens, **what_if_json(rows, obs)}
