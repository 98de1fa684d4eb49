"""vLLM serving flags a person checks by hand, filled in from an inspection's JSON form; each row
cites the upstream file and function it comes from, in the release named by SRC (read in the
wheel make engine-env installs; older releases: the profiles, profiles.py)."""

from __future__ import annotations

import json
from typing import Any

from eagle3_nb.engines.advice import aux_text, loads_as_is, row

SRC = "vllm-project/vllm v0.34.0 vllm/"


def flag_rows(data: dict[str, Any], profiles: list[dict]) -> list[dict[str, str]]:
    ckpt = data.get("checkpoint")
    spec = f'{{"method": "eagle3", "model": {json.dumps(ckpt)}, "num_speculative_tokens": K}}'
    # docs/speculators-and-vllm.md §4 (config ingestion, method auto-detection,
    # verifier must be a remote repo id in 0.33, aux ids read as hidden_states[id])
    rows = [
        row("vLLM", f"--speculative-config '{spec}'",
             'method must be "eagle3": vLLM infers it only when the draft path contains "eagle3"; '
             f"loads as is on: {loads_as_is(profiles)}",
             SRC + "v1/worker/gpu/spec_decode/eagle/config.py Eagle3SpeculatorConfig.matches "
             "('eagle3' in the draft path; in 0.33.0 config/speculative.py "
             "SpeculativeConfig.__post_init__); docs/speculators-and-vllm.md §4"),
        row("vLLM", "num_speculative_tokens",
             "the draft depth K; compare accept lengths only at equal K (vLLM's mean acceptance "
             "length = 1 + accepted / drafts)",
             SRC + "v1/spec_decode/metrics.py SpecDecodingLogging.log; docs/domain.md "
             "vLLM; docs/speculators-and-vllm.md §4"),
        row("vLLM", "aux layer ids", "vLLM captures hidden_states[id] with no offset; model "
             "runner V2 (the default from 0.29.0, the only runner from 0.34.0) reads the ids only "
             "at the top level of the draft's config.json. " + aux_text(profiles),
             SRC + "model_executor/models/interfaces.py EagleModelMixin."
             "_maybe_add_hidden_state (called from LlamaModel.forward in models/llama.py); "
             "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config; "
             "each release's reader: eagle3_nb/engines/vllm/profiles.py; docs/domain.md 'Aux layer ids'"),
    ]
    if (data.get("config") or {}).get("dialect") == "speculators":
        rows.append(row("vLLM", "--model TARGET with --speculative-config",
                         "a speculators config names its verifier; in 0.33 and 0.34 a local "
                         "verifier path raises, so pass the target and the speculative config explicitly",
                         SRC + "transformers_utils/config.py maybe_override_with_speculators "
                         "(\"Speculators verifier must name a remote model repository\"); "
                         "docs/speculators-and-vllm.md §4"))
    return rows
