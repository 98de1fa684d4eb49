"""The files behind a draft's training, read as text and streamed (stdlib only: no torch, numpy).

Formats, each confirmed in the trainer's own code (SpecForge 0.2.0 = sgl-project/SpecForge at
a6b6b023, version.txt "0.2.0"; speculators = vllm-project/speculators at c05b95b3; see
docs/training-data.md):

- conversations JSONL: `{"conversations": [{role|from, content|value, reasoning_content?,
  tool_calls?}], "id"?, "tools"?}`. Roles are normalised as SpecForge
  `specforge/data/parse.py` `Parser._normalize_message` does (human -> user, gpt -> assistant;
  speculators `data_generation/preprocessing.py` `_normalize_conversation` maps the same and
  any unknown role to assistant).
- regenerated rows (SpecForge `scripts/regenerate_train_data.py` `call_sglang`/`set_skipped`):
  `status` in success/error/skipped, `error`, assistant `reasoning_content` with
  `--reasoning save`.
- token rows: `{"input_ids": [...], "loss_mask": [...], "seq_len"?}` as speculators'
  `build_speculator_training_dataset` passes them through (`_passthrough_pretokenized`) and
  writes them (`_append_row`: one row per assistant turn, clipped to max_length), and as
  SpecForge's `preprocess_conversations` returns them (`input_ids`, `loss_mask`,
  `attention_mask`). The trainers store these as Arrow: SpecForge's `build_eagle3_dataset`
  map cache (`{cache_dir}/{cache_key}.pkl`, an Arrow stream despite the suffix) and
  speculators' `prepare_data.py` `save_to_disk` folder; the kit reads those files
  (io/training_arrow.py, pyarrow) into the same rows as JSONL, or lists them unread with the
  next step when pyarrow is not installed. A real pickle is never opened.
- `text` rows: SpecForge `data.is_preformatted` (`build_eagle3_dataset`).
- SpecForge YAML config (`specforge/config/schema.py` `DataConfig`, `TrainingConfig`,
  `ModelConfig`): data.max_length (2048), data.chat_template ("llama3"),
  data.train_only_last_turn, data.is_preformatted, training.num_epochs (1), training.max_steps,
  training.batch_size, model.vocab_mapping_path.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from eagle3_nb.io.training_arrow import (INSTALL, STATE_JSON, TrainingDataError, arrow_format,
                                         arrow_rows_kind, have_pyarrow, iter_arrow_records,
                                         saved_dataset_files)

ROLE_ALIASES = {"human": "user", "gpt": "assistant"}
MAX_LINE_BYTES = 64 << 20   # one JSONL row; a row past this is not a training sample
MAX_ARRAY_BYTES = 256 << 20  # a JSON-array file is parsed whole
CONFIG_SUFFIXES = (".yaml", ".yml")
MAPPING_NAMES = ("token_freq.pt",)           # speculators prepare-data output
DUMP_GLOBS = ("hs_*.safetensors", "*.ckpt", "*.ckpt.gz")
ARROW_SUFFIXES = (".arrow", ".pkl")          # datasets caches (SpecForge names its cache .pkl)


@dataclass
class Row:
    """One row as the trainers see it: conversation and/or tokens, and provenance."""
    line: int                                   # JSONL line, or Arrow row number (from 1)
    conversation: list[dict[str, Any]] | None = None
    input_ids: list[int] | None = None
    loss_mask: list[int] | None = None
    text: str | None = None
    id: Any = None
    status: str | None = None
    error: str | None = None
    has_status: bool = False


@dataclass
class TrainingFiles:
    """What a training-data path holds, by kind."""
    root: Path
    conversations: list[Path] = field(default_factory=list)
    tokens: list[Path] = field(default_factory=list)
    configs: list[Path] = field(default_factory=list)
    mappings: list[Path] = field(default_factory=list)
    dumps: list[Path] = field(default_factory=list)
    unread: list[Path] = field(default_factory=list)

    def data_files(self) -> list[Path]:
        return self.conversations + self.tokens

    def to_json(self) -> dict[str, Any]:
        return {k: [str(p) for p in getattr(self, k)] for k in
                ("conversations", "tokens", "configs", "mappings", "dumps", "unread")}


def normalize_message(message: Any) -> dict[str, Any]:
    """SpecForge `Parser._normalize_message`: role from role|from, content from content|value."""
    if not isinstance(message, dict):
        return {"role": "", "content": ""}
    role = message.get("role", message.get("from", ""))
    content = message.get("content") or message.get("value") or ""
    out = {**message, "role": ROLE_ALIASES.get(role, role), "content": content}
    out.pop("from", None)
    out.pop("value", None)
    return out


def _int_list(value: Any, key: str, where: str) -> list[int]:
    """A token row's column as SpecForge's pre-tokenized reader takes it
    (`specforge/data/prompt_builder.py` `_normalize_integer_sequence`): one [1, L] sequence
    unwrapped, integers only (no bools among ids), a loss mask of 0 and 1 only."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value) \
            or key == "input_ids" and any(isinstance(v, bool) for v in value):
        raise TrainingDataError(f"{key} is not a list of integers", where,
                                "write token rows as {\"input_ids\": [...], \"loss_mask\": [...]}")
    if key == "loss_mask" and any(v not in (0, 1) for v in value):
        bad = next(v for v in value if v not in (0, 1))
        raise TrainingDataError(f"loss_mask holds {bad!r}, not only 0 and 1", where,
                                "write the mask as 0/1 per token (SpecForge's reader refuses "
                                "other values: prompt_builder.py _normalize_integer_sequence)")
    return [int(v) for v in value]


def parse_row(obj: Any, line: int, where: str, unit: str = "line") -> Row:
    """One row (a JSONL line's object, or an Arrow row as iter_arrow_records gives it);
    `unit` names its place in messages (line or row)."""
    if not isinstance(obj, dict):
        raise TrainingDataError(f"{unit} {line} is not a JSON object", where,
                                "write one JSON object per line")
    row = Row(line, id=obj.get("id"), status=obj.get("status"), error=obj.get("error"),
              has_status="status" in obj)
    conv = obj.get("conversations", obj.get("messages"))
    if isinstance(conv, list):
        row.conversation = [normalize_message(m) for m in conv]
    if "input_ids" in obj or "loss_mask" in obj:
        here = f"{where} {unit} {line}"
        row.input_ids = _int_list(obj.get("input_ids"), "input_ids", here)
        row.loss_mask = _int_list(obj.get("loss_mask"), "loss_mask", here)
        if len(row.input_ids) != len(row.loss_mask):
            raise TrainingDataError(f"{unit} {line}: input_ids has {len(row.input_ids)} tokens, "
                                    f"loss_mask {len(row.loss_mask)}", where,
                                    "each row's loss_mask must have one entry per token")
    if isinstance(obj.get("text"), str):
        row.text = obj["text"]
    return row


def iter_rows(path: str | Path, max_rows: int | None = None) -> Iterator[Row]:
    """Stream a JSONL or Arrow file row by row (never the whole file in memory), at most
    max_rows."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise TrainingDataError("file not found", where, "pass a JSONL file or its directory")
    if arrow_format(path):
        for n, obj in iter_arrow_records(path, max_rows):
            yield parse_row(obj, n, where, "row")
        return
    if json_array(path):
        for n, obj in _array_records(path, max_rows):
            yield parse_row(obj, n, where, "record")
        return
    n = 0
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            if max_rows is not None and n >= max_rows:
                return
            if len(raw) > MAX_LINE_BYTES:
                raise TrainingDataError(f"line {line_no} is over {MAX_LINE_BYTES >> 20} MiB",
                                        where, "one training row per line")
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                raise TrainingDataError(f"line {line_no} is not JSON ({str(exc)[:80]})", where,
                                        "write one JSON object per line (UTF-8)") from None
            n += 1
            yield parse_row(obj, line_no, where)


def json_array(path: Path) -> bool:
    """Whether the file holds one JSON array (its first non-space character is "["), which
    SpecForge's `prompt_builder.py` `_iter_records` reads as well as JSONL."""
    with Path(path).open("rb") as fh:
        head = fh.read(4096).lstrip()
    return head.startswith(b"[")


def _array_records(path: Path, max_rows: int | None) -> Iterator[tuple[int, Any]]:
    """A JSON array's records one at a time (the text is read whole, bounded by size; each
    record is decoded when reached, so a first row costs one record, not the array)."""
    where = str(path)
    if path.stat().st_size > MAX_ARRAY_BYTES:
        raise TrainingDataError(f"a JSON array over {MAX_ARRAY_BYTES >> 20} MiB is parsed whole",
                                where, "convert it to JSONL, one object per line: python -c "
                                "\"import json,sys; [print(json.dumps(r)) for r in "
                                "json.load(open(sys.argv[1]))]\" FILE > FILE.jsonl")
    text = path.read_bytes().decode("utf-8", errors="replace")
    decode, at, n = json.JSONDecoder().raw_decode, text.index("[") + 1, 0
    while max_rows is None or n < max_rows:
        at = _past_space(text, at)
        if text.startswith("]", at):
            return
        if n:
            if not text.startswith(",", at):
                raise TrainingDataError(f"record {n}: no comma or ] after it", where,
                                        "write one JSON array of objects, or JSONL")
            at = _past_space(text, at + 1)
        try:
            obj, at = decode(text, at)
        except (ValueError, RecursionError) as exc:
            raise TrainingDataError(f"record {n + 1} is not JSON ({str(exc)[:80]})", where,
                                    "write one JSON array of objects, or JSONL") from None
        n += 1
        yield n, obj


def _past_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def first_row(path: Path) -> Row | None:
    for row in iter_rows(path, 1):
        return row
    return None


def discover(path: str | Path) -> TrainingFiles:
    """Sort the files under a training-data path (a file or a directory) by kind."""
    root = Path(path)
    if not root.exists():
        raise TrainingDataError("no such file or directory", str(root),
                                "pass the training JSONL or the directory that holds it")
    files = TrainingFiles(root)
    for p in _candidates(root):
        _classify(files, p)
    if not files.data_files():
        raise TrainingDataError("no training rows here (no JSONL or Arrow dataset with "
                                "conversations, input_ids/loss_mask or text)", str(root),
                                unread_next_step(files) or "pass the training JSONL, "
                                "SpecForge's dataset cache or speculators' prepare_data output")
    return files


def _candidates(root: Path) -> list[Path]:
    """The files to sort: in a save_to_disk folder (state.json) its shards in state.json
    order, no other .arrow, and its other files (speculators' token_freq.pt) as they come."""
    if root.is_file():
        return [root]
    paths = sorted(p for p in root.rglob("*") if p.is_file())
    saved = {p.parent: saved_dataset_files(p.parent) for p in paths if p.name == STATE_JSON}
    saved = {folder: shards for folder, shards in saved.items() if shards is not None}
    out = []
    for p in paths:
        if p.parent in saved and p.name == STATE_JSON:
            out += saved[p.parent]
        elif p.parent not in saved or p.suffix != ".arrow":
            out.append(p)
    return out


def unread_next_step(files: TrainingFiles) -> str | None:
    """What to do about the dataset files listed unread (None when there are none)."""
    if not files.unread:
        return None
    pickles = sum(1 for p in files.unread if not arrow_format(p))
    arrow = len(files.unread) - pickles
    steps = [f"{arrow} Arrow file(s) need pyarrow: {INSTALL}"] if arrow else []
    if pickles:
        steps.append(f"{pickles} pickle(s) are never opened: export the rows with "
                     "dataset.to_json(PATH)")
    return "; ".join(steps)


def _classify(files: TrainingFiles, p: Path) -> None:
    name = p.name
    if p.suffix in ARROW_SUFFIXES:
        _classify_arrow(files, p)
    elif name.endswith(".jsonl") or p.suffix == ".json" and json_array(p):
        row = first_row(p)
        if row is None:
            return
        if row.input_ids is not None:
            files.tokens.append(p)
        elif row.conversation is not None or row.text is not None:
            files.conversations.append(p)
    elif p.suffix in CONFIG_SUFFIXES:
        files.configs.append(p)
    elif name in MAPPING_NAMES or p.suffix == ".pt" and p.parent.name == "vocab_mapping":
        files.mappings.append(p)
    elif any(p.match(g) for g in DUMP_GLOBS):
        files.dumps.append(p)


def _classify_arrow(files: TrainingFiles, p: Path) -> None:
    """Arrow rows by their columns; datasets' indices files hold none; without pyarrow, or for
    a pickle (never opened), listed unread."""
    if arrow_format(p) is None:
        if p.suffix == ".arrow":
            raise TrainingDataError("not an Arrow IPC stream (no Arrow header)", str(p),
                                    "the file is truncated or not an Arrow dataset file")
        files.unread.append(p)
    elif not have_pyarrow():
        files.unread.append(p)
    else:
        kind = arrow_rows_kind(p)
        if kind is not None:
            getattr(files, kind).append(p)


@dataclass
class TrainConfig:
    """The training-config fields the data checks use (SpecForge schema defaults)."""
    source: str | None = None
    max_length: int | None = None
    chat_template: str | None = None
    train_only_last_turn: bool = False
    is_preformatted: bool = False
    num_epochs: int | None = None
    max_steps: int | None = None
    batch_size: int | None = None
    vocab_mapping_path: str | None = None


def read_train_config(path: str | Path | None) -> TrainConfig:
    """A SpecForge YAML config (or the same keys as JSON); absent keys keep None."""
    if path is None:
        return TrainConfig()
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        import yaml
        raw = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - yaml raises many error types
        raise TrainingDataError(f"cannot read the training config ({str(exc)[:80]})", str(path),
                                "pass the trainer's YAML config") from None
    if not isinstance(raw, dict):
        raise TrainingDataError("the training config is not a mapping", str(path),
                                "pass the trainer's YAML config")
    data, train, model = (raw.get(k) if isinstance(raw.get(k), dict) else {}
                          for k in ("data", "training", "model"))
    return TrainConfig(str(path), _int(data.get("max_length")), data.get("chat_template"),
                       bool(data.get("train_only_last_turn", False)),
                       bool(data.get("is_preformatted", False)), _int(train.get("num_epochs")),
                       _int(train.get("max_steps")), _int(train.get("batch_size")),
                       model.get("vocab_mapping_path") or None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def newest_mtime(paths: list[Path]) -> float | None:
    times = [os.stat(p).st_mtime for p in paths if p.exists()]
    return max(times) if times else None


def iter_jsonl_texts(path: str | Path, limit: int = 100_000) -> Iterator[str]:
    """Serving prompts: JSONL rows with prompt|text|content (the kit's prompts format), or a
    conversations row (its user turns); at most `limit` prompts."""
    n = 0
    with Path(path).open("rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            if n >= limit or not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                raise TrainingDataError(f"line {line_no} is not JSON", str(path),
                                        "write one JSON object per line") from None
            texts = [obj.get(k) for k in ("prompt", "text", "content")] if isinstance(obj, dict) \
                else []
            if isinstance(obj, dict) and isinstance(obj.get("conversations"), list):
                texts += [m.get("content") for m in map(normalize_message, obj["conversations"])
                          if m.get("role") == "user"]
            for t in texts:
                if isinstance(t, str) and t:
                    n += 1
                    yield t
