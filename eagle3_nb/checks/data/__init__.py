"""Was the draft trained on what it is served? (`eagle3-nb data`, notebook 05)

One streamed pass over the training rows (bounded by max_rows) feeds checks 1-5, 7, 8 and 10;
checks 6 and 9 (policy.py) read hidden-state dumps or run the target and import torch. Formats
and the trainer code they come from: docs/training-data.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any, Iterator

from eagle3_nb.checks.data.judge import (coverage_findings, mask_findings, policy_findings,
                                         reasoning_findings, scale_findings, template_findings,
                                         truncation_findings)
from eagle3_nb.checks.data.render import (ChatTemplate, has_think_marker, served_completions,
                                          specforge_mask, specforge_render, trainer_template)
from eagle3_nb.checks.data.scan import Sample, Scan
from eagle3_nb.checks.result import JsonResult
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import SUMMARY_VERSION, given, sort_findings
from eagle3_nb.io.training_data import (TrainConfig, TrainingFiles, discover, iter_rows,
                                        newest_mtime, read_train_config, unread_next_step)

SPECFORGE_MAX_LENGTH = 2048   # specforge/config/schema.py DataConfig.max_length default
BATCH = 512                   # conversations rendered, then tokenised together (encode_batch)


def _tokenizer(tokenizer, target):
    from eagle3_nb.vocab import load_tokenizer

    source = tokenizer or (target if target and (Path(target) / "tokenizer.json").is_file()
                           else None)
    return (load_tokenizer(source), Path(source)) if source else (None, None)


def _template_source(chat_template, tok_path: Path | None) -> str | None:
    if chat_template:
        p = Path(chat_template)
        if not p.is_file():
            raise Eagle3NbError("chat template file not found", str(p),
                                "pass the target's chat template (.jinja)")
        return p.read_text(encoding="utf-8")
    if tok_path is not None:
        cfg = (tok_path if tok_path.is_dir() else tok_path.parent) / "tokenizer_config.json"
        if cfg.is_file():
            template = json.loads(cfg.read_text(encoding="utf-8")).get("chat_template")
            return template if isinstance(template, str) else None
    return None


def _draft(draft) -> dict[str, Any] | None:
    if not draft:
        return None
    from eagle3_nb.io.checkpoint import open_once
    from eagle3_nb.vocab import VocabMapping

    ckpt = open_once(draft)
    cfg = ckpt.config
    return {"path": str(draft), "config": cfg, "mapping": VocabMapping.from_checkpoint(ckpt, cfg),
            "max_position_embeddings": cfg.max_position_embeddings.value}


def _target_context(target) -> int | None:
    if not target:
        return None
    from eagle3_nb.config import parse_target_config

    path = Path(target) / "config.json" if Path(target).is_dir() else Path(target)
    if not path.is_file():
        raise Eagle3NbError("no config.json", str(path), "pass the target model's directory")
    return parse_target_config(json.loads(path.read_text(encoding="utf-8")),
                               str(path)).max_position_embeddings


class _Budget:
    """Rows left to read (--max-rows) and whether the bound cut the pass short."""

    def __init__(self, max_rows: int | None, bar):
        self.max_rows, self.left, self.bounded, self.bar = max_rows, max_rows, False, bar

    def take(self) -> bool:
        if self.left is not None:
            if self.left <= 0:
                self.bounded = True
                return False
            self.left -= 1
        if self.bar is not None:
            self.bar.update(1)
        return True


def _rows(paths: list[Path], budget: _Budget) -> Iterator:
    for path in paths:
        for row in iter_rows(path):
            if not budget.take():
                return
            yield row


def iter_samples(files: TrainingFiles, scan: Scan, template: ChatTemplate | None, budget: _Budget,
                 emulate_length: int) -> Iterator[Sample]:
    """Token rows as stored (paired in order with a conversations file beside them, as
    SpecForge keeps its rows in order); conversations alone tokenised as SpecForge would."""
    if files.tokens:
        convs = iter_rows_all(files.conversations)
        for row in _rows(files.tokens, budget):
            conv = next(convs, None) if convs is not None else None
            if conv is not None:
                row.conversation, row.status, row.has_status = \
                    conv.conversation, conv.status, conv.has_status
            scan.add_row(row)
            yield Sample(row.input_ids, row.loss_mask, row)
        return
    ready = scan.trainer is not None and scan.tokenizer is not None and template is not None
    rows = _rows(files.conversations, budget)
    batches = iter(lambda: list(islice(rows, BATCH)), [])
    yield from _emulated(batches, scan, template if ready else None, emulate_length)


def _emulated(batches: Iterator[list], scan: Scan, template: ChatTemplate | None,
              max_length: int) -> Iterator[Sample]:
    """Batches of conversation rows tokenised as SpecForge does. encode_batch releases the
    GIL, so each batch is tokenised in a thread while the one before it is checked."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pending = None
        for batch in batches:
            rendered = _rendered(batch, scan, template)
            job = batch, rendered, pool.submit(_encode, scan.tokenizer, rendered)
            if pending is not None:
                yield from _masked(*pending, scan, max_length)
            pending = job
        if pending is not None:
            yield from _masked(*pending, scan, max_length)


def _rendered(batch: list, scan: Scan, template: ChatTemplate | None) -> dict[int, tuple]:
    if template is None:
        return {}
    return {i: specforge_render(row.conversation, scan.trainer, template)
            for i, row in enumerate(batch) if row.conversation}


def _encode(tokenizer, rendered: dict[int, tuple]) -> dict[int, Any]:
    order = list(rendered)
    encs = tokenizer.encode_batch([rendered[i][0] for i in order],
                                  add_special_tokens=False) if order else []
    return dict(zip(order, encs))


def _masked(batch: list, rendered: dict[int, tuple], encoding, scan: Scan, max_length: int
            ) -> Iterator[Sample]:
    for row in batch:
        scan.add_row(row)
    encoded = encoding.result()
    for i, row in enumerate(batch):
        if i not in encoded:
            yield Sample(None, None, row)
            continue
        text, parsed = rendered[i]
        ids, mask, cut = specforge_mask(text, encoded[i], scan.trainer, max_length,
                                        scan.last_turn_only)
        yield Sample(ids, mask, row, cut, parsed, text)


def iter_rows_all(paths: list[Path]):
    return chain.from_iterable(iter_rows(p) for p in paths) if paths else None


def _served_think(template: ChatTemplate | None) -> bool | None:
    """Whether an answer the served target writes contains think markers (a probe turn)."""
    if template is None:
        return None
    conv = [{"role": "user", "content": "\x01U"}, {"role": "assistant", "content": "\x01A"}]
    done = served_completions(template, conv)
    return bool(done and done[0] is not None and has_think_marker(done[0]))


@dataclass(frozen=True)
class DataCheck(JsonResult):
    """The answer of `eagle3-nb data` and notebook 05 (`data`, its JSON form); its
    summary.json part holds the findings and the key numbers."""
    kind = "data"
    notebook = "05_training_data"

    def summary_body(self) -> dict[str, Any]:
        data = self.data
        return {"path": data["path"], "stats": {k: data["stats"][k] for k in (
                    "rows", "token_rows", "supervised_tokens", "supervised_share", "empty_rows")},
                "vocab": data["vocab"], "policy": data.get("policy"), "dumps": data.get("dumps"),
                "findings": data["findings"],
                "bounded_by_max_rows": data["bounded_by_max_rows"], "had": data.get("had")}


def check_data(path: str | Path, tokenizer: str | Path | None = None, template: str | None = None,
               chat_template: str | Path | None = None, serve_thinking: bool | None = None,
               draft: str | Path | None = None, target: str | Path | None = None,
               prompts: str | Path | None = None, max_rows: int | None = None,
               max_length: int | None = None, serve_context: int | None = None,
               config: str | Path | None = None, progress: bool = False,
               hidden_states: str | Path | None = None, run_target: bool = False
               ) -> DataCheck:
    """Checks 1-5, 7, 8 and 10 on a training-data file or directory (no torch); with
    hidden_states (dumps) checks 9 and 6 (6 needs the target's directory for its head), with
    run_target check 6 by running a small local target on the rows (both import torch)."""
    files = discover(path)
    cfg = read_train_config(config or (files.configs[0] if files.configs else None))
    tok, tok_path = _tokenizer(tokenizer, target)
    source = _template_source(chat_template, tok_path)
    served = ChatTemplate(source, serve_thinking) if source else None
    name = template or cfg.chat_template
    scan = Scan(tokenizer=tok, served=served, trainer=trainer_template(name) if name else None,
                markers=served.markers() if served else {}, served_think=_served_think(served),
                max_length=max_length or cfg.max_length or (SPECFORGE_MAX_LENGTH if files
                                                            .conversations and not files.tokens
                                                            else None),
                last_turn_only=cfg.train_only_last_turn)
    drafted = _draft(draft)
    bar = _progress_bar(progress)
    budget = _Budget(max_rows, bar)
    keep = [] if hidden_states or run_target else None
    try:
        for sample in iter_samples(files, scan, served, budget, scan.max_length or
                                   SPECFORGE_MAX_LENGTH):
            scan.add_sample(sample)
            if keep is not None and sample.ids is not None:
                keep.append((sample.ids, sample.mask))
    finally:
        if bar is not None:
            bar.close()
    result = _result(files, cfg, scan, drafted, budget, serve_thinking,
                     serve_context or _target_context(target), prompts, name, source is not None)
    result["had"] = {  # each can change an answer above; the flag that supplies it
        "training data": "given", "training config": given(config or files.configs, "--config"),
        "tokenizer": given(tok is not None, "--tokenizer or --target"),
        "served chat template": given(source, "--chat-template"),
        "trainer template": given(name, "--template"), "draft": given(draft, "--draft"),
        "target": given(target, "--target"), "serving prompts": given(prompts, "--prompts"),
        "training dumps": given(hidden_states, "--hidden-states")}
    if keep is not None:
        _policy(result, keep, scan, drafted, target, hidden_states, run_target)
    return DataCheck(result)


def _policy(result: dict[str, Any], rows, scan: Scan, drafted, target, hidden_states,
            run_target: bool) -> None:
    """Checks 9 and 6 into RESULT (torch)."""
    from eagle3_nb.checks.data.policy import dump_findings, policy_on_dumps, policy_on_target
    from eagle3_nb.findings import Finding

    eot = scan.markers.get("end_of_turn", "")
    tail = scan.tokenizer.encode(eot, add_special_tokens=False).ids \
        if eot and scan.tokenizer is not None else []
    found: list[Finding] = []
    policy: dict[str, Any] = {"agreement": None}
    if hidden_states:
        from eagle3_nb.target import read_dump

        samples = read_dump(hidden_states)
        samples = samples if isinstance(samples, list) else [samples]
        result["dumps"], more = dump_findings(samples, rows, drafted["config"].num_aux
                                              if drafted else None)
        found += more
        if target:
            policy = policy_on_dumps(samples, rows, target, tail)
    if run_target and target and policy["agreement"] is None:
        policy = policy_on_target(rows, target, tail)
    result["policy"] = policy
    found += policy_findings(policy, dict(scan.status))
    merged = [Finding(**{k: f[k] for k in ("code", "severity", "message", "evidence")})
              for f in result["findings"] if f["code"] != "TRAIN_DATA_OFF_POLICY"] + found
    result["findings"] = [f.to_json() for f in sort_findings(merged)]


def _progress_bar(progress: bool):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(desc="rows", unit=" rows", leave=False)


def _result(files: TrainingFiles, cfg: TrainConfig, scan: Scan, drafted, budget: _Budget,
            serve_thinking, serve_context, prompts, trainer_name, has_template) -> dict[str, Any]:
    from eagle3_nb.checks.data.mapping import vocab_checks

    findings = (template_findings(scan, serve_thinking) + mask_findings(scan)
                + coverage_findings(scan)
                + truncation_findings(scan, drafted and drafted["max_position_embeddings"],
                                      serve_context)
                + scale_findings(scan, cfg.num_epochs, cfg.max_steps)
                + reasoning_findings(scan, serve_thinking,
                                     scan.served.has_thinking_switch if scan.served else None)
                + policy_findings({"agreement": None}, dict(scan.status)))
    vocab, vocab_findings = vocab_checks(files, scan, drafted, prompts)
    skipped = _skipped(scan, has_template, trainer_name, files)
    return {"kind": "data", "summary_version": SUMMARY_VERSION, "path": str(files.root),
            "files": files.to_json(), "rows_read": scan.rows, "max_rows": budget.max_rows,
            "bounded_by_max_rows": budget.bounded,
            "config": {k: v for k, v in vars(cfg).items() if v not in (None, False)},
            "inputs": {"tokenizer": scan.tokenizer is not None, "chat_template": has_template,
                       "trainer_template": trainer_name, "serve_thinking": serve_thinking,
                       "draft": drafted["path"] if drafted else None,
                       "serving_context": serve_context, "prompts": str(prompts) if prompts
                       else None},
            "stats": _stats(scan), "vocab": vocab, "skipped": skipped,
            "data_mtime": newest_mtime(files.data_files()),
            "findings": [f.to_json() for f in sort_findings(findings + vocab_findings)]}


def _stats(s: Scan) -> dict[str, Any]:
    return {"rows": s.rows, "conversations": s.conversations, "token_rows": s.token_rows,
            "tokens": s.tokens, "supervised_tokens": s.supervised,
            "supervised_share": s.supervised / s.tokens if s.tokens else None,
            "empty_rows": s.empty, "assistant_turns": s.assistant_turns,
            "turns_covered": s.turns_covered, "status": dict(s.status),
            "spans": s.spans, "bad_starts": s.bad_starts, "bad_ends": s.bad_ends,
            "header_missing": s.header_missing, "end_of_turn_missing": s.eot_missing,
            "max_length": s.max_length, "at_max_length": s.at_max_length,
            "rows_cut": s.rows_cut, "tokens_cut": s.tokens_cut,
            "think_supervised": s.think_supervised, "think_missing": s.think_missing,
            "rerendered": s.rerendered, "rerender_equal": s.rerender_equal,
            "reasoning_turns": s.reasoning_turns, "content_markers": s.content_markers,
            "markers": s.markers,
            "span_edges": [{"before": a, "first": b, "last": c, "after": d, "count": n}
                           for (a, b, c, d), n in s.edges.most_common(5)],
            "examples": s.examples}


def _skipped(scan: Scan, has_template: bool, trainer_name, files: TrainingFiles) -> list[str]:
    out = []
    if scan.tokenizer is None:
        out.append("template, mask edges and vocab checks need --tokenizer (or --target)")
    if not has_template:
        out.append("the served template (check 1) needs --chat-template or a tokenizer_config."
                   "json with chat_template")
    if files.conversations and not files.tokens and not trainer_name:
        out.append("conversations are tokenised as the trainer does only with --template NAME "
                   "or a training config naming data.chat_template")
    if scan.max_length is None:
        out.append("truncation (check 4) needs --max-length or the training config")
    if files.unread:
        out.append(f"{len(files.unread)} dataset file(s) not read: {unread_next_step(files)}")
    caches = [p for p in files.tokens if p.suffix == ".pkl"]
    if len(caches) > 1:   # SpecForge names each cache by its run's settings (its cache key)
        out.append(f"which of the {len(caches)} SpecForge dataset caches is the run's: each is "
                   "one preprocessing setting (template, max_length, ...), and all were read "
                   "together; pass the one file of the run in question")
    return out


def check_data_parameters(train_data: str, tokenizer: str = "", chat_template: str = "",
                          template: str = "", serve_thinking: str = "", checkpoint: str = "",
                          target: str = "", prompts: str = "", max_rows: int = 0,
                          hidden_states: str = "", run_target: bool = False) -> DataCheck:
    """check_data from a notebook's string parameters: "" is none, serve_thinking on|off|"",
    max_rows 0 is every row."""
    modes = {"on": True, "off": False, "": None}
    if serve_thinking not in modes:
        raise Eagle3NbError(f"serve_thinking is {serve_thinking!r}", "serve_thinking",
                            "use on, off or an empty string (the template's default)")
    return check_data(train_data, tokenizer or None, template or None, chat_template or None,
                      modes[serve_thinking], checkpoint or None, target or None, prompts or None,
                      max_rows or None, hidden_states=hidden_states or None,
                      run_target=run_target)
