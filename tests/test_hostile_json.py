"""JSON from anywhere: nesting deeper than the interpreter's stack (RecursionError) and integers
of more than 4300 digits (ValueError) in every JSON the kit reads are one clear error, exit 2,
no traceback. Before, each of these cases ended in a traceback with exit 1."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from conftest import DRAFTS, SAMPLES
from eagle3_nb.cli import main
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.observed.metrics import parse_observed

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "9" * 5000
HOSTILE = {"deep": DEEP, "huge integer": HUGE}


def cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_config_json(tmp_path, capsys, kind):
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "good", draft)
    (draft / "config.json").write_text('{"hidden_size": %s}' % HOSTILE[kind])
    code, err = cli(capsys, "inspect", draft)
    assert code == 2 and "config.json is not valid JSON" in err


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_shard_index(tmp_path, capsys, kind):
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "sharded", draft)
    (draft / "model.safetensors.index.json").write_text('{"weight_map": %s}' % HOSTILE[kind])
    code, err = cli(capsys, "inspect", draft)
    assert code == 2 and "not valid JSON" in err


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_safetensors_header(tmp_path, capsys, kind):
    draft = tmp_path / "draft"
    draft.mkdir()
    shutil.copy(DRAFTS / "good" / "config.json", draft / "config.json")
    header = ('{"x": {"dtype": "F32", "shape": [%s], "data_offsets": [0, 4]}}'
              % HOSTILE[kind]).encode()
    (draft / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    code, err = cli(capsys, "inspect", draft, "--no-stats")
    assert code == 2 and "header" in err


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_corpus_line(tmp_path, capsys, kind):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"input_ids": [1, 2]}\n{"input_ids": %s}\n' % HOSTILE[kind])
    code, err = cli(capsys, "vocab", DRAFTS / "good", "--corpus", corpus)
    assert code == 2 and "line 2 is not JSON" in err


def test_a_corpus_that_is_not_utf8(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b'{"text": "\xff\xfe"}\n')
    code, err = cli(capsys, "vocab", DRAFTS / "good", "--corpus", corpus)
    assert code == 2 and "not UTF-8" in err


@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_observed_json(tmp_path, kind):
    path = tmp_path / "observed.json"
    path.write_text('{"meta_info": %s}' % HOSTILE[kind])
    with pytest.raises(Eagle3NbError):
        parse_observed(path)


def test_the_readers_still_read_what_is_fine(tmp_path, capsys):
    """The same files with ordinary values go through (the error is about the value)."""
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "good", draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["note"] = [[[1]]]
    (draft / "config.json").write_text(json.dumps(cfg))
    code, _ = cli(capsys, "inspect", draft, "--target-config", SAMPLES / "target" / "config.json")
    assert code == 0


# ----------------------------------------------------------------------------- CLI values

@pytest.mark.parametrize("args, words", [
    (["inspect", DRAFTS / "good", "--stats-budget", "infG"], "not a byte count"),
    (["inspect", DRAFTS / "good", "--stats-budget", "9" * 5000], "not a byte count"),
    (["inspect", DRAFTS / "good", "--engine", "sglang==0.5." + "9" * 5000], "version"),
    (["inspect", DRAFTS / "good", "--engine", "sglang==0.5.9==1"], "version"),
    (["accept", DRAFTS / "good", "--max-new-tokens", "0"], "at least 1"),
    (["accept", DRAFTS / "good", "--max-new-tokens", "-5"], "at least 1"),
    (["observe", "sglang", "http://127.0.0.1:9", "--n-samples", "0"], "at least 1"),
])
def test_bad_cli_values_are_exit_2_without_a_traceback(capsys, args, words):
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own exit for a value its type refuses
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err


def test_a_closed_pipe_ends_quietly():
    """`eagle3-nb vocab ... | head -0`: the reader is gone before the first line."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "eagle3_nb.cli", "vocab", str(DRAFTS / "good")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err


# ----------------------------------------------------------------------------- config values

@pytest.mark.parametrize("key, value", [
    ("num_hidden_layers", "abc"), ("num_hidden_layers", 10 ** 6), ("num_attention_heads", 0),
    ("hidden_size", -8), ("head_dim", 0), ("num_key_value_heads", 3),
    ("max_position_embeddings", "long"), ("rms_norm_eps", "x"), ("draft_vocab_size", True),
])  # num_aux_hidden_states "x", speculators_config [1]: engine-read, tests/test_config_unread.py
def test_a_config_value_of_the_wrong_type_or_size(tmp_path, capsys, key, value):
    """Before: tracebacks (int('abc'), a division by zero heads) and, for 10**6 layers, a loop
    past 60 s and 4 GB; now a bound names the value."""
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / ("good-speculators" if key == "speculators_config" else "good"), draft)
    cfg = json.loads((draft / "config.json").read_text())
    cfg[key] = value
    (draft / "config.json").write_text(json.dumps(cfg))
    code, err = cli(capsys, "inspect", draft, "--no-stats")
    assert code == 2 and key in err


@pytest.mark.parametrize("key, value", [
    ("num_hidden_layers", "abc"), ("num_hidden_layers", 10 ** 6), ("num_hidden_layers", True),
    ("hidden_size", "wide"), ("vocab_size", -1), ("architectures", "LlamaForCausalLM"),
])
def test_a_target_config_value_of_the_wrong_type_or_size(tmp_path, capsys, key, value):
    cfg = json.loads((SAMPLES / "target" / "config.json").read_text())
    cfg[key] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, err = cli(capsys, "inspect", DRAFTS / "good", "--no-stats",
                    "--target-config", tmp_path / "config.json")
    assert code == 2 and key in err


# ----------------------------------------------------------------------------- weight files

def _draft_with_weights(tmp_path, name: str, data: bytes | None) -> Path:
    draft = tmp_path / "draft"
    draft.mkdir()
    shutil.copy(DRAFTS / "good" / "config.json", draft / "config.json")
    if data is None:
        os.mkfifo(draft / name)
    else:
        (draft / name).write_bytes(data)
    return draft


def _header(entry: dict, name: str = "x") -> bytes:
    """A safetensors file of one tensor entry (and 8 data bytes)."""
    raw = json.dumps({name: entry}).encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(8)


@pytest.mark.parametrize("name, data, words", [
    pytest.param("model.safetensors", None, "not a regular file", id="fifo-safetensors"),
    pytest.param("pytorch_model.bin", None, "not a regular file", id="fifo-pickle"),
    pytest.param("pytorch_model.bin", b"", "not a torch zip archive", id="empty-pickle"),
    pytest.param("pytorch_model.bin", random.Random(0).randbytes(64), "not a torch zip archive",
                 id="random-bytes"),
    pytest.param("model.safetensors",
                 _header({"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}),
                 "unknown dtype", id="unhashable-dtype"),
    pytest.param("model.safetensors",
                 _header({"dtype": "F32", "shape": [True, True], "data_offsets": [0, 4]}),
                 "unsigned 64-bit", id="bool-dims"),
    pytest.param("model.safetensors",
                 _header({"dtype": "I64", "shape": [0, 2 ** 70], "data_offsets": [0, 0]}),
                 "unsigned 64-bit", id="dim-over-u64"),
])
def test_hostile_weight_files(tmp_path, capsys, name, data, words):
    """Before: a FIFO blocked inspect forever; the others were tracebacks (exit 1)."""
    draft = _draft_with_weights(tmp_path, name, data)
    code, err = cli(capsys, "inspect", draft, "--no-stats")
    assert code == 2 and words in err


# ----------------------------------------------------------------------------- token ids

@pytest.mark.parametrize("ids", [["a", "b"], [1, 10 ** 9], [1, -3], [1.5, 2], [True, 2]])
def test_corpus_ids_that_are_not_token_ids(tmp_path, capsys, ids):
    """Before: int('a') tracebacks, a 10**9 id padded the counts to gigabytes."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"input_ids": ids}) + "\n")
    code, err = cli(capsys, "vocab", DRAFTS / "good", "--corpus", corpus)
    assert code == 2 and "token ids are integers" in err


def test_a_corpus_loss_mask_that_does_not_fit(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"input_ids": [1, 2, 3], "loss_mask": "abc"}) + "\n")
    code, err = cli(capsys, "vocab", DRAFTS / "good", "--corpus", corpus)
    assert code == 2 and "loss_mask" in err


def test_a_garbage_tokenizer(tmp_path, capsys):
    (tmp_path / "tokenizer.json").write_text("{}")
    code, err = cli(capsys, "vocab", DRAFTS / "good", "--tokenizer", tmp_path / "tokenizer.json")
    assert code == 2 and "cannot read the tokenizer" in err


def test_prompt_ids_that_are_not_token_ids(tmp_path):
    from eagle3_nb.session import read_prompts

    class Target:  # what read_prompts asks of a target: its vocabulary size
        vocab_size = 512

    for ids in (["a"], [512], [-1], [float("nan")], []):
        path = tmp_path / "prompts.jsonl"
        path.write_text(json.dumps({"input_ids": ids}) + "\n")
        with pytest.raises(Eagle3NbError, match="token ids are integers|no input_ids"):
            read_prompts(path, Target())


@pytest.mark.slow
@pytest.mark.parametrize("tokens", [[], [5], [1, 2, 99999], [1, -2, 3]])
def test_dumps_with_too_few_or_foreign_tokens(tmp_path, capsys, tokens):
    """Before: an index error deep in the draft's embedding (a traceback)."""
    import torch
    from safetensors.torch import save_file

    dumps = tmp_path / "dumps"
    dumps.mkdir()
    n = len(tokens)
    save_file({"hidden_states": torch.zeros(n, 4, 64), "token_ids": torch.tensor(tokens,
                                                                                 dtype=torch.long)},
              str(dumps / "hs_0.safetensors"))
    code, err = cli(capsys, "accept", DRAFTS / "good", "--hidden-states", dumps,
                    "--target", SAMPLES / "target")
    assert code == 2 and ("token(s)" in err or "outside the vocabulary" in err), err


def test_json_output_is_strict_json_when_a_tensor_holds_infinity(tmp_path, capsys):
    """Before: "norm": Infinity in `inspect --json` (not JSON: jq and strict parsers refuse)."""
    import torch
    from safetensors.torch import load_file, save_file

    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "good", draft)
    tensors = load_file(str(draft / "model.safetensors"))
    # finite, but its square overflows float64: the L2 norm statistic comes out infinite
    tensors["norm.weight"] = torch.full(tensors["norm.weight"].shape, 1e300, dtype=torch.float64)
    save_file(tensors, str(draft / "model.safetensors"), metadata={"format": "pt"})
    main(["inspect", str(draft), "--json"])
    out = capsys.readouterr().out

    def refuse(token):
        raise AssertionError(f"{token} in the JSON output")
    data = json.loads(out, parse_constant=refuse)
    norm = data["stats"]["stats"]["norm.weight"]
    assert norm["n_inf"] == 0 and norm["max"] == 1e300 and norm["norm"] is None


def test_a_header_of_too_many_tensors_is_refused_before_it_is_parsed(tmp_path, capsys):
    """Before: a million-entry header took over 60 s and gigabytes; the count is now read from
    the raw bytes first."""
    from eagle3_nb.io.safetensors import MAX_TENSORS_PER_FILE

    entry = '"t%d": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}'
    raw = ("{" + ", ".join(entry % i for i in range(MAX_TENSORS_PER_FILE + 1)) + "}").encode()
    draft = _draft_with_weights(tmp_path, "model.safetensors", struct.pack("<Q", len(raw)) + raw)
    code, err = cli(capsys, "inspect", draft, "--no-stats")
    assert code == 2 and "more than" in err and "tensors" in err


def test_a_tensor_name_of_a_megabyte_is_refused(tmp_path, capsys):
    draft = _draft_with_weights(tmp_path, "model.safetensors", _header(
        {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, name="w" * (1 << 20)))
    code, err = cli(capsys, "inspect", draft, "--no-stats")
    assert code == 2 and "tensor name of 1048576 characters" in err
