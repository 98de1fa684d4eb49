"""SGLang serving flags a person checks by hand, filled in from an inspection's JSON form; each row
cites the upstream file and function it comes from, in the release named by SRC (read in the
wheel make engine-env installs; older releases: the profiles, profiles.py)."""

from __future__ import annotations

from eagle3_nb.engines.advice import aux_text, loads_as_is, row

SRC = "sgl-project/sglang v0.5.23 python/sglang/srt/"


def flag_rows(data: dict[str, Any], profiles: list[dict]) -> list[dict[str, str]]:
    ckpt, codes = data.get("checkpoint"), {f["code"] for f in data.get("findings", [])}
    # docs/sglang-serving.md §1 (set_embed_and_head, d2t ignored, no capture
    # under EAGLE), §4.5 (CLI flags, auto-chosen (steps, topk, draft tokens)), PR #21272
    rows = [
        row("SGLang", "--speculative-algorithm EAGLE3",
             "not EAGLE: with EAGLE no aux states are captured, the target's head replaces the "
             "draft's and d2t is ignored; accept length ~1.0 with no error",
             SRC + "speculative/eagle_worker_v2.py EagleDraftWorker.init_lm_head "
             "(set_embed_and_head unless EAGLE3), init_token_map; python/sglang/srt/"
             "model_executor/model_runner_components/spec_aux_hidden_state.py "
             "_resolve_eagle_aux_hidden_state (captures only under is_eagle3()); sglang PR "
             "#21272; docs/sglang-serving.md §1, §2, §4.5"),
        row("SGLang", f"--speculative-draft-model-path {ckpt}",
             f"the directory inspected here (or your converted copy); loads as is on: "
             f"{loads_as_is(profiles)}", SRC + "arg_groups/speculative_hook.py "
             "_handle_eagle_family; docs/sglang-serving.md §4.5"),
        row("SGLang", "--speculative-num-steps, --speculative-eagle-topk, "
             "--speculative-num-draft-tokens",
             "set all three or none (only some: assertion); unset, SGLang picks (5, 4, 8) for "
             "Llama targets and (3, 1, 4) otherwise; with topk 1 draft tokens = steps + 1. "
             "Compare accept lengths only at equal settings",
             SRC + "arg_groups/speculative_hook.py _handle_eagle_family "
             "(the all-or-none assert), _auto_choose_speculative_params (there from 0.5.16; in "
             "0.5.9 and 0.5.12.post1 python/sglang/srt/server_args.py "
             "auto_choose_speculative_params); "
             "docs/sglang-serving.md §4.5"),
        row("SGLang", "eagle_config.eagle_aux_hidden_state_layer_ids (draft config.json)",
             "SGLang reads aux layer ids only from the nested eagle_config. "
             + aux_text(profiles),
             SRC + "model_executor/model_runner_components/"
             "spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state (eagle_config only); "
             "each release's reader: eagle3_nb/engines/sglang/profiles.py; docs/domain.md 'Aux layer "
             "ids'; docs/sglang-serving.md §2"),
    ]
    if "CONTEXT_TOO_SHORT" in codes:
        rows.append(row("SGLang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
                         "the draft's max_position_embeddings is below the target's context: "
                         "startup fails without it, acceptance drops on long prompts with it",
                         SRC + "configs/model_config.py "
                         "ModelConfig._derive_context_length; docs/sglang-serving.md §4.5"))
    if "REMOTE_CODE" in codes:
        rows.append(row("SGLang", "no --trust-remote-code",
                         "the checkpoint ships code; SGLang would import it",
                         SRC + "utils/hf_transformers/config.py get_config (passes "
                         "trust_remote_code to its config parser); docs/domain.md SGLang"))
    return rows
