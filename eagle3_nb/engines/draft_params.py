"""The parameters an engine's draft class allocates for a config: names, kinds and shapes (each
shard of a fused parameter apart), as its module builds them."""

from __future__ import annotations

from eagle3_nb.config import DraftConfig
from eagle3_nb.engines.load_plan import ParamSpec
from eagle3_nb.engines.profile import EngineProfile
from eagle3_nb.layouts import mla_attention_shapes


def engine_params(profile: EngineProfile, cfg: DraftConfig, num_aux: int,
                   flags: dict[str, bool]) -> dict[str, ParamSpec]:
    H, Ht, hd = cfg.H, cfg.Ht, cfg.head_dim
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    params: dict[str, ParamSpec] = {}

    def add(name, kind, shape, shard=None):
        params.setdefault(name, ParamSpec(kind)).shards[shard] = tuple(shape)

    if profile.embed_policy != "target_always" and all(  # else the draft builds none at all
            module != "embed_tokens" or switch_on(switch, cfg)
            for module, switch in profile.unused_unless):
        add("model.embed_tokens.weight", "embedding", (cfg.vocab_size, H))
    # an engine that drops fc's keys while use_aux_hidden_state is off builds no fc then either
    fc_off = ("fc", "use_aux_hidden_state") in profile.drop_when_off
    if not fc_off or cfg.use_aux_hidden_state.value:
        add("model.fc.weight", "linear", (H, num_aux * Ht))
    if profile.has_input_norm and flags["norm_before_fc"]:
        add("model.input_norm.weight", "norm", (num_aux * Ht,))
    if profile.has_fc_norm and flags["fc_norm"]:
        for i in range(num_aux):
            add(f"model.fc_norm.{i}.weight", "norm", (Ht,))
    n_layers = cfg.num_hidden_layers if "{i}" in profile.decoder_param else 1
    for i in range(n_layers):
        p = profile.decoder_param.format(i=i)
        if n_layers == 1 and profile.single_layer_param:
            p = profile.single_layer_param
        width = 2 * H if i == 0 else H
        if profile.draft_attention == "mla":
            _mla_params(profile, cfg, p, width, add)
            _mlp_and_norms(profile, cfg, p, i, add)
            continue
        for shard, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
            add(f"{p}self_attn.qkv_proj.weight", "linear", (rows, width), shard)
            if cfg.attention_bias and profile.qkv_bias:
                add(f"{p}self_attn.qkv_proj.bias", "linear", (rows,), shard)
        add(f"{p}self_attn.o_proj.weight", "linear", (H, nh * hd))
        if cfg.attention_bias and profile.o_proj_bias:
            add(f"{p}self_attn.o_proj.bias", "linear", (H,))
        if profile.has_q_k_norm and cfg.layer_model_type.startswith("qwen3"):
            add(f"{p}self_attn.q_norm.weight", "norm", (hd,))
            add(f"{p}self_attn.k_norm.weight", "norm", (hd,))
        _mlp_and_norms(profile, cfg, p, i, add)
    add("model.norm.weight", "norm", (H,))
    if not (cfg.tie_word_embeddings and profile.ties_lm_head):
        add("lm_head.weight", "lm_head", (cfg.Vd, H))
    if cfg.pruned_vocab or not profile.d2t_param_needs_pruned_vocab:
        add(profile.d2t_param, "vocab_map", (cfg.Vd,))
    return params


def _mlp_and_norms(profile: EngineProfile, cfg: DraftConfig, p: str, i: int, add) -> None:
    H, inter = cfg.H, cfg.intermediate_size
    add(f"{p}mlp.gate_up_proj.weight", "linear", (inter, H), 0)
    add(f"{p}mlp.gate_up_proj.weight", "linear", (inter, H), 1)
    add(f"{p}mlp.down_proj.weight", "linear", (H, inter))
    if cfg.mlp_bias and profile.mlp_bias_params:
        add(f"{p}mlp.gate_up_proj.bias", "linear", (inter,), 0)
        add(f"{p}mlp.gate_up_proj.bias", "linear", (inter,), 1)
        add(f"{p}mlp.down_proj.bias", "linear", (H,))
    if i == 0 or profile.extra_layers_have_input_norm:
        add(f"{p}input_layernorm.weight", "norm", (H,))
    add(f"{p}post_attention_layernorm.weight", "norm", (H,))
    if i == 0 or profile.extra_layers_have_hidden_norm:
        add(f"{p}hidden_norm.weight", "norm", (H,))


def _mla_params(profile: EngineProfile, cfg: DraftConfig, p: str, width: int, add) -> None:
    """Multi-latent attention: each checkpoint tensor lands in its own parameter, or in a shard
    of the parameter the profile's `stacked` rules fuse it into."""
    if not cfg.mla:
        return  # check_startup reports the missing MLA sizes
    for name, shape in mla_attention_shapes(cfg, width).items():
        kind = "norm" if name.endswith("layernorm") else "linear"
        fused = next(((param, shard) for param, part, shard in profile.stacked
                      if part == f".{name}"), None)
        if fused:
            add(f"{p}self_attn{fused[0]}.weight", kind, shape, fused[1])
        else:
            add(f"{p}self_attn.{name}.weight", kind, shape)


# EngineProfile.unused_unless switches: whether the engine builds the module for this draft
UNUSED_SWITCHES = {"target_hidden_differs": lambda cfg: cfg.Ht != cfg.H}


def switch_on(switch: str, cfg: DraftConfig) -> bool:
    return UNUSED_SWITCHES[switch](cfg)
