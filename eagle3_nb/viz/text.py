"""Plain-text rendering of an inspection (its JSON form): read in ten seconds, errors first."""

from __future__ import annotations

import textwrap
from typing import Any

from eagle3_nb.findings import evidence_line, group_findings

VERDICT_TEXT = {"ok": "ok", "silent_failure": "SILENT FAILURE", "load_error": "LOAD ERROR"}
SEVERITY_TEXT = {"error": "ERROR", "warning": "warn", "info": "info"}


OVERALL_TEXT = {"ok": "ok", "ok_as_far_as_checked": "ok as far as checked (see NOT CHECKED)",
                "silent_failure": "SILENT FAILURE", "load_error": "LOAD ERROR"}


def inspection_table(data: dict[str, Any], width: int = 110, show_info: bool = True) -> str:
    lines = _header(data) + evidence_lines(data.get("evidence")) + _log_line(data.get("log"))
    lines += [""] + _engine_table(data) + [""]
    lines += _findings(data, width, show_info) + _unchecked(data) + _overall(data)
    return printable("\n".join(lines))


def evidence_lines(evidence: dict[str, str] | None) -> list[str]:
    """What the answer had, and the flag of what it did not (findings.evidence_line), wrapped."""
    return textwrap.wrap(evidence_line(evidence), 110, initial_indent="  ",
                         subsequent_indent=" " * 12, break_on_hyphens=False)


def _log_line(log: dict[str, Any] | None) -> list[str]:
    if not log:
        return []
    who = (f"{log['engine']} {log['version'] or '(release unknown)'}"
           if log["engine"] else "no engine recognised")
    return [f"  log: {log['source']}: {who} (release from {log['version_source']}); "
            f"{len(log['errors'])} exception(s)"]


def log_text(data: dict[str, Any], width: int = 110) -> str:
    """`eagle3-nb log`: what the engine's log says, errors first, then what it shows."""
    lines = [f"log: {data['read']}"] + evidence_lines(data.get("had"))
    who = data["engine"] or "no engine recognised"
    lines.append(f"  engine: {who}; release: {data['version'] or 'unknown'} "
                 f"({data['version_source']})")
    args = data.get("server_args")
    if args:
        shown = {k: args[k] for k in ("draft", "method", "num_steps", "topk", "num_draft_tokens",
                                      "tensor_parallel", "cuda_graphs", "attention_backend",
                                      "draft_attention_backend") if args.get(k) is not None}
        lines.append(f"  arguments ({args['source']}): {shown}")
    acc = data.get("acceptance")
    if acc:
        lines.append(f"  acceptance: accept length {acc.get('mean_accept_length')} "
                     f"({acc.get('source')})")
    lines += [""] + _findings({"findings": data["findings"], "engines": []}, width, True)
    for f in data["findings"]:  # the next step is under the finding (advice_lines)
        frames = f["evidence"].get("frames")
        if frames:
            lines.append(f"  {f['code']} line {f['evidence'].get('line')}: frames "
                         f"{' <- '.join(reversed(frames))}")
    for e in data.get("evidence") or []:
        lines.append(f"  line {e['line']}: {e['meaning']}")
    if data.get("ab_plan"):
        lines += ["", "A/B PLAN (change one at a time; if the crash goes away, it was what the "
                      "setting rules out):"]
        lines += [f"  {i}. {t['setting']}: rules out {t['rules_out']} ({t['releases']})"
                  for i, t in enumerate(data["ab_plan"], 1)]
    return printable("\n".join(lines))


def _unchecked(data: dict[str, Any]) -> list[str]:
    items = data.get("unchecked") or []
    if not items:
        return []
    return ["", "NOT CHECKED:"] + [f"  {i['what']}: {i['why']} ({i['how']})" for i in items]


def _overall(data: dict[str, Any]) -> list[str]:
    overall = data.get("overall")
    if overall is None:
        return []
    names = ", ".join(f"{e['profile']} [{e['covers']}]" for e in data["engines"])
    return ["", f"VERDICT: {OVERALL_TEXT.get(overall, overall)}; engines: {names}"]


def printable(text: str) -> str:
    """Key names and config strings come from untrusted checkpoints: never let them send
    terminal control sequences."""
    return "".join(c if c == "\n" or c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def _header(data: dict[str, Any]) -> list[str]:
    cfg = data["config"]
    layout = data["layout"] + (f" (prefix {', '.join(data['layout_prefixes'])})"
                               if data["layout_prefixes"] else "")
    target = data.get("target")
    tgt = (f"target: {target['num_hidden_layers']} layers, {target['family']} family"
           if target else "target: unknown (pass --target-config to resolve layer ids)")
    return [f"checkpoint: {data['checkpoint']}",
            f"  {data['format']}, {len(data['tensors'])} tensors, keys: {layout}, config: "
            f"{cfg['dialect']} {cfg['architectures'][:1]}",
            f"  H={cfg['hidden_size']} layers={cfg['num_hidden_layers']} aux={cfg['num_aux']} "
            f"vocab draft/target={cfg['draft_vocab_size']['value']}/{cfg['vocab_size']}; {tgt}"]


def _engine_table(data: dict[str, Any]) -> list[str]:
    rows = [("ENGINE", "VERDICT", "FC IN eng/ckpt", "AUX hidden_states (source)", "DROPPED",
             "UNLOADED")]
    for e in data["engines"]:
        fates = [k["fate"] for k in e["keys"]]
        aux = e["aux_layers"]
        ids = "final-norm" if not aux["use_aux_hidden_state"] else (aux["ids"] or "[2, L//2, L-3]")
        fc = e["fc_input_width"]
        rows.append((e["profile"], VERDICT_TEXT[e["verdict"]], f"{fc['engine']}/{fc['checkpoint']}",
                     f"{ids} ({aux['source']})", str(fates.count("dropped")),
                     str(len(e["unloaded_params"]))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _findings(data: dict[str, Any], width: int, show_info: bool) -> list[str]:
    counts = {s: sum(f["severity"] == s for f in data["findings"]) for s in SEVERITY_TEXT}
    out = [f"FINDINGS: {counts['error']} error(s), {counts['warning']} warning(s), "
           f"{counts['info']} info (identical findings of several engines shown once)"]
    for g in group_findings(data["findings"]):
        if g["severity"] == "info" and not show_info:
            continue
        engines = g["engines"]
        who = "all" if engines == [None] else _engine_list(engines, len(data["engines"]))
        out.extend(textwrap.wrap(f"{SEVERITY_TEXT[g['severity']]:5} {g['code']:<20} {who}: "
                                 f"{g['message']}", width, initial_indent="  ",
                                 subsequent_indent=" " * 29))
        out.extend(advice_lines(g["members"], width, 29))
    return out


def advice_lines(findings: dict[str, Any] | list[dict[str, Any]], width: int = 110,
                 indent: int = 8) -> list[str]:
    """The next step and the command that takes it (engines.advice.with_advice put them in
    each finding) under a finding, or under a group of identical ones of several engines: the
    last one's step (the newest release's), every distinct command; nothing when they carry
    neither."""
    group = findings if isinstance(findings, list) else [findings]
    pad, step = " " * indent, group[-1].get("next_step")
    out = textwrap.wrap(f"next: {step}", width, initial_indent=pad,
                        subsequent_indent=pad + "      ") if step else []
    commands = dict.fromkeys(f["command"] for f in group if f.get("command"))
    return out + [f"{pad}  $ {c}" for c in commands]  # never wrapped: copied as they stand


def _engine_list(engines: list[str], n_total: int) -> str:
    if len(engines) == n_total and n_total > 1:
        return "every engine"
    return ", ".join(engines)


def vocab_text(data: dict[str, Any]) -> str:
    valid = {True: "valid for every engine", False: "NOT valid", None: "undecided"}[data["valid"]]
    lines = [f"checkpoint: {data['checkpoint']}"] + evidence_lines(data.get("had"))
    lines += [f"d2t format: {data['format'].upper()} ({valid}); draft vocab "
              f"{data['draft_vocab_size']} -> target vocab {data['target_vocab_size']}"]
    lines += [f"  evidence: {e}" for e in data["evidence"]]
    lines += [f"  problem:  {p}" for p in data["problems"]]
    for e in data["engines"]:
        wrong = "unknown" if e["n_wrong"] is None else e["n_wrong"]
        lines.append(f"  {e['profile']:<16} {e['param']:<22} wrong targets: {wrong}, "
                     f"out of range: {e['n_out_of_range']}")
    if data.get("coverage"):
        cov = data["coverage"]
        shown = cov["intended"] if cov["intended"] is not None else cov["as_engines_read_it"]
        lines.append(f"  coverage: {shown:.1%} of {cov['n_tokens']} corpus tokens are in the draft vocab")
    for f in data["findings"]:
        lines.extend(textwrap.wrap(f"{SEVERITY_TEXT[f['severity']]:5} {f['code']}: {f['message']}",
                                   110, initial_indent="  ", subsequent_indent="        "))
        lines.extend(advice_lines(f))
    return printable("\n".join(lines))


def diff_text(data: dict[str, Any]) -> str:
    """eagle3-nb diff as text: findings first, then what differs, side by side."""
    lines = [f"good:  {data['good']}", f"other: {data['other']}"]
    lines += evidence_lines(data.get("had")) + [""]
    for f in data["findings"]:
        lines.append(f"  {SEVERITY_TEXT[f['severity']]} {f['code']}: {f['message']}")
        lines.extend(advice_lines(f))
    if not data["findings"]:
        lines.append("  no difference that changes what an engine builds or serves")
    lines += ["", "VERDICTS"] + [f"  {v['profile']:<20} {v['good']:<16} -> {v['other']}"
                                 for v in data["verdicts"]]
    changed = [r for r in data["tensors"] if r["status"] != "same"]
    lines += ["", f"TENSORS ({len(changed)} of {len(data['tensors'])} differ)"]
    for r in changed:
        g, o = r["good"] or {}, r["other"] or {}
        lines.append(f"  {r['name']:<44} {r['status']:<14} {g.get('shape')} {g.get('dtype')} "
                     f"norm {_num(g.get('norm'))} -> {o.get('shape')} {o.get('dtype')} "
                     f"norm {_num(o.get('norm'))}")
    if data["config"]:
        lines += ["", "CONFIG"] + [f"  {r['field']:<28} {r['good']} -> {r['other']}"
                                   for r in data["config"]]
    if data["vocab"]:
        lines += ["", f"D2T  {data['vocab']['good']} -> {data['vocab']['other']}"]
    return printable("\n".join(lines))


def _num(v) -> str:
    return "-" if v is None else f"{v:.4g}"
