"""Generated hostile inputs for every reader of foreign bytes: each input either reads or is an
Eagle3NbError (what, where, what to do). Any other exception is a traceback a user would see.

The hand-made cases (test_hostile_json.py, test_hostile_torch_files.py) pin the known attacks;
these strategies look for the ones nobody listed. Bounded: a fixed number of examples each, no
example larger than a few KB."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from eagle3_nb.config import parse_config, parse_target_config
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.safetensors import read_header
from eagle3_nb.io.torchfile import check_torch_file

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

# JSON values as a hostile producer writes them: huge and negative integers, odd floats, strings
# where numbers belong, nesting where scalars belong
SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.sampled_from(
    [0, 1, -1, 2 ** 63, 2 ** 64, 10 ** 30]) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)
DTYPES = st.sampled_from(["F32", "BF16", "F16", "I64", "BOOL", "U8", "X9", ""]) | VALUES
DIMS = st.lists(st.integers(-3, 2 ** 65) | VALUES, max_size=4)


@st.composite
def safetensors_bytes(draw) -> bytes:
    entries = {}
    for i in range(draw(st.integers(0, 4))):
        spec = {"dtype": draw(DTYPES), "shape": draw(DIMS),
                "data_offsets": draw(st.lists(st.integers(-5, 2 ** 65) | VALUES, max_size=3))}
        for key in draw(st.sets(st.sampled_from(list(spec)), max_size=1)):
            del spec[key]
        entries[draw(st.text(max_size=10)) or f"t{i}"] = spec
    if draw(st.booleans()):
        entries["__metadata__"] = draw(VALUES)
    raw = json.dumps(entries).encode()
    declared = draw(st.sampled_from([len(raw), len(raw) + 7, 0, 2 ** 40])) \
        if draw(st.booleans()) else len(raw)
    return struct.pack("<Q", declared) + raw + draw(st.binary(max_size=64))


def reads_or_refuses(call) -> None:
    try:
        call()
    except Eagle3NbError as exc:
        assert exc.one_line()


@SETTINGS
@given(data=safetensors_bytes())
def test_safetensors_headers(tmp_path, data):
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    reads_or_refuses(lambda: read_header(path))


CONFIG_KEYS = ["hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
               "intermediate_size", "vocab_size", "draft_vocab_size", "num_hidden_layers",
               "max_position_embeddings", "rms_norm_eps", "target_hidden_size",
               "eagle_aux_hidden_state_layer_ids", "num_aux_hidden_states", "eagle_config",
               "architectures", "model_type", "tie_word_embeddings", "kv_lora_rank",
               "q_lora_rank", "transformer_layer_config", "speculators_model_type",
               "norm_before_fc", "fc_norm", "text_config"]
GOOD = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
        "vocab_size": 512, "num_hidden_layers": 1}


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), VALUES, max_size=5))
def test_draft_configs(changes):
    reads_or_refuses(lambda: parse_config({**GOOD, **changes}))


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), VALUES, max_size=5))
def test_target_configs(changes):
    reads_or_refuses(lambda: parse_target_config({**GOOD, **changes}, "target/config.json"))


@st.composite
def zip_bytes(draw) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for i in range(draw(st.integers(0, 4))):
            method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
            out.writestr(f"archive/data/{i}", draw(st.binary(max_size=256)), method)
    raw = bytearray(buf.getvalue())
    for _ in range(draw(st.integers(0, 3))):  # flip bytes anywhere, directory included
        if raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    return bytes(raw)


@SETTINGS
@given(data=zip_bytes() | st.binary(max_size=512))
def test_torch_files(tmp_path, data):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(data)
    reads_or_refuses(lambda: check_torch_file(path))


def test_the_strategies_reach_both_outcomes(tmp_path):
    """Not vacuous: fine inputs read, hostile ones are refused."""
    path = tmp_path / "model.safetensors"
    raw = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 8)
    assert read_header(path).tensors
    path.write_bytes(struct.pack("<Q", 2 ** 40) + raw)
    with pytest.raises(Eagle3NbError):
        read_header(path)
    assert parse_config(GOOD).hidden_size == 64
    with pytest.raises(Eagle3NbError):
        parse_config({**GOOD, "hidden_size": "abc"})
