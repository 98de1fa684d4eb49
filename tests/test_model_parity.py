"""Parity: the kit's Eagle3Draft against an independent implementation of the published math.

tests/reference_eagle3.py was written from DOMAIN.md "The draft" and the reference notes only
(explicit matmuls, index-causal mask, GQA by repeating kv heads, float32 RMSNorm, rotate-half
RoPE with default / linear / llama3 frequencies). Here random seeded float32 weights are written
as real checkpoints of both layouts, loaded with `eagle3_nb.model.load_draft`, and the kit's
logits / fed-back features / chain drafts are compared with the reference to 1e-5 relative.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from eagle3_nb.errors import Eagle3NbError  # noqa: E402
from eagle3_nb.model import DraftCache, load_draft  # noqa: E402
from eagle3_nb.model import Wiring  # noqa: E402

import reference_eagle3 as ref  # noqa: E402  (tests/ is on sys.path under pytest's rootdir)

VT, VD = 97, 41


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny matmuls: intra-op threads only spin (3-5x slower on a busy machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
RTOL = 1e-5


def close(actual, expected, rtol=RTOL):
    """Equal to `rtol` relative at the tensor's scale: the relative Frobenius error and the
    largest elementwise error over max|expected| are both <= rtol. (An elementwise rtol on
    near-zero logits only measures float32 rounding: both implementations sit ~4e-7 relative
    from a float64 evaluation of the same weights.)"""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    a, e = actual.double(), expected.double()
    scale = e.abs().max().clamp_min(1e-30)
    rel_norm = ((a - e).norm() / e.norm().clamp_min(1e-30)).item()
    rel_max = ((a - e).abs().max() / scale).item()
    assert rel_norm <= rtol and rel_max <= rtol, (
        f"relative error {rel_norm:.2e} (norm), {rel_max:.2e} (max / scale) > {rtol:.0e}")


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    layout: str                        # "flat" (midlayer.*) | "speculators" (layers.N.*)
    H: int = 32
    heads: int = 4
    kv_heads: int = 2
    head_dim: int | None = 8           # None: not written, derived as H // heads
    A: int = 3
    Ht: int | None = None              # None: target_hidden_size absent (== H)
    layers: int = 1
    layer_type: str = "llama"          # "llama" | "qwen3" (q/k norms)
    eps: float = 1e-5
    rope: str = "default"              # default | linear | llama3
    rope_style: str = "rope_scaling"   # rope_scaling (rope_theta + rope_scaling) | rope_parameters
    theta: float = 10000.0
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    attention_bias: bool = False
    extra_layer_norm: str = "input_layernorm"
    extra_hidden_norm_saved: bool = False  # layers>=1 carry a trained hidden_norm (SGLang-style)
    own_embeddings: bool = False       # embed_tokens in the draft (else borrowed: embed_from)
    d2t_mode: str = "offsets"
    seed: int = 0
    name: str = ""

    @property
    def hd(self) -> int:
        return self.head_dim or self.H // self.heads

    @property
    def ht(self) -> int:
        return self.Ht or self.H

    def rope_dict(self) -> dict | None:
        if self.rope == "default":
            return None
        if self.rope == "linear":
            return {"rope_type": "linear", "factor": 2.5}
        # wavelengths 2*pi/inv_freq for hd=16, theta=1e4: 6.3, 20, 63, 199, ... so with an
        # original context of 64, factors 1 / 4 hit all three llama3 regimes
        return {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}

    def ref_config(self) -> ref.RefConfig:
        return ref.RefConfig(
            hidden_size=self.H, num_heads=self.heads, num_kv_heads=self.kv_heads,
            head_dim=self.hd, num_layers=self.layers, num_aux=self.A,
            target_hidden_size=self.Ht, rms_norm_eps=self.eps, rope_theta=self.theta,
            rope_scaling=self.rope_dict(), norm_before_residual=self.norm_before_residual,
            norm_before_fc=self.norm_before_fc, fc_norm=self.fc_norm,
            norm_output=self.norm_output, qk_norm=self.layer_type == "qwen3",
            attention_bias=self.attention_bias, extra_layer_norm=self.extra_layer_norm,
            d2t_mode=self.d2t_mode)

    def wiring(self, **kw) -> Wiring:
        base = dict(norm_before_residual=self.norm_before_residual,
                    norm_output=self.norm_output, extra_layer_norm=self.extra_layer_norm,
                    d2t_mode=self.d2t_mode)
        base.update(kw)
        return Wiring("test", None, **base)


CASES = [
    Case("flat", name="flat-basic"),
    Case("flat", norm_before_residual=True, norm_output=True, name="flat-nbr-normout"),
    Case("flat", A=4, Ht=48, norm_before_fc=True, attention_bias=True, own_embeddings=True,
         name="flat-A4-Ht48-input_norm-bias"),
    Case("flat", layer_type="qwen3", fc_norm=True, rope="linear", name="flat-qwen3-fc_norm-linear"),
    Case("flat", H=64, heads=4, kv_heads=4, head_dim=16, rope="llama3", norm_before_residual=True,
         name="flat-llama3-mha"),
    Case("flat", layers=2, extra_layer_norm="hidden_norm", extra_hidden_norm_saved=True,
         norm_output=True, name="flat-2layers-sglang-hidden_norm"),
    Case("flat", head_dim=None, H=48, heads=4, kv_heads=2, rope="llama3", rope_style="rope_parameters",
         theta=10000.0, name="flat-no-head_dim-rope_parameters-llama3"),
    Case("speculators", theta=500000.0, rope_style="rope_parameters", norm_before_residual=True,
         name="spec-basic-rope_parameters"),
    Case("speculators", layer_type="qwen3", layers=2, attention_bias=True, norm_before_fc=True,
         norm_output=True, rope="llama3", rope_style="rope_parameters", head_dim=16, H=64,
         A=4, Ht=40, own_embeddings=True, name="spec-qwen3-2layers-everything"),
    Case("speculators", layers=2, extra_layer_norm="input_layernorm", own_embeddings=True,
         name="spec-2layers-input_layernorm"),
    Case("speculators", layers=2, extra_layer_norm="hidden_norm", own_embeddings=True,
         name="spec-2layers-served-hidden_norm-ones"),
    Case("speculators", fc_norm=True, rope="linear", rope_style="rope_parameters", kv_heads=4,
         Ht=40, own_embeddings=True, eps=1e-6, name="spec-fc_norm-linear-Ht40"),
    Case("speculators", fc_norm=True, norm_before_fc=True, norm_output=True,
         norm_before_residual=True, rope="llama3", head_dim=16, H=64, A=4,
         name="spec-input_norm+fc_norm-llama3-scaling"),
    Case("speculators", layer_type="qwen3", norm_before_residual=False, rope="linear",
         rope_style="rope_scaling", name="spec-qwen3-rope_scaling-linear"),
]


def case_params(cases):
    return [pytest.param(c, id=c.name) for c in cases]


# ---------------------------------------------------------------- weights and checkpoints


def d2t_table(case: Case, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randperm(VT, generator=gen)[:VD].sort().values
    t2d = torch.zeros(VT, dtype=torch.bool)
    t2d[ids] = True
    table = ids.clone() if case.d2t_mode == "absolute" else ids - torch.arange(VD)
    return table.long(), t2d


def make_weights(case: Case) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1234 + case.seed)

    def lin(o, i):
        return torch.randn(o, i, generator=gen) / i ** 0.5

    def nrm(n):
        return 1.0 + 0.2 * torch.randn(n, generator=gen)

    def bias(n):
        return 0.1 * torch.randn(n, generator=gen)

    H, A, ht, hd = case.H, case.A, case.ht, case.hd
    nh, nkv, inter = case.heads, case.kv_heads, 2 * case.H
    w = {"fc.weight": lin(H, A * ht), "norm.weight": nrm(H), "lm_head.weight": lin(VD, H),
         "embed_tokens.weight": torch.randn(VT, H, generator=gen)}
    if case.norm_before_fc:
        w["input_norm.weight"] = nrm(A * ht)
    if case.fc_norm:
        for i in range(A):
            w[f"fc_norm.{i}.weight"] = nrm(ht)
    for li in range(case.layers):
        p = f"layers.{li}"
        width = 2 * H if li == 0 else H
        w[f"{p}.self_attn.q_proj.weight"] = lin(nh * hd, width)
        w[f"{p}.self_attn.k_proj.weight"] = lin(nkv * hd, width)
        w[f"{p}.self_attn.v_proj.weight"] = lin(nkv * hd, width)
        w[f"{p}.self_attn.o_proj.weight"] = lin(H, nh * hd)
        if case.attention_bias:
            for proj, n in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd), ("o", H)):
                w[f"{p}.self_attn.{proj}_proj.bias"] = bias(n)
        if case.layer_type == "qwen3":
            w[f"{p}.self_attn.q_norm.weight"] = nrm(hd)
            w[f"{p}.self_attn.k_norm.weight"] = nrm(hd)
        w[f"{p}.mlp.gate_proj.weight"] = lin(inter, H)
        w[f"{p}.mlp.up_proj.weight"] = lin(inter, H)
        w[f"{p}.mlp.down_proj.weight"] = lin(H, inter)
        w[f"{p}.input_layernorm.weight"] = nrm(H)
        w[f"{p}.post_attention_layernorm.weight"] = nrm(H)
        if li == 0 or case.extra_hidden_norm_saved:
            w[f"{p}.hidden_norm.weight"] = nrm(H)
    w["d2t"], w["t2d"] = d2t_table(case, gen)
    return w


def layer_config(case: Case) -> dict:
    cfg = {"model_type": case.layer_type, "hidden_size": case.H,
           "intermediate_size": 2 * case.H, "num_attention_heads": case.heads,
           "num_key_value_heads": case.kv_heads, "num_hidden_layers": case.layers,
           "vocab_size": VT, "rms_norm_eps": case.eps, "hidden_act": "silu",
           "max_position_embeddings": 4096, "attention_bias": case.attention_bias,
           "tie_word_embeddings": False}
    if case.head_dim is not None:
        cfg["head_dim"] = case.head_dim
    scaling = case.rope_dict()
    if case.rope_style == "rope_parameters":
        cfg["rope_parameters"] = {"rope_theta": case.theta, "rope_type": "default",
                                  **(scaling or {})}
    else:
        cfg["rope_theta"] = case.theta
        if scaling is not None:
            legacy = dict(scaling)
            if case.rope == "linear":  # the older spelling: "type"
                legacy["type"] = legacy.pop("rope_type")
            cfg["rope_scaling"] = legacy
    return cfg


def draft_config(case: Case) -> dict:
    ids = [2, 8, 13, 15][: case.A]
    flags = {"norm_before_residual": case.norm_before_residual, "fc_norm": case.fc_norm,
             "norm_output": case.norm_output}
    if case.layout == "flat":
        cfg = {"architectures": ["LlamaForCausalLMEagle3"], **layer_config(case),
               "draft_vocab_size": VD, **flags,
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids,
                                "use_aux_hidden_state": True,
                                "norm_before_fc": case.norm_before_fc}}
        if case.Ht is not None:
            cfg["target_hidden_size"] = case.Ht
        return cfg
    return {"speculators_model_type": "eagle3", "architectures": ["Eagle3DraftModel"],
            "transformer_layer_config": layer_config(case), "draft_vocab_size": VD,
            "target_hidden_size": case.Ht, "eagle_aux_hidden_state_layer_ids": ids,
            "norm_before_fc": case.norm_before_fc, **flags,
            "speculators_config": {"algorithm": "eagle3", "verifier": {
                "name_or_path": "someone/target", "architectures": ["LlamaForCausalLM"]}}}


def checkpoint_keys(case: Case, w: dict) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in w.items():
        if k == "embed_tokens.weight" and not case.own_embeddings:
            continue
        if case.layout == "flat" and case.layers == 1 and k.startswith("layers.0."):
            k = "midlayer." + k[len("layers.0."):]
        out[k] = v.contiguous()
    return out


def write_checkpoint(case: Case, w: dict, root: Path) -> tuple[Path, Path | None]:
    draft = root / "draft"
    draft.mkdir(parents=True)
    (draft / "config.json").write_text(json.dumps(draft_config(case)))
    safetensors_torch.save_file(checkpoint_keys(case, w), str(draft / "model.safetensors"),
                                metadata={"format": "pt"})
    if case.own_embeddings:
        return draft, None
    target = root / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": case.H,
         "num_hidden_layers": 16, "vocab_size": VT}))
    safetensors_torch.save_file({"model.embed_tokens.weight": w["embed_tokens.weight"],
                                 "lm_head.weight": torch.randn(VT, case.H)},
                                str(target / "model.safetensors"))
    return draft, target


def build(case: Case, tmp_path: Path):
    w = make_weights(case)
    draft_dir, target_dir = write_checkpoint(case, w, tmp_path)
    draft = load_draft(draft_dir, embed_from=target_dir)
    # every tensor written reached the model; only never-written norms may be default
    unexpected_missing = [k for k in draft.missing_keys
                          if not (k.endswith(".hidden_norm.weight") and not k.startswith("layers.0."))]
    assert unexpected_missing == [], unexpected_missing
    return draft, w


def inputs(case: Case, B=2, T=9, seed=7):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VT, (B, T), generator=gen)
    hs = torch.randn(B, T, case.A * case.ht, generator=gen) * 2.0
    # non-contiguous, per-row different positions (gaps of 1..4, distinct starts)
    steps = torch.randint(1, 5, (B, T), generator=gen)
    pos = torch.cumsum(steps, 1) + torch.tensor([[0], [5]])[:B]
    return ids, hs, pos


# ---------------------------------------------------------------- forward parity


@pytest.mark.parametrize("case", case_params(CASES))
def test_forward_matches_reference(case, tmp_path):
    draft, w = build(case, tmp_path)
    rc = case.ref_config()
    ids, hs, pos = inputs(case)
    with torch.no_grad():
        out = draft.run(ids, hs, pos)                  # the trained wiring, from config.json
        out_w = draft.run(ids, hs, pos, wiring=case.wiring())
    ref_logits, ref_feat, ref_h = ref.forward(rc, w, ids, hs, pos)
    assert out.fc_applied
    assert out.logits.shape == (2, 9, VD) and out.features.shape == (2, 9, case.H)
    close(out_w.logits, ref_logits)
    close(out_w.features, ref_feat)
    if case.extra_layer_norm == "input_layernorm":  # the config alone gives the same wiring
        close(out.logits, ref_logits)
        close(out.features, ref_feat)
    # norm_output decides what is fed back: pre-norm h, or norm(h)
    if case.norm_output:
        assert not torch.allclose(out_w.features, ref_h)
    else:
        close(out_w.features, ref_h)


@pytest.mark.parametrize("case", case_params([c for c in CASES if c.rope != "default"]))
def test_rope_frequencies_match_published_rules(case, tmp_path):
    draft, _ = build(case, tmp_path)
    expected = ref.inv_freq(case.ref_config())
    torch.testing.assert_close(draft.inv_freq.double(), expected, rtol=1e-6, atol=0)
    if case.rope == "llama3":  # the test exercises all three regimes of the llama3 rule
        import math
        sc = case.rope_dict()
        base = 1.0 / case.theta ** (torch.arange(0, case.hd, 2, dtype=torch.float64) / case.hd)
        wl = 2 * math.pi / base
        old = sc["original_max_position_embeddings"]
        assert (wl < old / sc["high_freq_factor"]).any()
        assert (wl > old / sc["low_freq_factor"]).any()
        assert ((wl >= old / sc["high_freq_factor"]) & (wl <= old / sc["low_freq_factor"])).any()


FLIPS = [
    pytest.param(dict(norm_before_residual=True), id="norm_before_residual-on"),
    pytest.param(dict(norm_output=True), id="norm_output-on"),
    pytest.param(dict(extra_layer_norm="hidden_norm"), id="extra-hidden_norm"),
]


@pytest.mark.parametrize("flip", FLIPS)
@pytest.mark.parametrize("layout", ["flat", "speculators"])
def test_wiring_switches_match_reference(layout, flip, tmp_path):
    """The same weights run under a switched wiring equal the reference with that switch."""
    case = Case(layout, layers=2, extra_hidden_norm_saved=layout == "flat", own_embeddings=True,
                seed=3)
    draft, w = build(case, tmp_path)
    switched = replace(case, **flip)
    ids, hs, pos = inputs(case)
    with torch.no_grad():
        out = draft.run(ids, hs, pos, wiring=switched.wiring())
        base = draft.run(ids, hs, pos, wiring=case.wiring())
    ref_logits, ref_feat, _ = ref.forward(switched.ref_config(), w, ids, hs, pos)
    close(out.logits, ref_logits)
    close(out.features, ref_feat)
    assert not torch.allclose(out.features, base.features, rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------- positions


@pytest.mark.parametrize("case", case_params([CASES[0], CASES[4], CASES[8]]))
def test_constant_position_shift_changes_nothing(case, tmp_path):
    draft, w = build(case, tmp_path)
    ids, hs, pos = inputs(case)
    with torch.no_grad():
        a = draft.run(ids, hs, pos).logits
        b = draft.run(ids, hs, pos + 37).logits
    close(b, a)
    close(b, ref.forward(case.ref_config(), w, ids, hs, pos)[0])


@pytest.mark.parametrize("case", case_params([CASES[0], CASES[7]]))
def test_gaps_in_positions_matter_and_match(case, tmp_path):
    draft, w = build(case, tmp_path)
    ids, hs, pos = inputs(case)
    contiguous = torch.arange(9).expand(2, 9)
    with torch.no_grad():
        gapped = draft.run(ids, hs, pos).logits
        plain = draft.run(ids, hs, contiguous).logits
        default = draft.run(ids, hs).logits          # position_ids omitted: 0..T-1
    rc = case.ref_config()
    close(gapped, ref.forward(rc, w, ids, hs, pos)[0])
    close(plain, ref.forward(rc, w, ids, hs, contiguous)[0])
    close(default, plain)
    assert not torch.allclose(gapped[:, 1:], plain[:, 1:], rtol=1e-3, atol=1e-4)


def test_position_restart_keeps_the_causal_mask(tmp_path):
    """One causal pass whose positions restart (0..4, 0..3): attention is still causal by index
    (DOMAIN.md: take position_ids as given; RoPE sees them, the mask is the pass's causal one)."""
    case = CASES[0]
    draft, w = build(case, tmp_path)
    ids, hs, _ = inputs(case)
    pos = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 3]] * 2)
    with torch.no_grad():
        out = draft.run(ids, hs, pos).logits
    close(out, ref.forward(case.ref_config(), w, ids, hs, pos)[0])


@pytest.mark.parametrize("pos", [[0, 1, 2, 3, 4, 0, 1, 2, 3], [0, 1, 2, 3, 4, 4, 5, 6, 7]],
                         ids=["restart", "repeat"])
def test_later_tokens_never_change_earlier_logits(pos, tmp_path):
    """Reference-free: changing the inputs at index >= 5 leaves indices < 5 unchanged."""
    case = CASES[0]
    draft, _ = build(case, tmp_path)
    ids, hs, _ = inputs(case)
    pos = torch.tensor([pos] * 2)
    ids2, hs2 = ids.clone(), hs.clone()
    ids2[:, 5:] = (ids2[:, 5:] + 1) % VT
    hs2[:, 5:] += 1.0
    with torch.no_grad():
        a = draft.run(ids, hs, pos).logits
        b = draft.run(ids2, hs2, pos).logits
    close(b[:, :5], a[:, :5])


# ---------------------------------------------------------------- KV cache and chain drafting


@pytest.mark.parametrize("case", case_params([CASES[1], CASES[5], CASES[8], CASES[11]]))
def test_two_chunks_with_cache_equal_one_pass(case, tmp_path):
    draft, w = build(case, tmp_path)
    ids, hs, pos = inputs(case)
    wiring = case.wiring()
    cache = DraftCache()
    with torch.no_grad():
        first = draft.run(ids[:, :6], hs[:, :6], pos[:, :6], cache=cache, wiring=wiring)
        assert cache.length == 6
        second = draft.run(ids[:, 6:], hs[:, 6:], pos[:, 6:], cache=cache, wiring=wiring)
        assert cache.length == 9
    ref_logits, ref_feat, _ = ref.forward(case.ref_config(), w, ids, hs, pos)
    close(torch.cat([first.logits, second.logits], 1), ref_logits)
    close(torch.cat([first.features, second.features], 1), ref_feat)


STEP_CASES = [
    CASES[0],
    replace(CASES[1], d2t_mode="absolute", name="flat-nbr-normout-d2t-absolute"),
    replace(CASES[3], d2t_mode="none", name="flat-qwen3-d2t-none"),
    CASES[5],
    CASES[8],
    replace(CASES[10], d2t_mode="absolute", name="spec-2layers-hidden_norm-d2t-absolute"),
    CASES[12],
]


@pytest.mark.parametrize("case", case_params(STEP_CASES))
def test_step_equals_manual_greedy_chain(case, tmp_path):
    draft, w = build(case, tmp_path)
    ids, hs, pos = inputs(case)
    k = 4
    with torch.no_grad():
        prop = draft.step(ids, hs, num_steps=k, position_ids=pos, wiring=case.wiring())
    r_draft, r_target, r_logits = ref.chain_draft(case.ref_config(), w, ids, hs, pos, k)
    close(prop.logits, r_logits)
    assert torch.equal(prop.draft_ids, r_draft)
    assert torch.equal(prop.target_ids, r_target)
    # the d2t reading itself
    every = torch.arange(VD)
    assert torch.equal(draft.to_target_ids(every, case.wiring()),
                       ref.to_target(case.ref_config(), w, every))


def test_step_after_truncate_equals_fresh_step(tmp_path):
    case = CASES[8]
    draft, w = build(case, tmp_path)
    ids, hs, pos = inputs(case)
    wiring = case.wiring()
    cache = DraftCache()
    with torch.no_grad():
        draft.step(ids[:, :7], hs[:, :7], num_steps=3, position_ids=pos[:, :7], cache=cache,
                   wiring=wiring)
        cache.truncate(7)                    # reject every draft: keep the 7 verified positions
        again = draft.step(ids[:, 7:], hs[:, 7:], num_steps=3, position_ids=pos[:, 7:],
                           cache=cache, wiring=wiring)
    r_draft, _, r_logits = ref.chain_draft(case.ref_config(), w, ids, hs, pos, 3)
    close(again.logits, r_logits)
    assert torch.equal(again.draft_ids, r_draft)


def test_padded_holes_in_the_cache_equal_each_row_alone(tmp_path):
    """Two rows extended by different counts in one batch: each chunk left-padded, the padding
    marked invalid, so the cache has holes. Every real position's logits equal the row run alone
    with no padding (as the batched simulation relies on)."""
    case = CASES[8]
    draft, _ = build(case, tmp_path)
    ids, hs, pos = inputs(case)
    wiring = case.wiring()
    chunks = [(4, 6), (5, 3)]                 # row 0 extends by 4 then 5, row 1 by 6 then 3
    cache, got = DraftCache(), [[], []]
    with torch.no_grad():
        starts = [0, 0]
        for step in range(2):
            n = [chunks[step][0], chunks[step][1]]
            width = max(n)
            pad_ids = torch.zeros(2, width, dtype=torch.long)
            pad_hs = torch.zeros(2, width, hs.shape[-1])
            pad_pos = torch.zeros(2, width, dtype=torch.long)
            valid = torch.zeros(2, width, dtype=torch.bool)
            for b in range(2):
                sl = slice(starts[b], starts[b] + n[b])
                pad_ids[b, width - n[b]:], pad_hs[b, width - n[b]:] = ids[b, sl], hs[b, sl]
                pad_pos[b, width - n[b]:], valid[b, width - n[b]:] = pos[b, sl], True
            out = draft.run(pad_ids, pad_hs, pad_pos, cache=cache, wiring=wiring, valid=valid)
            for b in range(2):
                got[b].append(out.logits[b, width - n[b]:])
                starts[b] += n[b]
        for b in range(2):
            T = starts[b]
            alone = draft.run(ids[b:b + 1, :T], hs[b:b + 1, :T], pos[b:b + 1, :T], wiring=wiring)
            close(torch.cat(got[b])[None], alone.logits)
    assert cache.valid.shape == (2, 6 + 5) and int(cache.valid.sum()) == 4 + 6 + 5 + 3


def test_step_with_default_positions(tmp_path):
    case = CASES[7]
    draft, w = build(case, tmp_path)
    ids, hs, _ = inputs(case)
    with torch.no_grad():
        prop = draft.step(ids, hs, num_steps=3, wiring=case.wiring())
    r_draft, _, r_logits = ref.chain_draft(case.ref_config(), w, ids, hs,
                                           torch.arange(9).expand(2, 9), 3)
    close(prop.logits, r_logits)
    assert torch.equal(prop.draft_ids, r_draft)


# ---------------------------------------------------------------- the fc rule


@pytest.mark.parametrize("case", case_params([CASES[0], CASES[2], CASES[8]]))
def test_engine_fc_rule_skips_fc_for_h_wide_input(case, tmp_path):
    draft, w = build(case, tmp_path)
    ids, _, pos = inputs(case)
    h_wide = torch.randn(2, 9, case.H, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        out = draft.run(ids, h_wide, pos, wiring=case.wiring(fc_rule="engine"))
        own = draft.run(ids, h_wide, pos, wiring=case.wiring(), own_features=True)
        full = draft.run(ids, torch.randn(2, 9, case.A * case.ht), pos,
                         wiring=case.wiring(fc_rule="engine"))
    assert not out.fc_applied and not own.fc_applied and full.fc_applied
    ref_logits, ref_feat, _ = ref.forward(case.ref_config(), w, ids, h_wide, pos, skip_fc=True)
    close(out.logits, ref_logits)
    close(out.features, ref_feat)
    close(own.logits, ref_logits)


@pytest.mark.parametrize("rule", ["always", "engine"])
def test_wrong_width_raises(rule, tmp_path):
    case = CASES[0]
    draft, _ = build(case, tmp_path)
    ids, _, pos = inputs(case)
    widths = [case.A * case.ht + 1, 2 * case.H] + ([case.H] if rule == "always" else [])
    for width in widths:
        with pytest.raises(Eagle3NbError):
            draft.run(ids, torch.randn(2, 9, width), pos, wiring=case.wiring(fc_rule=rule))


def test_rope_frequencies_stay_float32_after_a_dtype_cast(tmp_path):
    case = CASES[0]
    draft, _ = build(case, tmp_path)
    before = draft.inv_freq.clone()
    draft.to(torch.bfloat16)
    assert draft.inv_freq.dtype == torch.float32 and torch.equal(draft.inv_freq, before)
    assert draft.fc.weight.dtype == torch.bfloat16
