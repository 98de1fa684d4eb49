"""data_samples/dumps/: hidden-state dumps of the bundled target on its first held-out prompts, in
the two formats the kit reads (eagle3_nb.hidden_dumps.read_dump), so that `report --hidden-states` and
`accept --hidden-states` have something to run on before a real target's dumps exist.

    speculators/hs_{i}.safetensors        as speculators' offline data generation saves vLLM's
                                          extract_hidden_states: `hidden_states` [T, 4, H] for
                                          layers [2, L//2, L-3, L] (the last pre-norm, for the
                                          loss) and `token_ids` [T]
    specforge/rows_0-2000/data_{i}.ckpt   as SpecForge's scripts/prepare_hidden_states.py
                                          (`_save_tensor`) saves them: a torch.save'd dict of
                                          `input_ids` [T], `loss_mask` [T], `hidden_state`
                                          [1, T, H] (after the final norm) and
                                          `aux_hidden_state` [1, T, 3H] for its default
                                          "output of layer" ids [1, L//2-1, L-4]
    manifest.json                         what each file holds (keys, dtypes, shapes)

Both formats hold the same states of the same tokens, in bfloat16 as the engines dump them.
They come from a float forward pass, whose last bits may differ between CPUs: tests compare
regenerated values with a tolerance, and the manifest byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from eagle3_nb.samples.training import cpu_threads
from eagle3_nb.samples.weights import BF16, DEFAULT_AUX_IDS, TARGET_LAYERS
from eagle3_nb.samples.writers import owned, write_json
from eagle3_nb.session import read_prompts
from eagle3_nb.target import TargetModel

DUMPS = "dumps"
N_PROMPTS, N_TOKENS = 4, 64   # the first tokens of the first held-out prompts (all have >= 64)
# speculators / vLLM default capture: the aux layers (inputs of layers 2, L//2, L-3) plus L
SPECULATORS_LAYERS = [*DEFAULT_AUX_IDS, TARGET_LAYERS]
# SpecForge's default aux ids, "output of layer" ids: the same states as DEFAULT_AUX_IDS
SPECFORGE_AUX_IDS = [i - 1 for i in DEFAULT_AUX_IDS]
SPECFORGE_ROWS = "rows_0-2000"


def build_dumps(out_dir: Path, trained_dir: Path) -> bool:
    """Rewrite out_dir/dumps/ from the trained target and prompts in trained_dir; False (and
    nothing written) when trained_dir holds no trained target."""
    target_dir = Path(trained_dir) / "target"
    if not (target_dir / "model.safetensors").is_file():
        return False
    root = Path(out_dir) / DUMPS
    if root.exists():
        shutil.rmtree(root)
    with cpu_threads(1):  # one summation order on this machine
        target = TargetModel.load(target_dir)
        prompts = read_prompts(Path(trained_dir) / "prompts.jsonl", target, N_PROMPTS)
        files: dict[str, dict[str, torch.Tensor]] = {}
        for i, prompt in enumerate(prompts):
            files.update(_write_prompt(root, i, prompt[:N_TOKENS], target))
    write_json(root / "manifest.json", dump_manifest(files))
    return True


def _write_prompt(root: Path, i: int, ids: torch.Tensor,
                  target: TargetModel) -> dict[str, dict[str, torch.Tensor]]:
    out = target.forward_hidden(ids)
    speculators = {
        "hidden_states": torch.stack([out.state(k, final="pre_norm")
                                      for k in SPECULATORS_LAYERS], dim=1).to(BF16),
        "token_ids": ids}
    specforge = {
        "input_ids": ids, "loss_mask": torch.ones_like(ids),  # raw text: every token supervised
        "hidden_state": out.final_norm[None].to(BF16),
        # "output of layer i" is HF hidden_states[i + 1]
        "aux_hidden_state": torch.cat([out.state(i + 1) for i in SPECFORGE_AUX_IDS],
                                      dim=-1)[None].to(BF16)}
    hs = f"speculators/hs_{i}.safetensors"
    ckpt = f"specforge/{SPECFORGE_ROWS}/data_{i}.ckpt"
    (root / hs).parent.mkdir(parents=True, exist_ok=True)
    (root / ckpt).parent.mkdir(parents=True, exist_ok=True)
    save_file(owned(speculators), str(root / hs))
    # torch.save names its zip records after the file stem: the name is part of the bytes
    torch.save(owned(specforge), root / ckpt)
    return {hs: speculators, ckpt: specforge}


def dump_manifest(files: dict[str, dict[str, torch.Tensor]]) -> dict[str, Any]:
    return {
        "target": "../target",
        "prompts": f"the first {N_TOKENS} tokens of the first {N_PROMPTS} prompts of "
                   "../prompts.jsonl",
        "formats": {
            "speculators": {"captured_layers": SPECULATORS_LAYERS,
                            "last": "layer L before the final norm (the loss layer)"},
            "specforge": {"aux_hidden_states_layers": SPECFORGE_AUX_IDS,
                          "convention": "output of layer (hidden_states[id + 1])",
                          "last": "after the final norm"},
        },
        "files": {name: {key: {"dtype": str(t.dtype).removeprefix("torch."),
                               "shape": list(t.shape)} for key, t in sorted(tensors.items())}
                  for name, tensors in files.items()},
    }
