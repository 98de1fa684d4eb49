"""Shape tracing: what shape went where in one draft pass, and what the config promised.

Forward hooks record every module's input and output shapes (an activation-cache view, as in
TransformerLens); fc gets an explicit row even when it never ran, saying why it was skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from eagle3_nb.model import Wiring


@dataclass
class TraceRow:
    module: str
    inputs: list[list[int]]
    output: list[int] | None
    expected_in: int | None       # last-dim width the config promises for the first input
    status: str                   # "ok" | "mismatch" | "skipped"
    note: str = ""

    def to_json(self) -> dict:
        return {"module": self.module, "inputs": self.inputs, "output": self.output,
                "expected_in": self.expected_in, "status": self.status, "note": self.note}


@dataclass
class ShapeTrace:
    wiring: Wiring
    hidden_width: int
    promised_width: int
    fc_applied: bool
    rows: list[TraceRow] = field(default_factory=list)

    @property
    def mismatches(self) -> list[TraceRow]:
        return [r for r in self.rows if r.status != "ok"]

    def to_json(self) -> dict:
        return {"wiring": self.wiring.to_json(), "hidden_width": self.hidden_width,
                "promised_width": self.promised_width, "fc_applied": self.fc_applied,
                "rows": [r.to_json() for r in self.rows]}


def expected_input_widths(draft) -> dict[str, int]:
    """Last-dim input width each traced module should receive, from the config."""
    cfg, H = draft.cfg, draft.cfg.H
    widths = {"fc": draft.fc.in_features, "norm": H, "lm_head": H, "embed_tokens": None}
    for i in range(cfg.num_hidden_layers):
        attn_in = 2 * H if i == 0 else H
        for proj in ("q_proj", "k_proj", "v_proj"):
            widths[f"layers.{i}.self_attn.{proj}"] = attn_in
        widths[f"layers.{i}.self_attn.o_proj"] = cfg.num_attention_heads * cfg.head_dim
        widths[f"layers.{i}.mlp.gate_proj"] = H
        widths[f"layers.{i}.mlp.down_proj"] = cfg.intermediate_size
    return widths


@torch.no_grad()
def trace_shapes(draft, input_ids: torch.Tensor, hidden_states: torch.Tensor,
                 wiring: Wiring | None = None, position_ids=None) -> ShapeTrace:
    wiring = wiring or draft.wiring
    expected = expected_input_widths(draft)
    seen: list[TraceRow] = []
    hooks = []
    for name, module in draft.named_modules():
        if name in expected or name.endswith(("layernorm", "hidden_norm", "input_norm")):
            hooks.append(module.register_forward_hook(_recorder(name, expected.get(name), seen)))
    try:
        out = draft.run(input_ids, hidden_states, position_ids, wiring=wiring)
    finally:
        for h in hooks:
            h.remove()
    trace = ShapeTrace(wiring, hidden_states.shape[-1], draft.fc.in_features, out.fc_applied)
    trace.rows = [_input_row(trace, hidden_states)] + _with_fc_row(seen, trace, draft)
    return trace


def _recorder(name: str, want: int | None, rows: list[TraceRow]):
    def hook(module, args, output):
        shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
        got = shapes[0][-1] if shapes else None
        ok = want is None or got == want
        rows.append(TraceRow(name, shapes, list(output.shape) if isinstance(output, torch.Tensor)
                             else None, want, "ok" if ok else "mismatch",
                             "" if ok else f"receives {got}, the config promises {want}"))
    return hook


def _input_row(trace: ShapeTrace, hidden: torch.Tensor) -> TraceRow:
    ok = trace.hidden_width == trace.promised_width
    note = (f"source {trace.wiring.hidden_source}, layers {list(trace.wiring.layer_ids or [])}"
            if ok else f"{trace.hidden_width} wide, the draft was trained on {trace.promised_width}")
    return TraceRow("hidden_states (from the target)", [list(hidden.shape)], list(hidden.shape),
                    trace.promised_width, "ok" if ok else "mismatch", note)


def _with_fc_row(rows: list[TraceRow], trace: ShapeTrace, draft) -> list[TraceRow]:
    if trace.fc_applied:
        return rows
    skipped = TraceRow("fc", [], None, draft.fc.in_features, "skipped",
                       f"input is {trace.hidden_width} wide == hidden_size {draft.cfg.H}: the "
                       "engine rule skips fc silently, the layer sees an untransformed state")
    return [skipped] + rows
