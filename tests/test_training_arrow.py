"""`eagle3-nb data` on the trainers' Arrow files: speculators' save_to_disk folder, SpecForge's
map cache (`{cache_key}.pkl`, an Arrow stream), corrupt files, and no pyarrow."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa   # requirements.txt: the test environment has it; the kit does not need it
import pytest

from conftest import TouchOnUnpickle
from eagle3_nb.io import training_arrow
from eagle3_nb.io.training_data import TrainingDataError, discover, iter_rows

REPO = Path(__file__).resolve().parent.parent
TRAINING = REPO / "data_samples" / "training"
TOKENIZER = TRAINING.parent / "target"
TEMPLATE = TRAINING / "chat_template.jinja"
SAVED = TRAINING / "speculators-arrow"
SHARD = SAVED / "data-00000-of-00001.arrow"
SPECFORGE_CACHE = next((TRAINING / "empty-masks-arrow").glob("*.pkl"))


def check(path, **kw):
    from eagle3_nb.checks.data import check_data

    return check_data(path, tokenizer=TOKENIZER, chat_template=TEMPLATE, serve_thinking=False,
                      **kw).to_json()


def run_cli(*args):
    proc = subprocess.run([sys.executable, "-c", "import sys; from eagle3_nb.cli import main; "
                           "rc = main(sys.argv[1:]); "
                           "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', "
                           "file=sys.stderr); sys.exit(rc)", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)
    return proc.returncode, proc.stdout, proc.stderr


def write_stream(path: Path, table) -> Path:
    with pa.OSFile(str(path), "wb") as sink, pa.RecordBatchStreamWriter(sink, table.schema) as w:
        w.write_table(table)
    return path


def shard_table():
    return pa.ipc.open_stream(pa.memory_map(str(SHARD))).read_all()


# ----------------------------------------------------------------------------- the bundled sets

def test_the_saved_dataset_gives_what_its_jsonl_twin_gives():
    """speculators-arrow is speculators/data.jsonl as prepare_data.py saves it: same rows, same
    findings, same figures."""
    files = discover(SAVED)
    assert files.tokens == [SHARD] and not files.unread
    assert [(r.input_ids, r.loss_mask) for r in iter_rows(SHARD)] == \
        [(r.input_ids, r.loss_mask) for r in iter_rows(TRAINING / "speculators" / "data.jsonl")]
    prompts = TRAINING.parent / "prompts.jsonl"
    arrow, jsonl = check(SAVED, prompts=prompts), check(TRAINING / "speculators", prompts=prompts)
    assert arrow["stats"]["token_rows"] == 12 and arrow["stats"]["supervised_tokens"] > 0
    for key in ("findings", "stats", "vocab", "skipped", "rows_read"):
        assert arrow[key] == jsonl[key], key
    assert [f for f in arrow["findings"] if f["severity"] in ("error", "warning")] == []


def test_the_shard_is_laid_out_as_datasets_writes_it():
    """datasets' ArrowWriter: an IPC stream, schema metadata "huggingface" with the features;
    input_ids int32 (OptimizedTypedSequence), loss_mask int64; state.json lists the shard."""
    assert SHARD.read_bytes()[:4] == b"\xff\xff\xff\xff"
    schema = shard_table().schema
    features = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    assert features["input_ids"] == {"feature": {"dtype": "int32", "_type": "Value"},
                                     "_type": "List"}
    assert str(schema.field("loss_mask").type) == "list<item: int64>"
    state = json.loads((SAVED / "state.json").read_text(encoding="utf-8"))
    assert state["_data_files"] == [{"filename": SHARD.name}]


def test_specforge_map_cache_is_read_as_arrow_and_its_empty_masks_found():
    """SpecForge names its map cache .pkl; it is an Arrow stream of [1, L] rows. Tokenised with
    llama3 headers, Qwen-style text gets no supervised token."""
    files = discover(SPECFORGE_CACHE.parent)
    assert files.tokens == [SPECFORGE_CACHE] and not files.unread
    rows = list(iter_rows(SPECFORGE_CACHE))
    assert len(rows) == 12 and all(len(r.input_ids) == len(r.loss_mask) > 0 for r in rows)
    data = check(SPECFORGE_CACHE.parent)
    f = next(f for f in data["findings"] if f["code"] == "LOSS_MASK_EMPTY")
    assert f["severity"] == "error"
    assert data["stats"]["empty_rows"] == data["stats"]["token_rows"] == 12


def test_a_real_pickle_is_listed_and_never_opened(tmp_path):
    marker = tmp_path / "ran"
    d = tmp_path / "cache"
    d.mkdir()
    (d / "rows.pkl").write_bytes(pickle.dumps(TouchOnUnpickle(str(marker))))
    (d / "cache.pkl").write_bytes(SPECFORGE_CACHE.read_bytes())
    data = check(d)
    assert data["files"]["unread"] == [str(d / "rows.pkl")]
    assert data["files"]["tokens"] == [str(d / "cache.pkl")]
    assert any("pickle(s) are never opened" in s for s in data["skipped"])
    assert not marker.exists()


def test_a_save_to_disk_folder_is_read_in_state_json_order(tmp_path):
    """load_from_disk concatenates the shards in state.json `_data_files` order, not by name;
    an indices file (filter/shuffle) beside data holds no rows and is skipped."""
    table = shard_table()
    d = tmp_path / "saved"
    d.mkdir()
    write_stream(d / "data-00000-of-00002.arrow", table.slice(6))
    write_stream(d / "data-00001-of-00002.arrow", table.slice(0, 6))
    (d / "state.json").write_text(json.dumps({"_data_files": [
        {"filename": "data-00001-of-00002.arrow"}, {"filename": "data-00000-of-00002.arrow"}]}))
    (d / "token_freq.pt").write_bytes(b"")   # prepare_data.py's default --token-freq-path
    write_stream(tmp_path / "cache-0123456789abcdef.arrow",
                 pa.table({"indices": pa.array(range(12), pa.uint64())}))
    files = discover(tmp_path)
    assert [p.name for p in files.tokens] == ["data-00001-of-00002.arrow",
                                              "data-00000-of-00002.arrow"]
    assert files.mappings == [d / "token_freq.pt"]
    rows = [r.input_ids for p in files.tokens for r in iter_rows(p)]
    assert rows == [r.input_ids for r in iter_rows(SHARD)]


def test_an_arrow_ipc_file_is_read_too(tmp_path):
    """The IPC file format (datasets writes streams; other tools write files) gives the same
    rows."""
    table = shard_table()
    path = tmp_path / "rows.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, 5)
    assert discover(path).tokens == [path]
    assert [r.input_ids for r in iter_rows(path)] == [r.input_ids for r in iter_rows(SHARD)]


def test_rows_stream_with_the_row_bound(tmp_path):
    assert len(list(iter_rows(SHARD, max_rows=5))) == 5
    rc, out, err = run_cli("data", SAVED, "--tokenizer", TOKENIZER, "--chat-template", TEMPLATE,
                           "--serve-thinking", "off", "--max-rows", "5")
    assert rc == 0, err
    assert "read 5 rows (stopped at --max-rows 5)" in out
    assert err.strip().endswith("NO-TORCH")


def test_conversations_in_arrow_are_rows_like_their_jsonl(tmp_path):
    """A datasets cache of the raw conversations (load_dataset("json")): the struct's null
    fields (keys other messages have) are dropped as absent JSONL keys are."""
    src = TRAINING / "dropped-rows" / "train.jsonl"
    objs = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    table = pa.Table.from_struct_array(pa.array(objs))   # every row's keys, as the json builder
    path = write_stream(tmp_path / "json-train.arrow", table)
    assert discover(path).conversations == [path]
    got = [(r.conversation, r.status, r.error, r.id) for r in iter_rows(path)]
    assert got == [(r.conversation, r.status, r.error, r.id) for r in iter_rows(src)]


# ----------------------------------------------------------------------------- bad files

@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_corrupt_arrow_file_is_a_clear_error_and_cli_exit_2(tmp_path, damage):
    data = SHARD.read_bytes()
    bad = tmp_path / "data.arrow"
    bad.write_bytes({"truncated": data[:len(data) * 2 // 3], "garbage": b"PK\x03\x04" + data,
                     "empty": b""}[damage])
    with pytest.raises(TrainingDataError) as err:
        check(tmp_path)
    assert err.value.where == str(bad) and err.value.todo
    rc, out, err = run_cli("data", tmp_path)
    assert rc == 2 and "Traceback" not in err and not out, err
    assert str(bad) in err


def test_a_corrupt_offset_is_caught_before_any_value_is_read(tmp_path):
    """A list offset past its buffer (a flipped byte) fails full validation, not a read out of
    bounds."""
    table = pa.table({"input_ids": pa.array([[1, 2, 3]] * 4, pa.list_(pa.int32())),
                      "loss_mask": pa.array([[0, 1, 1]] * 4, pa.list_(pa.int64()))})
    data = bytearray(write_stream(tmp_path / "ok.arrow", table).read_bytes())
    offsets = b"".join(i.to_bytes(4, "little") for i in (0, 3, 6, 9, 12))
    at = data.find(offsets)
    assert at > 0
    data[at + 16:at + 20] = (1 << 20).to_bytes(4, "little")
    bad = tmp_path / "ok.arrow"
    bad.write_bytes(bytes(data))
    with pytest.raises(TrainingDataError, match="not a readable Arrow file"):
        list(iter_rows(bad))


@pytest.mark.parametrize("columns,message", [
    ({"foo": pa.array([1, 2])}, "no training columns"),
    ({"input_ids": pa.array([[1, 2]], pa.list_(pa.int32()))}, "column loss_mask missing"),
    ({"input_ids": pa.array([["a"]]), "loss_mask": pa.array([[1]])}, "not a list of integers"),
])
def test_wrong_columns_are_a_clear_error(tmp_path, columns, message):
    path = write_stream(tmp_path / "cache-feedbeef.arrow", pa.table(columns))
    with pytest.raises(TrainingDataError, match=message):
        discover(tmp_path)
    rc, out, err = run_cli("data", path)
    assert rc == 2 and message in err and "Traceback" not in err and not out, err


def test_a_row_over_the_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(training_arrow, "MAX_ROW_BYTES", 600)
    with pytest.raises(TrainingDataError, match="row 1 is over"):
        list(iter_rows(SHARD))


def test_a_state_json_naming_a_missing_shard_is_a_clear_error(tmp_path):
    d = tmp_path / "saved"
    d.mkdir()
    (d / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-0.arrow"}]}))
    with pytest.raises(TrainingDataError, match="missing shard"):
        discover(d)
    (d / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../x.arrow"}]}))
    with pytest.raises(TrainingDataError, match="_data_files"):
        discover(d)


# ----------------------------------------------------------------------------- without pyarrow

def test_without_pyarrow_the_files_are_listed_with_the_next_step(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(TrainingDataError) as err:
        discover(SAVED)
    assert "pip install pyarrow" in err.value.todo and "dataset.to_json" in err.value.todo
    d = tmp_path / "both"
    d.mkdir()
    (d / "data.jsonl").write_bytes((TRAINING / "speculators" / "data.jsonl").read_bytes())
    (d / "cache.pkl").write_bytes(SPECFORGE_CACHE.read_bytes())
    data = check(d)
    assert data["files"]["unread"] == [str(d / "cache.pkl")]
    assert data["stats"]["token_rows"] == 12
    assert any("pip install pyarrow" in s for s in data["skipped"]), data["skipped"]


def test_inspect_does_not_import_pyarrow():
    code = ("import sys; from eagle3_nb.cli import main; main(['inspect', sys.argv[1], "
            "'--no-stats']); print('PYARROW' if 'pyarrow' in sys.modules else 'NO-PYARROW')")
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "data_samples" / "drafts" /
                                                           "good")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.stdout.strip().endswith("NO-PYARROW"), proc.stderr[-2000:]


# ----------------------------------------------------------------------------- real datasets

def _datasets_python() -> Path | None:
    """A Python with datasets 5.0.1 and pyarrow (EAGLE3NB_DATASETS_PYTHON, or
    .cache/datasets-5.0.1/bin/python); the kit itself never needs datasets."""
    for p in (os.environ.get("EAGLE3NB_DATASETS_PYTHON"),
              REPO / ".cache" / "datasets-5.0.1" / "bin" / "python"):
        if p and Path(p).is_file():
            return Path(p)
    return None


DATASETS_SCRIPT = r"""
import json, sys
import numpy as np
from datasets import Dataset
src, out = sys.argv[1], sys.argv[2]
rows = [json.loads(line) for line in open(src + "/speculators/data.jsonl")]
# speculators _append_row: torch.long 1-D rows (reach datasets as int64 arrays); save_to_disk
ds = Dataset.from_dict({"input_ids": [np.array(r["input_ids"], np.int64) for r in rows],
                        "loss_mask": [np.array(r["loss_mask"], np.int64) for r in rows],
                        "seq_len": [r["seq_len"] for r in rows]})
ds.save_to_disk(out + "/saved", num_shards=2)
# SpecForge preprocess_conversations: [1, L] torch.long rows; map with cache_file_name .pkl
def pre(batch):
    n = len(batch["seq_len"])
    return {"input_ids": [np.array(i, np.int64)[None, :] for i in batch["input_ids"]],
            "loss_mask": [np.array(m, np.int64)[None, :] for m in batch["loss_mask"]],
            "attention_mask": [np.ones((1, s), np.int64) for s in batch["seq_len"]]}
ds.map(pre, batched=True, batch_size=1000, remove_columns=ds.column_names,
       cache_file_name=out + "/cache/key.pkl").filter(lambda r: sum(r["loss_mask"][0]) > 0)
"""


@pytest.mark.slow
def test_files_written_by_the_real_datasets_library_are_read(tmp_path):
    py = _datasets_python()
    if py is None:
        pytest.skip("no Python with datasets 5.0.1 (set EAGLE3NB_DATASETS_PYTHON)")
    proc = subprocess.run([str(py), "-c", DATASETS_SCRIPT, str(TRAINING), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = [(r.input_ids, r.loss_mask) for r in iter_rows(TRAINING / "speculators" /
                                                           "data.jsonl")]
    saved = discover(tmp_path / "saved")
    assert len(saved.tokens) == 2
    assert [(r.input_ids, r.loss_mask) for p in saved.tokens for r in iter_rows(p)] == want
    cache = discover(tmp_path / "cache")   # key.pkl and the filter's indices cache-*.arrow
    assert len(list((tmp_path / "cache").glob("cache-*.arrow"))) == 1
    assert [p.name for p in cache.tokens] == ["key.pkl"] and not cache.unread
    assert [(r.input_ids, r.loss_mask) for r in iter_rows(cache.tokens[0])] == want


def test_several_specforge_caches_in_one_folder_are_named_as_mixed_runs(tmp_path):
    """SpecForge's cache_dir keeps one {cache_key}.pkl per preprocessing setting: read together,
    they mix runs, and the answer says so."""
    one = tmp_path / "one"
    one.mkdir()
    (one / SPECFORGE_CACHE.name).write_bytes(SPECFORGE_CACHE.read_bytes())
    assert not any("SpecForge dataset caches" in s for s in check(one)["skipped"])
    (one / ("0" * 64 + ".pkl")).write_bytes(SPECFORGE_CACHE.read_bytes())
    assert any("which of the 2 SpecForge dataset caches" in s for s in check(one)["skipped"])
