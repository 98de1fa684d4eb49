"""How SGLang reads a model path's name before its config.json: from 0.5.11 its config loader
sends a path naming both "eagle" and "mistral" (any case) to the Mistral native-format parser
(params.json), since EAGLE drafts for Mistral targets ship only in that format. A Hugging Face
format draft in such a folder has no params.json, and the server fails at startup.

Read in the wheels: `is_mistral_model` in srt/utils/hf_transformers/mistral_utils.py (0.5.11,
0.5.12.post1, 0.5.16, 0.5.20, 0.5.23), chosen by `get_config` in srt/utils/hf_transformers/
config.py; 0.5.10 has only the "mistral-large-3" / "mistral-small-4" names in
srt/utils/hf_transformers_utils.py. `--model-config-parser` (default "auto": the name rule) is a
server argument from 0.5.12.post1 (server_args.py); 0.5.11 has none.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_nb.engines.profile import release_key

FIRST = "0.5.11"
PARSER_FLAG_FROM = "0.5.12.post1"


def misread_path(path: str, version: str, files_at: Path) -> tuple[str, str]:
    """(what SGLang VERSION does with the draft served from PATH, whose files are those at
    FILES_AT here, the way out), or ("", "")."""
    lower = str(path).lower()
    if release_key(version) < release_key(FIRST) or not ("eagle" in lower and "mistral" in lower):
        return "", ""
    if (files_at / "params.json").is_file():  # a native-format draft: the rule is meant for it
        return "", ""
    flag = (" or pass --model-config-parser hf" if release_key(version) >=
            release_key(PARSER_FLAG_FROM) else "")
    return ("reads a path naming both 'eagle' and 'mistral' as Mistral's native format "
            "(params.json, is_mistral_model in srt/utils/hf_transformers/mistral_utils.py); this "
            "Hugging Face format draft has none, so the server fails at startup",
            f"serve it from a path without one of those words{flag}")
