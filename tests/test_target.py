"""TargetModel on the trained tiny target, layer-id conventions, hidden-state dump readers."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from eagle3_nb.errors import CheckpointError, DumpFormatError, Eagle3NbError, UnsafeInputError
from eagle3_nb.target import (HiddenStateSample, TargetModel, pad_batch, read_dump,
                              read_specforge_dump, read_speculators_dump)
from target_readings import (aux_hidden_states, aux_states, final_norm_state,  # tests/ oracles
                             pre_norm_last_state, resolve_aux_indices)

pytestmark = pytest.mark.slow  # runs the target model: make test, not make test-fast

TARGET = Path(__file__).resolve().parent.parent / "data_samples" / "target"
PROMPTS = TARGET.parent / "prompts.jsonl"
L, H = 8, 64
EAGLE_IDS = [2, L // 2, L - 3]            # hidden_states[2, 4, 5]
SPECFORGE_IDS = [1, L // 2 - 1, L - 4]    # output of layers 1, 3, 4 = hidden_states[2, 4, 5]

@pytest.fixture(scope="module")
def target() -> TargetModel:
    return TargetModel.load(TARGET)


@pytest.fixture(scope="module")
def prompt_ids(target) -> list[torch.Tensor]:
    prompts = [json.loads(line)["prompt"] for line in PROMPTS.read_text().splitlines()]
    return [target.encode(p) for p in prompts[:4]]


# ---------------------------------------------------------------- loading (no weights needed)

def test_a_path_that_is_not_a_local_directory_is_refused(tmp_path):
    for path in ("meta-llama/Llama-3.1-8B", tmp_path / "absent"):
        with pytest.raises(CheckpointError, match="not an existing local directory"):
            TargetModel.load(path)


def test_remote_code_configs_are_refused(tmp_path):
    config = json.loads((TARGET / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "auto_map": {
        "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UnsafeInputError, match="auto_map"):
        TargetModel.load(tmp_path)


def test_a_config_without_weights_says_how_to_build_them(tmp_path):
    shutil.copy(TARGET / "config.json", tmp_path / "config.json")
    with pytest.raises(CheckpointError, match="no weights"):
        TargetModel.load(tmp_path)


def test_unloadable_weights_become_an_eagle3nb_error(tmp_path):
    shutil.copy(TARGET / "config.json", tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(Eagle3NbError):
        TargetModel.load(tmp_path)


# ---------------------------------------------------------------- conventions (pure)

def test_conventions_differ_by_exactly_one_index():
    assert resolve_aux_indices(EAGLE_IDS, "hf", L) == [2, 4, 5]
    assert resolve_aux_indices(SPECFORGE_IDS, "output_of_layer", L) == [2, 4, 5]
    assert resolve_aux_indices([1, 3, 6], "output_of_layer", L) == [2, 4, 7]
    assert resolve_aux_indices([5, 2, 4], "hf", L) == [2, 4, 5]
    assert resolve_aux_indices([5, 2, 4], "hf", L, sort=False) == [5, 2, 4]
    assert resolve_aux_indices([L], "hf", L) == [L]
    assert resolve_aux_indices([L - 1], "output_of_layer", L) == [L]


@pytest.mark.parametrize("ids, convention", [([L + 1], "hf"), ([L], "output_of_layer"),
                                             ([-1], "hf"), ([], "hf"), ([2.0], "hf"),
                                             ([2], "plus_one")])
def test_bad_layer_ids_or_conventions_are_refused(ids, convention):
    with pytest.raises(Eagle3NbError):
        resolve_aux_indices(ids, convention, L)


def test_pad_batch_right_and_left():
    ids, mask = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = pad_batch([[5, 6, 7], [8]], side="left")
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]


# ---------------------------------------------------------------- the trained target

def test_loads_the_trained_target(target):
    assert (target.num_layers, target.hidden_size, target.vocab_size) == (L, H, 512)
    assert target.dtype == torch.float32 and target.device.type == "cpu"
    assert target.tokenizer is not None and not target.model.training


def test_forward_hidden_shapes_and_greedy_tokens(target, prompt_ids):
    ids = prompt_ids[0]
    out = target.forward_hidden(ids)
    assert len(out.hidden_states) == L + 1 and out.num_layers == L
    assert all(h.shape == (ids.numel(), H) for h in out.hidden_states)
    assert out.pre_norm_last.shape == (ids.numel(), H)
    assert out.logits.shape == (ids.numel(), 512)
    assert torch.equal(out.next_tokens, out.logits.argmax(-1))
    batched = target.forward_hidden(ids[None])
    assert batched.logits.shape == (1, ids.numel(), 512)


def test_the_trained_target_predicts_held_out_text(target, prompt_ids):
    """Teacher-forced greedy next-token accuracy on held-out prompts: a trained model, not noise."""
    correct = total = 0
    for ids in prompt_ids:
        out = target.forward_hidden(ids)
        correct += int((out.next_tokens[:-1] == ids[1:]).sum())
        total += ids.numel() - 1
    assert correct / total > 0.3, f"held-out greedy accuracy {correct / total:.3f}"


def test_greedy_generate_is_deterministic_and_matches_uncached_argmax(target, prompt_ids):
    ids = prompt_ids[1]
    first = target.greedy_generate(ids, 16)
    assert first.shape == (16,) and torch.equal(first, target.greedy_generate(ids, 16))
    seq = ids.clone()
    for _ in range(16):  # recompute the whole sequence each step, no KV cache
        seq = torch.cat([seq, target.forward_hidden(seq).next_tokens[-1:]])
    assert torch.equal(seq[ids.numel():], first)
    assert target.greedy_generate(ids, 0).shape == (0,)


def test_greedy_generate_on_a_padded_batch_matches_each_row(target, prompt_ids):
    rows = [prompt_ids[0], prompt_ids[2][:40], prompt_ids[3][:70]]
    batched = target.greedy_generate(rows, 8)
    assert batched.shape == (3, 8)
    for r, ids in enumerate(rows):
        assert torch.equal(batched[r], target.greedy_generate(ids, 8))


def test_aux_conventions_final_norm_and_pre_norm(target, prompt_ids):
    ids = prompt_ids[0]
    out = target.forward_hidden(ids)
    hf = aux_hidden_states(target, ids, EAGLE_IDS, "hf")
    assert hf.shape == (ids.numel(), 3 * H)
    assert torch.equal(hf, torch.cat([out.hidden_states[i] for i in (2, 4, 5)], -1))
    # "output of layer X" is hidden_states[X + 1]: exactly one index deeper than "hf"
    plus_one = aux_hidden_states(target, ids, EAGLE_IDS, "output_of_layer")
    assert torch.equal(plus_one, torch.cat([out.hidden_states[i] for i in (3, 5, 6)], -1))
    assert torch.equal(plus_one, out.aux([3, 5, 6]))
    assert not torch.allclose(plus_one, hf)
    assert torch.equal(aux_hidden_states(target, ids, SPECFORGE_IDS, "output_of_layer"), hf)
    # final_norm is HF's hidden_states[L]: the final norm applied to the pre-norm last layer
    final = final_norm_state(target, ids)
    assert torch.equal(final, out.hidden_states[L]) and torch.equal(final, out.final_norm)
    assert torch.equal(aux_states(out, [L - 1], "output_of_layer"), final)
    pre = pre_norm_last_state(target, ids)
    assert not torch.allclose(pre, final, atol=1e-3)
    norm = target.model.get_decoder().norm
    torch.testing.assert_close(norm(pre), final, rtol=1e-5, atol=1e-5)
    assert torch.equal(out.aux([L], final="pre_norm"), pre)
    assert torch.equal(out.aux([5, 2]), torch.cat([out.hidden_states[5], out.hidden_states[2]], -1))
    for bad in ([L + 1], [-1], [], [2.0], [True]):
        with pytest.raises(Eagle3NbError):
            out.aux(bad)
    assert torch.equal(out.state(L - 1), out.state(L - 1, final="pre_norm"))
    # target logits come from the final-norm state
    torch.testing.assert_close(target.model.lm_head(final), out.logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_batch_gives_each_sequence_its_unbatched_states(target, prompt_ids, side):
    rows = [prompt_ids[0], prompt_ids[1][:30], prompt_ids[2][:55]]
    ids, mask = pad_batch(rows, side=side)
    batch = target.forward_hidden(ids, mask)
    for r, seq in enumerate(rows):
        real = mask[r].bool()
        single = target.forward_hidden(seq)
        for k in range(L + 1):
            torch.testing.assert_close(batch.hidden_states[k][r][real], single.hidden_states[k],
                                       rtol=0, atol=1e-5)
        torch.testing.assert_close(batch.pre_norm_last[r][real], single.pre_norm_last,
                                   rtol=0, atol=1e-5)
        torch.testing.assert_close(batch.logits[r][real], single.logits, rtol=0, atol=1e-4)
        aux = aux_hidden_states(target, ids, EAGLE_IDS, attention_mask=mask)[r][real]
        torch.testing.assert_close(aux, aux_hidden_states(target, seq, EAGLE_IDS), rtol=0,
                                   atol=1e-5)
    ragged = target.forward_hidden(rows)  # a ragged list is right-padded internally
    torch.testing.assert_close(ragged.hidden_states[3][1][:30],
                               batch.hidden_states[3][1][mask[1].bool()], rtol=0, atol=1e-5)


def test_bfloat16_load(target, prompt_ids):
    bf16 = TargetModel.load(TARGET, dtype="bfloat16")
    assert bf16.dtype == torch.bfloat16
    out = bf16.forward_hidden(prompt_ids[0])
    assert out.hidden_states[2].dtype == torch.bfloat16


# ---------------------------------------------------------------- dump readers: round trips

def write_hs(path: Path, hidden: torch.Tensor, tokens: torch.Tensor) -> Path:
    save_file({"hidden_states": hidden.contiguous(), "token_ids": tokens.contiguous()}, str(path))
    return path


def test_speculators_dump_round_trip_from_the_targets_own_states(target, prompt_ids, tmp_path):
    ids = prompt_ids[0]
    out = target.forward_hidden(ids)
    captured = [2, 4, 5, L]  # speculators' default: [2, L//2, L-3, L], the last for the loss
    stack = torch.stack([out.state(i, final="pre_norm") for i in captured], dim=1)
    write_hs(tmp_path / "hs_0.safetensors", stack, ids)
    sample = read_speculators_dump(tmp_path / "hs_0.safetensors", layer_ids=captured)
    assert isinstance(sample, HiddenStateSample) and sample.format == "speculators"
    assert torch.equal(sample.token_ids, ids)
    assert torch.equal(sample.aux_hidden_states, out.aux(EAGLE_IDS))
    assert torch.equal(sample.last_hidden_state, out.pre_norm_last)
    assert sample.last_hidden_kind == "pre_norm" and sample.loss_mask is None
    assert sample.layer_ids == [2, 4, 5] and sample.num_aux() == 3 and len(sample) == ids.numel()
    every = read_speculators_dump(tmp_path / "hs_0.safetensors", last_is_loss_layer=False)
    assert every.aux_hidden_states.shape == (ids.numel(), 4 * H) and every.last_hidden_state is None


def test_specforge_dump_round_trip_from_the_targets_own_states(target, prompt_ids, tmp_path):
    ids = prompt_ids[1]
    out = target.forward_hidden(ids)
    mask = torch.ones(ids.numel(), dtype=torch.long)
    mask[:10] = 0
    torch.save({"input_ids": ids[None], "loss_mask": mask[None],
                "hidden_state": out.final_norm[None],
                "aux_hidden_state": aux_states(out, SPECFORGE_IDS, "output_of_layer")[None]},
               tmp_path / "data_0.ckpt")
    sample = read_specforge_dump(tmp_path / "data_0.ckpt", layer_ids=SPECFORGE_IDS)
    assert sample.format == "specforge" and sample.last_hidden_kind == "final_norm"
    assert torch.equal(sample.token_ids, ids) and torch.equal(sample.loss_mask, mask)
    assert torch.equal(sample.aux_hidden_states, out.aux(EAGLE_IDS))
    assert torch.equal(sample.last_hidden_state, out.final_norm)
    assert sample.layer_ids == SPECFORGE_IDS and sample.num_aux() == 3


# ---------------------------------------------------------------- dump readers: synthetic

def test_directories_yield_naturally_sorted_lists(tmp_path):
    for i in (10, 2, 0, 1):
        write_hs(tmp_path / f"hs_{i}.safetensors", torch.full((3, 4, 8), float(i)),
                 torch.arange(3))
    samples = read_speculators_dump(tmp_path)
    assert [Path(s.source).name for s in samples] == [f"hs_{i}.safetensors" for i in (0, 1, 2, 10)]
    assert [float(s.last_hidden_state[0, 0]) for s in samples] == [0.0, 1.0, 2.0, 10.0]
    assert [Path(s.source).name for s in read_dump(tmp_path)] == [Path(s.source).name
                                                                  for s in samples]
    ckpts = tmp_path / "specforge"
    for rows, idx in (("rows_0-5", 3), ("rows_0-5", 1), ("rows_5-10", 7)):
        (ckpts / rows).mkdir(parents=True, exist_ok=True)
        torch.save({"input_ids": torch.arange(4), "aux_hidden_state": torch.zeros(4, 24)},
                   ckpts / rows / f"data_{idx}.ckpt")
    got = read_specforge_dump(ckpts)
    assert [Path(s.source).name for s in got] == ["data_1.ckpt", "data_3.ckpt", "data_7.ckpt"]
    assert got[0].last_hidden_state is None and got[0].loss_mask is None
    assert len(read_dump(ckpts)) == 3


def test_bf16_dumps_keep_their_dtype_unless_asked(tmp_path):
    path = write_hs(tmp_path / "hs_0.safetensors", torch.randn(5, 4, 8).to(torch.bfloat16),
                    torch.arange(5, dtype=torch.int32))
    sample = read_speculators_dump(path)
    assert sample.aux_hidden_states.dtype == torch.bfloat16 and sample.token_ids.dtype == torch.long
    assert read_speculators_dump(path, dtype=torch.float32).aux_hidden_states.dtype == torch.float32


@dataclass
class NotATensor:
    value: int


BAD_SPECULATORS = {
    "no token_ids": {"hidden_states": torch.zeros(3, 4, 8)},
    "2-D hidden": {"hidden_states": torch.zeros(3, 8), "token_ids": torch.arange(3)},
    "length mismatch": {"hidden_states": torch.zeros(3, 4, 8), "token_ids": torch.arange(4)},
    "one layer": {"hidden_states": torch.zeros(3, 1, 8), "token_ids": torch.arange(3)},
    "float ids": {"hidden_states": torch.zeros(3, 4, 8), "token_ids": torch.zeros(3)},
}


@pytest.mark.parametrize("case", sorted(BAD_SPECULATORS))
def test_bad_speculators_dumps_raise(tmp_path, case):
    path = tmp_path / "hs_0.safetensors"
    save_file(BAD_SPECULATORS[case], str(path))
    with pytest.raises(Eagle3NbError):
        read_speculators_dump(path)


def test_speculators_layer_id_count_must_match(tmp_path):
    path = write_hs(tmp_path / "hs_0.safetensors", torch.zeros(3, 4, 8), torch.arange(3))
    with pytest.raises(DumpFormatError, match="4 captured layers"):
        read_speculators_dump(path, layer_ids=[2, 4, 5])


def test_truncated_safetensors_dump_raises(tmp_path):
    path = write_hs(tmp_path / "hs_0.safetensors", torch.zeros(3, 4, 8), torch.arange(3))
    path.write_bytes(path.read_bytes()[:-16])
    with pytest.raises(Eagle3NbError):
        read_speculators_dump(path)


GOOD_CKPT = {"input_ids": torch.arange(5)[None], "loss_mask": torch.ones(1, 5),
             "hidden_state": torch.zeros(1, 5, 8), "aux_hidden_state": torch.zeros(1, 5, 24)}


@pytest.mark.parametrize("change, error", [
    ({"aux_hidden_state": None}, "missing key"),
    ({"input_ids": None}, "missing key"),
    ({"aux_hidden_state": torch.zeros(1, 5, 20)}, "not a multiple"),
    ({"hidden_state": torch.zeros(1, 4, 8)}, "positions"),
    ({"loss_mask": torch.ones(2, 5)}, "shape"),
    ({"input_ids": torch.zeros(1, 5)}, "integer token ids"),
    ({"input_ids": [1, 2, 3, 4, 5]}, "not a tensor"),
])
def test_bad_specforge_dumps_raise(tmp_path, change, error):
    obj = {k: v for k, v in {**GOOD_CKPT, **change}.items() if v is not None}
    torch.save(obj, tmp_path / "data_0.ckpt")
    with pytest.raises(DumpFormatError, match=error):
        read_specforge_dump(tmp_path / "data_0.ckpt")


def test_specforge_good_dump_reads_with_batch_dim_dropped(tmp_path):
    torch.save(GOOD_CKPT, tmp_path / "data_0.ckpt")
    sample = read_specforge_dump(tmp_path / "data_0.ckpt")
    assert sample.aux_hidden_states.shape == (5, 24) and sample.last_hidden_state.shape == (5, 8)
    assert sample.loss_mask.shape == (5,) and sample.num_aux() == 3
    with pytest.raises(DumpFormatError, match="layer ids"):
        read_specforge_dump(tmp_path / "data_0.ckpt", layer_ids=[2, 4])


def test_pickles_needing_more_than_weights_only_are_refused(tmp_path):
    torch.save({**GOOD_CKPT, "extra": NotATensor(1)}, tmp_path / "data_0.ckpt")
    with pytest.raises(UnsafeInputError, match="weights_only"):
        read_specforge_dump(tmp_path / "data_0.ckpt")


def test_not_a_dict_or_not_a_pickle_raises(tmp_path):
    torch.save([torch.zeros(3)], tmp_path / "list.ckpt")
    with pytest.raises(DumpFormatError, match="not a dict"):
        read_specforge_dump(tmp_path / "list.ckpt")
    (tmp_path / "junk.ckpt").write_bytes(b"not a torch file")
    with pytest.raises(Eagle3NbError):
        read_specforge_dump(tmp_path / "junk.ckpt")


def test_missing_paths_and_empty_directories_raise(tmp_path):
    with pytest.raises(DumpFormatError, match="no such"):
        read_speculators_dump(tmp_path / "absent")
    with pytest.raises(DumpFormatError, match="no hs_"):
        read_speculators_dump(tmp_path)
    with pytest.raises(DumpFormatError, match="no \\*.ckpt"):
        read_specforge_dump(tmp_path)
    with pytest.raises(DumpFormatError, match="neither"):
        read_dump(tmp_path)
    (tmp_path / "x.npy").write_bytes(b"")
    with pytest.raises(DumpFormatError, match="unknown dump file type"):
        read_dump(tmp_path / "x.npy")


def test_cached_passes_with_holes_equal_one_compact_pass(target, prompt_ids):
    """Prefill two left-padded prompts, append 3 tokens of which the last 2 are rejected (masked
    holes), then 2 more: the last pass's states and tokens equal a fresh pass over each row's
    committed tokens, as the simulation's verify steps rely on."""
    rows = [prompt_ids[0][:12], prompt_ids[1][:7]]
    ids = torch.zeros(2, 12, dtype=torch.long)
    mask = torch.zeros(2, 12, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, 12 - len(r):], mask[b, 12 - len(r):] = r, 1
    _, past = target.forward_cached(ids, mask, (mask.cumsum(-1) - 1).clamp(min=0), None, 1)
    lengths = torch.tensor([len(r) for r in rows])
    extra = torch.tensor([[5, 6, 7], [8, 9, 10]])
    mask = torch.cat([mask, torch.tensor([[1, 0, 0], [1, 0, 0]])], 1)   # keep the first only
    _, past = target.forward_cached(extra, torch.cat([mask[:, :12], torch.ones(2, 3,
                                    dtype=torch.long)], 1), lengths[:, None] + torch.arange(3),
                                    past)
    more = torch.tensor([[11, 12], [13, 14]])
    mask = torch.cat([mask, torch.ones(2, 2, dtype=torch.long)], 1)
    out, _ = target.forward_cached(more, mask, lengths[:, None] + 1 + torch.arange(2), past)
    for b, r in enumerate(rows):
        fresh = target.forward_hidden(torch.cat([r, extra[b, :1], more[b]]))
        assert torch.equal(out.next_tokens[b], fresh.next_tokens[-2:])
        for i in (2, 4, 5, target.num_layers):
            torch.testing.assert_close(out.state(i, "pre_norm")[b], fresh.state(i, "pre_norm")[-2:],
                                       rtol=1e-4, atol=1e-4)


def test_a_model_without_a_narrowable_cache_is_refused(target, monkeypatch):
    """The simulation keeps the KV cache across verify steps and drops finished rows from it:
    a model that returns none would silently recompute from nothing, so it is refused."""
    real = target._capture
    monkeypatch.setattr(target, "_capture", lambda *a, **k: (real(*a, **k)[0], None))
    ids = torch.tensor([[5, 6, 7]])
    with pytest.raises(Eagle3NbError, match="no Hugging Face KV cache"):
        target.forward_cached(ids, torch.ones_like(ids), torch.arange(3)[None])
