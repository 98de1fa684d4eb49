"""SGLang's server log: how to tell it, its release and resolved arguments, and the texts it
prints when an EAGLE-3 draft goes wrong (signatures, each with where the text was read)."""

from __future__ import annotations

import re

from eagle3_nb.engines.profile import releases_where
from eagle3_nb.engines.registry import LogDialect, Signature, Toggle
from eagle3_nb.engines.sglang import observe
from eagle3_nb.engines.sglang.profiles import PROFILES
from eagle3_nb.engines.sglang.releases import RELEASES
from eagle3_nb.findings import ERROR
from eagle3_nb.io.logs import last_line_with, literal_dict, literal_keywords

_MARKERS = ("sglang/srt/", "sglang.launch_server", "server_args=ServerArgs(", "server_args={'",
            "sglang.srt.", "Decode batch", "Scheduler hit an exception")
# SGLang's server log prints no release (0.5.9, 0.5.16, 0.5.23 read: it is only in the
# /server_info JSON); a pasted environment dump (python -m sglang.check_env) names it.
_VERSIONS = (re.compile(r"\bsglang(?:\s*[:=]+\s*|\s+|-)v?(\d+\.\d+\.\d+(?:\.post\d+)?)\b",
                        re.I),)


def next_release(release: str) -> str:
    names = [r for r, _ in RELEASES]
    return names[names.index(release) + 1]


def server_args(text: str) -> dict | None:
    """The `server_args=...` line SGLang logs at launch (srt/entrypoints/engine.py Engine.__init__:
    a ServerArgs(...) repr in 0.5.9 and 0.5.16, a dict of resolved_dict() in 0.5.23), as observe
    records the server's arguments."""
    found = last_line_with(text, "server_args=")
    if found is None:
        return None
    line, no = found
    body = line[len("server_args="):]
    fields = literal_dict(body) if body.startswith("{") else literal_keywords(body)
    if not fields:
        return None
    args = observe.server_args(fields)
    args["source"] = f"SGLang server_args line (log line {no})"
    return args


_LLAMA_EAGLE3 = "python/sglang/srt/models/llama_eagle3.py"
_ONE_LAYER = releases_where(PROFILES, lambda p: p.max_layers == 1)
_READ = ("0.5.9", "0.5.16", "0.5.23")
_READ_TEXT = "read in the 0.5.9, 0.5.16 and 0.5.23 wheels"
_ARCH_FIX = ('set the draft config\'s architectures to ["LlamaForCausalLMEagle3"] in a copy '
             "(eagle3-nb convert DRAFT NEW --engine sglang==VERSION)")
SIGNATURES = (
    Signature("sglang-speculators-config",
              r"Unrecognized model in (?P<path>\S+?)\.? Should have a .model_type. key",
              "LOAD_ERROR", ERROR, "the draft's config.json has no model_type: a speculators-"
              "format config, which SGLang reads through transformers' AutoConfig and cannot "
              "(it reads flat configs only)",
              "convert a copy to the flat form: eagle3-nb convert DRAFT NEW --to eagle",
              "transformers AutoConfig.from_pretrained, reached through SGLang's get_config; the "
              "profiles' dialect_error; eagle3-nb probe on sglang 0.5.23 (the speculators "
              "samples)", None, None),
    Signature("sglang-one-layer", r"EAGLE3 currently only supports 1 layer", "LOAD_ERROR", ERROR,
              "the draft has more than one decoder layer; this release builds exactly one",
              f"serve a one-layer draft, or SGLang {next_release(_ONE_LAYER[1])} or later "
              "(multi-layer EAGLE-3 drafts); eagle3-nb inspect DRAFT --engine sglang==VERSION "
              "shows which layers load",
              f"{_LLAMA_EAGLE3} LlamaForCausalLMEagle3.__init__ (ValueError; 0.5.9 L199), the "
              "profiles' too_many_layers_error; eagle3-nb probe", *_ONE_LAYER),
    Signature("sglang-one-layer-mla", r"EAGLE3 currently only supports 1 layer", "LOAD_ERROR",
              ERROR, "the MLA (Kimi-K2.5-style) draft has more than one decoder layer; SGLang's "
              "MLA draft class builds exactly one", "serve a one-layer MLA draft",
              "python/sglang/srt/models/kimi_k25_eagle3.py Eagle3MLAModel.__init__ (0.5.16 L243, "
              "0.5.23 L244)", next_release(_ONE_LAYER[1]), None, frame="kimi_k25_eagle3"),
    Signature("sglang-not-registered",
              r"Cannot find model module\. '(?P<arch>[^']+)' is not a registered model",
              "LOAD_ERROR", ERROR, "the draft config's architectures names {arch}, a class SGLang "
              "does not register (its Llama EAGLE-3 draft is LlamaForCausalLMEagle3)", _ARCH_FIX,
              f"python/sglang/srt/model_loader/utils.py resolve_transformers_arch ({_READ_TEXT})",
              "0.5.9", None),
    Signature("sglang-unsupported-arch",
              r"Model architectures (?P<archs>\[[^\]]*\]) are not supported for now", "LOAD_ERROR",
              ERROR, "the draft config's architectures {archs} name no class this release "
              "registers", _ARCH_FIX,
              f"python/sglang/srt/models/registry.py _ModelRegistry._raise_for_unsupported "
              f"({_READ_TEXT})", "0.5.9", None),
    Signature("sglang-target-class-loads-draft", r"KeyError: '(?P<key>midlayer\.[^']*)'",
              "LOAD_ERROR", ERROR, "the draft config names a target class (here Qwen3's), which "
              "SGLang loads as is: the target model's loader meets the draft's key {key}",
              _ARCH_FIX, "python/sglang/srt/models/qwen3.py Qwen3ForCausalLM.load_weights "
              f"(params_dict[name]; {_READ_TEXT}); Tencent/AngelSlim#39", "0.5.9", None,
              frame=r"models/qwen\w*\.py"),
    Signature("sglang-context-too-long",
              r"context_length \((?P<target>\d+)\) is greater than the derived context_length "
              r"\((?P<draft>\d+)\)", "CONTEXT_TOO_SHORT", ERROR,
              "the serving context ({target}) exceeds what the draft's config allows ({draft}): "
              "SGLang refuses to start",
              "set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (acceptance drops past the "
              "draft's trained context) or serve a shorter --context-length",
              f"python/sglang/srt/configs/model_config.py ModelConfig._derive_context_length "
              f"(ValueError; {_READ_TEXT})", "0.5.9", None),
    Signature("sglang-weight-shape",
              r"Attempted to load weight \(torch\.Size\(\[(?P<loaded>[^\]]*)\]\)\) into "
              r"parameter \(torch\.Size\(\[(?P<expected>[^\]]*)\]\)\)", "LOAD_ERROR", ERROR,
              "a checkpoint tensor of shape [{loaded}] goes into a parameter of shape "
              "[{expected}]: for fc, the engine built it for another number of aux states",
              "eagle3-nb inspect DRAFT --engine sglang==VERSION --target-config TARGET names the "
              "tensor and the aux count SGLang builds fc for",
              "python/sglang/srt/model_loader/weight_utils.py default_weight_loader "
              f"(AssertionError; {_READ_TEXT})", "0.5.9", None),
    Signature("sglang-cuda-graph-capture", r"Capture cuda graph failed: (?P<cause>[^\n]*)",
              "LOAD_ERROR", ERROR, "CUDA-graph capture failed at startup ({cause}); the draft's "
              "own sizes are the known causes in some releases (draft vocab not a multiple of "
              "64: sglang#10106; aux count other than 3: #29464; target_hidden_size other than "
              "hidden_size: #8163), and eagle3-nb inspect names them for the release",
              "eagle3-nb inspect DRAFT --engine sglang==VERSION; if it names nothing, follow the "
              "A/B plan from its first toggle",
              "python/sglang/srt/model_executor/cuda_graph_runner.py [0.5.9], "
              "model_executor/runner_backend_utils/__init__.py [0.5.16, 0.5.23] "
              "(CUDA_GRAPH_CAPTURE_FAILED_MSG; RuntimeErrors only)", "0.5.9", None, ab_plan=True),
    Signature("sglang-tp-heads", r"^AssertionError$", "LAUNCH_SETTING", ERROR,
              "an attention or kv head count of the draft (or the target) is not divisible by "
              "the tensor-parallel size, or the size by the kv heads: SGLang's Llama layer "
              "asserts at startup", "eagle3-nb inspect DRAFT --launch 'COMMAND' names the "
              "draft's sizes that fail; serve at a tensor-parallel size that divides them",
              "python/sglang/srt/models/llama.py LlamaAttention.__init__ (bare asserts; 0.5.9 "
              "L139-149, 0.5.16 L144-154, 0.5.23 L183-193)", "0.5.9", None,
              frame=r"models/llama\.py:\d+ __init__"),
    Signature("sglang-not-divisible", r"(?P<size>\d+) is not divisible by (?P<tp>\d+)",
              "LAUNCH_SETTING", ERROR, "a layer of size {size} cannot be sharded {tp} ways",
              "eagle3-nb inspect DRAFT --launch 'COMMAND' names the draft's sizes that fail; "
              "serve at a tensor-parallel size that divides them",
              "python/sglang/srt/distributed/utils.py ensure_divisibility, called from "
              f"srt/layers/linear.py ({_READ_TEXT})", "0.5.9", None,
              frame=r"linear\.py|distributed/utils\.py"),
    Signature("sglang-partial-drafting-flags", r"^AssertionError$", "LAUNCH_SETTING", ERROR,
              "only some of --speculative-num-steps, --speculative-eagle-topk and "
              "--speculative-num-draft-tokens are set: SGLang asserts all three or none",
              "set all three drafting flags, or none (SGLang then picks them for the target)",
              "python/sglang/srt/server_args.py ServerArgs._handle_speculative_decoding [0.5.9]; "
              "srt/arg_groups/speculative_hook.py _handle_eagle_family [0.5.16, 0.5.23] (a bare "
              "assert)", "0.5.9", None,
              frame=r"_handle_speculative_decoding|_handle_eagle_family"),
)

# Flags read in the ServerArgs fields (server_args.py; from 0.5.16 also arg_groups/) of these
# releases; SGLANG_ENABLE_SPEC_V2 is read in 0.5.9's server_args.py, and 0.5.16's
# speculative_hook.py warns that it "has been removed".
_SMALL_GRAPHS = ("graphs captured for large batches (memory at capture, buffer indexing at batch "
                 "sizes the draft was never run at)")
TOGGLES = (
    Toggle("--disable-cuda-graph", "CUDA-graph capture and replay: buffers sized from the "
           "wrong config (sglang#8163, #10106, #29464 were all graph-only)", "0.5.9", None, _READ),
    Toggle("--speculative-eagle-topk 1 --speculative-num-draft-tokens <num_steps + 1>",
           "tree drafting: a chain drafts one candidate per step", "0.5.9", None, _READ),
    Toggle("--speculative-draft-attention-backend triton", "the attention backend the draft "
           "inherits from the target (an MLA or hardware-specific one for a plain draft)",
           "0.5.9", None, _READ),
    # 0.5.23's parser has no --cuda-graph-max-bs, only --cuda-graph-max-bs-decode/-prefill
    # (srt/arg_groups; asked of its ServerArgs.add_cli_args, tests/test_log.py); the release that
    # renamed it was not read, so 0.5.17 to 0.5.22 are offered neither
    Toggle("--cuda-graph-max-bs 8", _SMALL_GRAPHS, "0.5.9", "0.5.16", ("0.5.9", "0.5.16")),
    Toggle("--cuda-graph-max-bs-decode 8", _SMALL_GRAPHS, "0.5.23", None, ("0.5.23",)),
    Toggle("--max-running-requests 1", "batching: one request at a time", "0.5.9", None, _READ),
    Toggle("SGLANG_ENABLE_SPEC_V2=0", "the overlap (spec v2) scheduler", "0.5.9", "0.5.9",
           ("0.5.9",)),
)

DIALECT = LogDialect(markers=_MARKERS, versions=_VERSIONS, server_args=server_args,
                     signatures=SIGNATURES, toggles=TOGGLES)
