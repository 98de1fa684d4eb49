"""Writers for data_samples/: JSON as save_pretrained writes it, safetensors files (single or
sharded with an index) whose bytes depend only on the tensors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file


def write_json(path: Path, obj: Any, sort_keys: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=sort_keys) + "\n", encoding="utf-8")


def write_config(directory: Path, config: dict[str, Any]) -> None:
    write_json(directory / "config.json", config, sort_keys=True)  # as HF save_pretrained does


def owned(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # each tensor gets its own compact storage: shared storages break save_file and bloat torch.save
    return {k: tensors[k].contiguous().clone() for k in sorted(tensors)}


def write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(owned(tensors), str(path), metadata={"format": "pt"})


def write_draft(directory: Path, config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    write_config(directory, config)
    write_safetensors(directory / "model.safetensors", tensors)


def write_sharded(directory: Path, tensors: dict[str, torch.Tensor],
                  shards: list[list[str]]) -> None:
    """HF sharded layout: model-0000i-of-0000n.safetensors plus model.safetensors.index.json."""
    weight_map: dict[str, str] = {}
    for i, names in enumerate(shards, start=1):
        file = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(directory / file, {n: tensors[n] for n in names})
        weight_map.update({n: file for n in names})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    write_json(directory / "model.safetensors.index.json",
               {"metadata": {"total_size": total},
                "weight_map": {n: weight_map[n] for n in sorted(weight_map)}})
