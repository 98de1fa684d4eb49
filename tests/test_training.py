"""The sample-training recipe: a reduced smoke run (never the full training), tokenizer, prompts."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from eagle3_nb import samples
from eagle3_nb.samples.build import target_config
from eagle3_nb.target import TargetModel
from eagle3_nb.samples.training import (EOT, HELDOUT_FILES, TRAIN_FILES, TargetRecipe,
                                        stdlib_texts, train_target, train_tokenizer, write_prompts)

pytestmark = pytest.mark.slow  # runs the target model: make test, not make test-fast

# one thread: tiny ops on 2 busy cores are slower with two (OpenMP contention)
SMOKE = TargetRecipe(steps=20, batch_size=4, seq_len=32, warmup=5, eval_windows=4, log_every=10,
                     threads=1)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(None)


@pytest.fixture(scope="module")
def few_kb():
    train = [stdlib_texts(["argparse"])[0][1][:6000]]
    held = [stdlib_texts(["textwrap"])[0][1][:3000]]
    return train, held


def test_file_lists_are_disjoint_and_sorted():
    assert not set(TRAIN_FILES) & set(HELDOUT_FILES)
    assert list(TRAIN_FILES) == sorted(TRAIN_FILES) and len(TRAIN_FILES) == 40
    assert list(HELDOUT_FILES) == sorted(HELDOUT_FILES)


def test_tokenizer_is_byte_level_bpe_with_one_special_token(tokenizer, tmp_path):
    assert tokenizer.get_vocab_size() == 512
    assert tokenizer.token_to_id(EOT) == 0
    text = "def f(x):\n    return x + 1  # é\n"
    assert tokenizer.decode(tokenizer.encode(text).ids) == text
    again = train_tokenizer(tmp_path / "tokenizer.json")
    assert again.to_str() == tokenizer.to_str(), "tokenizer training must be deterministic"
    assert (tmp_path / "tokenizer.json").is_file()


def test_smoke_training_saves_a_loadable_bf16_target(tokenizer, few_kb, tmp_path):
    train, held = few_kb
    metrics = train_target(tmp_path, tokenizer, recipe=SMOKE, texts=train, heldout_texts=held,
                           log=None)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "training.json"):
        assert (tmp_path / name).is_file(), name
    # config.json is byte-identical to what the fast default build writes
    expected = json.dumps(target_config(), indent=2, sort_keys=True) + "\n"
    assert (tmp_path / "config.json").read_text(encoding="utf-8") == expected
    tensors = load_file(tmp_path / "model.safetensors")
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    assert tensors["lm_head.weight"].shape == (512, 64)
    assert len(metrics["curve"]) == 2 and metrics["curve"][-1]["step"] == 20
    assert metrics["curve"][-1]["loss"] < metrics["curve"][0]["loss"]
    assert 0.0 <= metrics["heldout"]["acc"] <= 1.0 and metrics["heldout"]["tokens"] > 0
    assert json.loads((tmp_path / "training.json").read_text())["recipe"]["steps"] == 20

    target = TargetModel.load(tmp_path)
    assert (target.num_layers, target.hidden_size, target.vocab_size) == (8, 64, 512)
    assert target.dtype == torch.float32 and target.tokenizer is not None
    out = target.greedy_generate(target.encode("def main():\n"), 4)
    assert out.shape == (4,)


def test_smoke_training_is_deterministic(tokenizer, few_kb, tmp_path):
    train, held = few_kb
    short = TargetRecipe(**{**SMOKE.__dict__, "steps": 5, "log_every": 5})
    for name in ("a", "b"):
        train_target(tmp_path / name, tokenizer, recipe=short, texts=train, heldout_texts=held,
                     log=None)
    a = (tmp_path / "a" / "model.safetensors").read_bytes()
    assert a == (tmp_path / "b" / "model.safetensors").read_bytes()


def test_prompts_come_from_held_out_files_only(tokenizer, tmp_path):
    prompts = write_prompts(tmp_path / "prompts.jsonl", tokenizer, n=16)
    lines = (tmp_path / "prompts.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == prompts and len(prompts) == 16
    training_text = "\n".join(text for _, text in stdlib_texts(TRAIN_FILES))
    for p in prompts:
        assert p["source"].split(".py:")[0] in HELDOUT_FILES
        assert 64 <= p["n_tokens"] <= 128
        assert len(tokenizer.encode(p["prompt"]).ids) == p["n_tokens"]
        assert p["prompt"] not in training_text
    assert len({p["prompt"] for p in prompts}) == len(prompts)


def test_train_flag_trains_target_then_draft_then_builds_then_measures(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(samples, "train_samples", lambda out, steps=None: calls.append(out) or {})
    monkeypatch.setattr(samples, "train_sample_draft", lambda out: calls.append(("draft", out)))
    monkeypatch.setattr(samples, "build_samples",
                        lambda out, trained_dir=None: calls.append(("build", out, trained_dir)))
    monkeypatch.setattr(samples, "record_separation", lambda out: calls.append(("separation", out)))
    monkeypatch.setattr(samples, "write_answers", lambda out: calls.append(("answers", out)))
    samples.main(["--train", "--out", str(tmp_path)])
    # the target's own answers (data_samples/training/) come from the trained target, before
    # the build that writes the training sets from them
    assert calls == [tmp_path, ("draft", tmp_path), ("answers", tmp_path),
                     ("build", tmp_path, tmp_path), ("separation", tmp_path)]
