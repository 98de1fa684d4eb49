"""Training rows in the Arrow files the trainers leave on disk, read batch by batch.

pyarrow is imported only here and only when such a file is read: without it the files are
listed unread (`have_pyarrow`) and the check says what to install. Formats, each confirmed in
the code that writes it (see docs/training-data.md):

- datasets 5.0.1 `arrow_writer.py` `ArrowWriter`: every cache file and saved shard is an Arrow
  IPC *stream* (`pa.RecordBatchStreamWriter`, batches of `config.DEFAULT_MAX_BATCH_SIZE` = 1000
  rows) whose schema metadata key "huggingface" holds `{"info": {"features": ...},
  "fingerprint"?}` (`_build_metadata`). `OptimizedTypedSequence` stores `input_ids` as int32
  and `attention_mask` as int8; other integer columns keep their type (`loss_mask` int64).
- datasets `arrow_dataset.py` `Dataset.save_to_disk`: a folder of
  `data-{i:05d}-of-{n:05d}.arrow`, `state.json` (`_data_files`: the shards in order, the order
  `load_from_disk` concatenates them) and `dataset_info.json`. `Dataset.map` without a
  `cache_file_name` writes `cache-{fingerprint}.arrow` beside the source's cache files
  (`_get_cache_file_path`; with num_proc, `_{rank:05d}_of_{num_proc:05d}` before the suffix);
  `filter`, `shuffle` and `select` write an indices file (one uint64 column `indices`): no rows.
- SpecForge 0.2.0 `specforge/data/preprocessing.py` `build_eagle3_dataset`:
  `dataset.map(..., cache_file_name=f"{cache_dir}/{cache_key}.pkl")`. Despite its suffix that
  file is a datasets Arrow stream, not a pickle: rows `input_ids` list<list<int32>> (one [1, L]
  sequence per row: `preprocess_conversations` appends `input_ids[None, :]`), `loss_mask`
  list<list<int64>>, `attention_mask` list<list<int8>>. SpecForge's own reader unwraps the
  [1, L] (`specforge/data/prompt_builder.py` `_normalize_integer_sequence`); its
  `minimum_valid_tokens` filter then writes an indices file beside it.
- speculators `scripts/prepare_data.py` `main`: `dataset.save_to_disk(--output)` of
  `load_and_preprocess_dataset` (`build_speculator_training_dataset`, `_append_row`):
  `input_ids` list<int32>, `loss_mask` list<int64>, `seq_len` int64 (`messages` too for
  multimodal rows); `src/speculators/train/data.py` reads it back with `load_from_disk`.

A file is read as Arrow when it starts as an Arrow stream (or IPC file) does, whatever its
suffix; a pickle is never opened.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from eagle3_nb.errors import Eagle3NbError

STREAM_MAGIC = b"\xff\xff\xff\xff"   # an IPC stream message opens with this continuation marker
FILE_MAGIC = b"ARROW1"               # the IPC file format (not written by datasets; read too)
MAX_ROW_BYTES = 64 << 20             # one row, as for a JSONL line: past this it is no sample
SLICE_ROWS = 256                     # rows turned into Python objects at once
MAX_STATE_BYTES = 16 << 20           # a save_to_disk state.json
STATE_JSON = "state.json"
TOKEN_COLUMNS = ("input_ids", "loss_mask")
TEXT_COLUMNS = ("conversations", "messages", "text")
ROW_COLUMNS = (*TOKEN_COLUMNS, *TEXT_COLUMNS, "id", "status", "error")
INSTALL = "pip install pyarrow (or export the rows with dataset.to_json(PATH))"
EXPECTED = ("pass SpecForge's build_eagle3_dataset cache, speculators' prepare_data output or a "
            "conversations dataset, or export the rows with dataset.to_json(PATH)")


class TrainingDataError(Eagle3NbError):
    """A training-data file the kit cannot read (JSONL or Arrow)."""


def arrow_format(path: Path) -> str | None:
    """"stream" or "file" when the file starts as Arrow IPC does, else None (no pyarrow)."""
    with Path(path).open("rb") as fh:
        head = fh.read(8)
    if head.startswith(STREAM_MAGIC):
        return "stream"
    return "file" if head.startswith(FILE_MAGIC) else None


def have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def saved_dataset_files(folder: Path) -> list[Path] | None:
    """A `save_to_disk` folder's shards in state.json `_data_files` order; None when the
    folder's state.json is not datasets'."""
    state = Path(folder) / STATE_JSON
    where = str(state)
    if state.stat().st_size > MAX_STATE_BYTES:
        raise TrainingDataError(f"state.json is over {MAX_STATE_BYTES >> 20} MiB", where,
                                "pass the folder Dataset.save_to_disk wrote")
    try:
        raw = json.loads(state.read_bytes())
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or "_data_files" not in raw:
        return None
    entries = raw["_data_files"]
    names = [e.get("filename") for e in entries if isinstance(e, dict)] \
        if isinstance(entries, list) else []
    if not entries or len(names) != len(entries) or not all(
            isinstance(n, str) and n and Path(n).name == n for n in names):
        raise TrainingDataError("state.json _data_files is not a list of {\"filename\": NAME} "
                                "in this folder", where, "pass the folder Dataset.save_to_disk "
                                "wrote, unedited")
    files = [state.parent / n for n in names]
    missing = [n for n, p in zip(names, files) if not p.is_file()]
    if missing:
        raise TrainingDataError(f"state.json lists {len(missing)} missing shard(s): "
                                f"{', '.join(missing[:3])}", where,
                                "copy the whole save_to_disk folder")
    return files


def arrow_rows_kind(path: Path) -> str | None:
    """"tokens" (input_ids + loss_mask), "conversations" (conversations, messages or text) or
    None (datasets' indices file: no rows), from the schema alone."""
    with _opened(path) as reader:
        schema = reader.schema
    return _kind(schema, str(path))


def iter_arrow_records(path: Path, max_rows: int | None = None) -> Iterator[tuple[int, dict]]:
    """(row number from 1, the row's training columns as a JSONL row would hold them), batch by
    batch; at most max_rows."""
    where = str(path)
    n = 0
    with _opened(path) as reader:
        if _kind(reader.schema, where) is None:
            return
        columns = [c for c in ROW_COLUMNS if c in reader.schema.names]
        for batch in _batches(reader, where):
            for obj in _records(batch.select(columns), n, where):
                if max_rows is not None and n >= max_rows:
                    return
                n += 1
                yield n, obj


class _opened:
    """An Arrow IPC reader over a memory map (the file is paged in, never copied), closed on
    exit; any pyarrow failure becomes a TrainingDataError."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def __enter__(self):
        import pyarrow as pa

        where = str(self.path)
        kind = arrow_format(self.path)
        if kind is None:
            raise TrainingDataError("not an Arrow IPC stream (no Arrow header)", where, EXPECTED)
        self.source = None
        try:
            self.source = pa.memory_map(where)
            return pa.ipc.open_stream(self.source) if kind == "stream" \
                else pa.ipc.open_file(self.source)
        except (pa.ArrowException, OSError, ValueError) as exc:
            self.__exit__()
            raise _unreadable(exc, where) from None

    def __exit__(self, *exc) -> None:
        if self.source is not None:
            self.source.close()


def _unreadable(exc: Exception, where: str) -> TrainingDataError:
    said = (str(exc).splitlines() or [type(exc).__name__])[0][:100]
    return TrainingDataError(f"not a readable Arrow file ({said})",
                             where, "the file is truncated or corrupt: write it again "
                             "(Dataset.save_to_disk, or rerun the trainer's preprocessing)")


def _batches(reader, where: str) -> Iterator:
    """Each record batch, checked in full (offsets inside their buffers) before any value is
    read."""
    import pyarrow as pa

    count = getattr(reader, "num_record_batches", None)
    i = 0
    while count is None or i < count:
        try:
            batch = reader.get_batch(i) if count is not None else reader.read_next_batch()
            batch.validate(full=True)
        except StopIteration:
            return
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _unreadable(exc, where) from None
        i += 1
        yield batch


def _records(batch, before: int, where: str) -> Iterator[dict]:
    """A batch's rows as dicts, SLICE_ROWS at a time (one at a time past MAX_ROW_BYTES)."""
    for start in range(0, batch.num_rows, SLICE_ROWS):
        part = batch.slice(start, SLICE_ROWS)
        chunks = [part] if part.nbytes <= MAX_ROW_BYTES else \
            [part.slice(i, 1) for i in range(part.num_rows)]
        row = before + start
        for chunk in chunks:
            if chunk.nbytes > MAX_ROW_BYTES:
                raise TrainingDataError(f"row {row + 1} is over {MAX_ROW_BYTES >> 20} MiB",
                                        where, "one training sample per row")
            for obj in chunk.to_pylist():
                row += 1
                yield _as_jsonl(obj)


def _as_jsonl(obj: dict) -> dict:
    """The row as its JSONL twin holds it: absent for null, messages without the null fields
    Arrow's struct type gives the keys other messages have (a [1, L] token row is unwrapped
    where JSONL's is: training_data.parse_row)."""
    out = {k: v for k, v in obj.items() if v is not None}
    for key in ("conversations", "messages"):
        if isinstance(out.get(key), list):
            out[key] = [{k: v for k, v in m.items() if v is not None}
                        if isinstance(m, dict) else m for m in out[key]]
    return out


def _kind(schema, where: str) -> str | None:
    names = set(schema.names)
    if names == {"indices"}:
        return None
    if names & set(TOKEN_COLUMNS):
        for key in TOKEN_COLUMNS:
            if key not in names:
                raise TrainingDataError(f"column {key} missing (columns: "
                                        f"{', '.join(schema.names)})", where,
                                        "token rows need input_ids and loss_mask")
            if not _integer_lists(schema.field(key).type):
                raise TrainingDataError(f"column {key} is {schema.field(key).type}, not a list "
                                        "of integers", where, "store token ids and the loss mask "
                                        "as integer lists, one entry per token")
        return "tokens"
    if names & set(TEXT_COLUMNS):
        return "conversations"
    raise TrainingDataError(f"no training columns (columns: {', '.join(schema.names[:8])})",
                            where, EXPECTED)


def _integer_lists(dtype) -> bool:
    """list<int|bool>, or SpecForge's list<list<int|bool>> ([1, L] per row)."""
    import pyarrow as pa

    def is_list(t) -> bool:
        return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)

    if not is_list(dtype):
        return False
    inner = dtype.value_type
    if is_list(inner):
        inner = inner.value_type
    return pa.types.is_integer(inner) or pa.types.is_boolean(inner)
