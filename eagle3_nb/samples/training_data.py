"""data_samples/training/: small training sets for the bundled tokenizer and target, good and
broken, for `eagle3-nb data` and notebook 05 (formats: docs/training-data.md).

User turns are the first lines of the bundled code prompts; on-policy answers are the target's
own greedy continuation of the served prompt (as a temperature-0 regeneration makes them);
original answers are the human-written lines that followed in the source. The target is served
non-thinking through a chat template with a thinking switch, as Qwen3's has.

    chat_template.jinja   the target's template (enable_thinking switch)
    specforge/            regenerated conversations, a SpecForge YAML (qwen3-instruct) and the
                          vocab mapping built from them: good
    speculators/          token rows of the same answers, as a regeneration writes them: good
    speculators-arrow/    the same rows as speculators' prepare_data.py saves them
                          (Dataset.save_to_disk: an Arrow stream shard, state.json,
                          dataset_info.json): good
    empty-masks-arrow/    SpecForge's build_eagle3_dataset map cache ({cache_key}.pkl, an Arrow
                          stream) of the conversations tokenised with llama3: every mask empty
    thinking-template/    token rows made with qwen3-thinking: think markers supervised
    empty-masks/          a YAML naming llama3 headers: no assistant span found
    dropped-rows/         rows marked error/skipped, a leading assistant turn, a role-order break
    truncated/            max_length 176: most answers cut
    reasoning-mismatch/   reasoning_content and think markers in content, served non-thinking
    stale-mapping/        a vocab_mapping .pt built from other token counts
    off-policy/           token rows with the original (human-written) answers
    dumps-mismatched/     an hs_0.safetensors whose token ids, slot count and values disagree
    serving_prose.jsonl   serving prompts of another domain (Chinese prose)
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from eagle3_nb.checks.data.render import ChatTemplate, specforge_tokens, trainer_template
from eagle3_nb.target import TargetModel
from eagle3_nb.vocab import load_tokenizer

N_ROWS, ANSWER_TOKENS, USER_CHARS = 12, 24, 160
GOOD_YAML = {"chat_template": "qwen3-instruct", "max_length": 256, "num_epochs": 10}

CHAT_TEMPLATE = """{%- for message in messages %}
{%- if message.role == 'assistant' %}
{%- set reasoning = message.reasoning_content or '' %}
{%- if loop.last or reasoning %}
{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + message.content + '<|im_end|>\\n' }}
{%- else %}
{{- '<|im_start|>assistant\\n' + message.content + '<|im_end|>\\n' }}
{%- endif %}
{%- else %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<think>\\n\\n</think>\\n\\n' }}
{%- endif %}
{%- endif %}
"""

# Serving prompts of another domain and script: Chinese questions (as in SafeAILab/EAGLE#179,
# Chinese prompts on a draft trained on English data).
PROSE = ["请用三句话总结印刷术的历史。", "写一封简短友好的邮件，婉拒会议邀请。",
         "用青少年能听懂的话解释通货膨胀的主要原因。", "像诗人一样描写海上的日落。",
         "列出五条改善睡眠的建议，并说明理由。"]


def _split(prompt: str) -> tuple[str, str]:
    """(user turn, the human-written lines that followed it)."""
    lines = prompt[:2 * USER_CHARS].splitlines(keepends=True)
    head = max(2, len(lines) // 2)
    return "".join(lines[:head]).rstrip("\n"), "".join(lines[head:]).rstrip("\n")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n"
                                 for r in rows), encoding="utf-8")


def _yaml(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("data:\n  train_data_path: train.jsonl\n" + "".join(
        f"  {k}: {v}\n" for k, v in data.items() if k != "num_epochs") +
        f"training:\n  num_epochs: {data['num_epochs']}\n  batch_size: 1\n", encoding="utf-8")


ANSWERS = "answers.json"   # the target's greedy answers: written by `--train` (write_answers)


def write_answers(data_dir: Path) -> None:
    """The target's greedy answers to the served user turns, as token ids, into
    data_dir/training/answers.json (the trained part: it needs the target; the fast build reads
    it)."""
    data_dir = Path(data_dir)
    target = TargetModel.load(data_dir / "target")
    b = _Builder(data_dir, {})
    answers = []
    for user, _ in b.pairs:
        with torch.no_grad():
            new = target.greedy_generate(torch.tensor(b.prompt_ids(user)), ANSWER_TOKENS)
        answers.append(new.tolist())
    out = data_dir / "training" / ANSWERS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"answer_ids": answers}) + "\n", encoding="utf-8")


class _Builder:
    def __init__(self, trained_dir: Path, answers: dict):
        self.tok = load_tokenizer(trained_dir / "target")
        self.served = ChatTemplate(CHAT_TEMPLATE, thinking=False)
        prompts = [json.loads(line)["prompt"] for line in
                   (trained_dir / "prompts.jsonl").read_text(encoding="utf-8").splitlines()]
        self.pairs = [_split(p) for p in prompts[:N_ROWS]]
        self.answers = answers.get("answer_ids", [])

    def prompt_ids(self, user: str) -> list[int]:
        prompt = self.served.render([{"role": "user", "content": user}], generation_prompt=True)
        return self.tok.encode(prompt, add_special_tokens=False).ids

    def rows(self) -> tuple[list[dict], list[dict], list[dict]]:
        """(regenerated conversations, on-policy token rows, original-answer token rows)."""
        eot = self.tok.encode("<|im_end|>\n", add_special_tokens=False).ids
        convs, on, off = [], [], []
        for i, ((user, original), answer) in enumerate(zip(self.pairs, self.answers)):
            prompt = self.prompt_ids(user)
            text = self.tok.decode(answer)
            convs.append({"id": f"row-{i}", "status": "success", "conversations": [
                {"role": "user", "content": user}, {"role": "assistant", "content": text}]})
            on.append(_token_row(prompt, answer + eot))
            orig = self.tok.encode(original, add_special_tokens=False).ids[:ANSWER_TOKENS]
            off.append(_token_row(prompt, orig + eot))
        return convs, on, off


def _token_row(prompt: list[int], answer: list[int]) -> dict:
    return {"input_ids": prompt + answer, "loss_mask": [0] * len(prompt) + [1] * len(answer),
            "seq_len": len(prompt) + len(answer)}


def _specforge_rows(b: _Builder, convs: list[dict], template: str, max_length: int) -> list[dict]:
    trainer = trainer_template(template)
    out = []
    for row in convs:
        ids, mask, *_ = specforge_tokens(row["conversations"], trainer, b.served, b.tok,
                                           max_length)
        out.append({"input_ids": ids, "loss_mask": mask, "attention_mask": [1] * len(ids)})
    return out


def build_training_data(out_dir: Path, trained_dir: Path) -> None:
    """Write out_dir/training/ (rebuilt from scratch) from trained_dir's target and prompts."""
    root = Path(out_dir) / "training"
    answers = Path(trained_dir) / "training" / ANSWERS
    if not answers.is_file():
        return  # no trained target yet: `python -m eagle3_nb.samples --train` writes it
    b = _Builder(Path(trained_dir), json.loads(answers.read_text(encoding="utf-8")))
    for old in (root.iterdir() if root.exists() else ()):
        if old.name != ANSWERS:
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    root.mkdir(parents=True, exist_ok=True)
    (root / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    convs, on, off = b.rows()
    _jsonl(root / "specforge" / "train.jsonl", convs)
    _yaml(root / "specforge" / "config.yaml", GOOD_YAML)
    _fresh_mapping(root / "specforge", _specforge_rows(b, convs, "qwen3-instruct", 256))
    _jsonl(root / "speculators" / "data.jsonl", on)
    _saved_dataset(root / "speculators-arrow", on)
    _jsonl(root / "off-policy" / "data.jsonl", off)
    _broken_variants(root, b, convs, on)


def _broken_variants(root: Path, b: _Builder, convs: list[dict], on: list[dict]) -> None:
    d = root / "thinking-template"
    _jsonl(d / "train.jsonl", convs)
    _jsonl(d / "tokens.jsonl", _specforge_rows(b, convs, "qwen3-thinking", 256))
    _yaml(d / "config.yaml", {**GOOD_YAML, "chat_template": "qwen3-thinking"})
    _jsonl(root / "empty-masks" / "train.jsonl", convs)
    _yaml(root / "empty-masks" / "config.yaml", {**GOOD_YAML, "chat_template": "llama3"})
    _specforge_cache(root / "empty-masks-arrow", _specforge_rows(b, convs, "llama3", 256),
                     {"path": "train.jsonl", "max_length": 256, "chat_template": "llama3"})
    _jsonl(root / "truncated" / "train.jsonl", convs)
    _yaml(root / "truncated" / "config.yaml", {**GOOD_YAML, "max_length": 176})
    _jsonl(root / "dropped-rows" / "train.jsonl", _dropped(convs))
    _yaml(root / "dropped-rows" / "config.yaml", GOOD_YAML)
    _jsonl(root / "reasoning-mismatch" / "train.jsonl", _reasoning(convs))
    _yaml(root / "reasoning-mismatch" / "config.yaml", GOOD_YAML)
    _stale_mapping(root / "stale-mapping", convs, on)
    _mismatched_dump(root / "dumps-mismatched", b)
    _jsonl(root / "serving_prose.jsonl", [{"prompt": p} for p in PROSE])


def _fresh_mapping(d: Path, rows: list[dict], vocab: int = 512, draft: int = 256) -> None:
    """SpecForge's vocab_mapping .pt built from these rows' supervised tokens, by the trainers'
    rule (top draft ids by count then id, padded with the lowest unseen ids, sorted)."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for r in rows:
        for i, m in zip(r["input_ids"], r["loss_mask"]):
            counts[i] += m
    order = sorted(range(vocab), key=lambda i: (-int(counts[i]), i))
    ids = torch.tensor(sorted(order[:draft]))
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    (d / "vocab_mapping").mkdir(parents=True)
    torch.save({"d2t": ids - torch.arange(draft), "t2d": t2d},
               d / "vocab_mapping" / "vocab_mapping.pt")


def _dropped(convs: list[dict]) -> list[dict]:
    rows = [json.loads(json.dumps(r)) for r in convs[:8]]
    rows[1].update(status="error", error="Data starts with an assistant message")
    rows[2].update(status="skipped", error="Non-reasoning assistant response is empty or "
                   "contains a thinking marker")
    rows[3]["conversations"].insert(0, {"role": "assistant", "content": "Hello."})
    rows[4]["conversations"].append({"role": "assistant", "content": "And then?"})
    return rows


def _reasoning(convs: list[dict]) -> list[dict]:
    rows = [json.loads(json.dumps(r)) for r in convs[:8]]
    for r in rows[:4]:
        r["conversations"][1]["reasoning_content"] = "The user wants the function body."
    for r in rows[4:6]:
        turn = r["conversations"][1]
        turn["content"] = "<think>\nwrite the body\n</think>\n\n" + turn["content"]
    return rows


def _stale_mapping(d: Path, convs: list[dict], rows: list[dict]) -> None:
    """The same conversations, and a SpecForge {d2t, t2d} mapping built from other data's
    counts: it keeps the highest target ids that this data never supervises."""
    _jsonl(d / "train.jsonl", convs)
    _yaml(d / "config.yaml", GOOD_YAML)
    vocab, draft = 512, 256
    seen = {i for r in rows for i, m in zip(r["input_ids"], r["loss_mask"]) if m}
    ids = torch.tensor(sorted([i for i in range(vocab - 1, -1, -1) if i not in seen][:draft]))
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    (d / "vocab_mapping").mkdir(parents=True)
    torch.save({"d2t": ids - torch.arange(draft), "t2d": t2d},
               d / "vocab_mapping" / "vocab_mapping.pt")


def _mismatched_dump(d: Path, b: _Builder) -> None:
    """speculators' hs_0.safetensors for 12 tokens of the first on-policy row, with one token id
    changed, 2 aux slots + the last layer (the config's ids are 3), and one NaN. The states are
    seeded noise: this variant is about agreement, not values."""
    prompt = b.prompt_ids(b.pairs[0][0])
    ids = torch.tensor((prompt + b.answers[0])[len(prompt) - 6:len(prompt) + 6])
    _jsonl(d / "data.jsonl", [{"input_ids": ids.tolist(), "loss_mask": [0] * 6 + [1] * 6}])
    gen = torch.Generator().manual_seed(0)
    states = torch.randn(len(ids), 3, 64, generator=gen).to(torch.bfloat16)
    states[3, 0, 5] = float("nan")
    bad = ids.clone()
    bad[6] = (bad[6] + 1) % 512
    save_file({"hidden_states": states.contiguous(), "token_ids": bad}, str(d / "hs_0.safetensors"))


# ----------------------------------------------------------------------------- Arrow, as datasets
# 5.0.1 writes it: `arrow_writer.py` `ArrowWriter` (an IPC stream, schema metadata "huggingface",
# input_ids int32 and attention_mask int8 by `OptimizedTypedSequence`), `arrow_dataset.py`
# `Dataset.save_to_disk` (state.json, dataset_info.json). eagle3_nb/io/training_arrow.py cites
# the trainers' side.

def _value(dtype: str) -> dict:
    return {"dtype": dtype, "_type": "Value"}


def _list(feature: dict) -> dict:
    return {"feature": feature, "_type": "List"}


def _arrow_stream(path: Path, columns: dict[str, tuple[dict, list]], fingerprint: str | None
                  ) -> int:
    """Write columns {name: (datasets feature, values)} as ArrowWriter does; returns the
    table's nbytes (dataset_info's num_bytes)."""
    import pyarrow as pa

    types = {"Value": lambda f: getattr(pa, f["dtype"])(),
             "List": lambda f: pa.list_(to_type(f["feature"]))}

    def to_type(feature: dict):
        return types[feature["_type"]](feature)

    meta: dict = {"info": {"features": {k: f for k, (f, _) in columns.items()}}}
    if fingerprint is not None:
        meta["fingerprint"] = fingerprint
    table = pa.table({k: pa.array(v, to_type(f)) for k, (f, v) in columns.items()})
    table = table.replace_schema_metadata({"huggingface": json.dumps(meta)})
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.RecordBatchStreamWriter(sink, table.schema) as w:
        w.write_table(table, 1000)   # config.DEFAULT_MAX_BATCH_SIZE rows per batch
    return table.nbytes


def _fingerprint(rows: list[dict]) -> str:
    """16 hex digits, as datasets' fingerprints are; here a hash of the rows (reproducible)."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def _saved_dataset(d: Path, rows: list[dict]) -> None:
    """speculators `scripts/prepare_data.py` `main`: `dataset.save_to_disk(--output)` of
    `_append_row`'s rows (input_ids, loss_mask as torch.long, seq_len) after
    `set_format(type="torch")`; one shard."""
    shard = "data-00000-of-00001.arrow"
    features = {"input_ids": _list(_value("int32")), "loss_mask": _list(_value("int64")),
                "seq_len": _value("int64")}
    nbytes = _arrow_stream(d / shard, {k: (f, [r[k] for r in rows])
                                       for k, f in features.items()}, None)
    state = {"_data_files": [{"filename": shard}], "_fingerprint": _fingerprint(rows),
             "_format_columns": list(features), "_format_kwargs": {}, "_format_type": "torch",
             "_output_all_columns": False, "_split": None}
    (d / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
    source = sum(len(json.dumps(r, sort_keys=True, separators=(",", ":"))) + 1 for r in rows)
    info = {"builder_name": "json", "citation": "", "config_name": "default",
            "dataset_name": "json", "dataset_size": nbytes, "description": "",
            "download_size": source, "features": features, "homepage": "", "license": "",
            "size_in_bytes": nbytes + source,
            "splits": {"train": {"name": "train", "num_bytes": nbytes, "num_examples": len(rows),
                                 "dataset_name": "json"}},
            "version": {"version_str": "0.0.0", "major": 0, "minor": 0, "patch": 0}}
    (d / "dataset_info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")


def _specforge_cache(d: Path, rows: list[dict], identity: dict) -> None:
    """SpecForge `build_eagle3_dataset`'s `dataset.map(cache_file_name=
    f"{cache_dir}/{cache_key}.pkl")`: an Arrow stream whatever the suffix, one [1, L] sequence
    per row (`preprocess_conversations`), named by a sha256 of the run's identity as
    `training/assembly.py` `_prompt_cache_key` names it."""
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    features = {"input_ids": _list(_list(_value("int32"))),
                "loss_mask": _list(_list(_value("int64"))),
                "attention_mask": _list(_list(_value("int8")))}
    _arrow_stream(d / f"{key}.pkl", {k: (f, [[r[k]] for r in rows])
                                     for k, f in features.items()}, _fingerprint(rows))
