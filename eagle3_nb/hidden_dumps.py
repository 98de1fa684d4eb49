"""Hidden-state dumps from large targets run by the engines and trainers themselves, read into
`HiddenStateSample` (docs/domain.md "Hidden-state dumps"): speculators/vLLM
`hs_{i}.safetensors` (`read_speculators_dump`), SpecForge offline `.ckpt` files
(`read_specforge_dump`) and TensorRT-LLM SaveState `.pt` files (`read_savestate_dump`); pickles
only through `torch.load(weights_only=True)`, after their archive is bounded (io.torchfile).
`read_dump` picks the reader from what is there; `check_dump_headers` validates every file
without reading its states.
"""

from __future__ import annotations

import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from eagle3_nb.errors import DumpFormatError, UnsafeInputError
from eagle3_nb.io.safetensors import read_header
from eagle3_nb.io.torchfile import check_torch_file


@dataclass
class HiddenStateSample:
    """One sequence of target hidden states, from any dump format.

    token_ids [T]; aux_hidden_states [T, A*H] (ascending layer order, what fc consumes);
    last_hidden_state [T, H] or None, with last_hidden_kind saying which state it is ("pre_norm":
    speculators/vLLM's layer L, before the final norm; "final_norm": SpecForge's, after it);
    loss_mask [T] or None; layer_ids: the aux layer ids when known; source: the file.
    """
    token_ids: torch.Tensor
    aux_hidden_states: torch.Tensor
    last_hidden_state: torch.Tensor | None
    loss_mask: torch.Tensor | None
    layer_ids: list[int] | None
    source: str
    format: str = ""
    last_hidden_kind: str | None = None

    def __len__(self) -> int:
        return int(self.token_ids.numel())

    @property
    def hidden_size(self) -> int | None:
        return None if self.last_hidden_state is None else int(self.last_hidden_state.shape[-1])

    def num_aux(self, hidden_size: int | None = None) -> int | None:
        """A, from the aux width and H (the last hidden state's width unless given)."""
        h = hidden_size or self.hidden_size
        return None if not h else self.aux_hidden_states.shape[-1] // h


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def _dump_files(path: str | Path, pattern: str, recursive: bool, what: str) -> list[Path] | None:
    """None for a single file; a naturally sorted list (hs_2 before hs_10) for a directory."""
    p = Path(path)
    if p.is_file():
        return None
    if not p.is_dir():
        raise DumpFormatError("no such file or directory", str(p), f"pass a {what} file or a "
                              "directory of them")
    files = sorted((p.rglob if recursive else p.glob)(pattern), key=_natural_key)
    files = [f for f in files if f.is_file()]
    if not files:
        raise DumpFormatError(f"no {pattern} files", str(p), f"pass a directory of {what} files")
    return files


# One dump file is one prompt's states, read whole into memory. The largest real one is far
# below this: 8192 tokens x 4 captured layers x H 16384 in bf16 is 1 GiB.
MAX_SAMPLE_BYTES = 2 << 30


def _check_sample_size(nbytes: int, where: str) -> None:
    if nbytes > MAX_SAMPLE_BYTES:
        raise DumpFormatError(f"one sample declares {nbytes / (1 << 30):.1f} GiB (more than "
                              f"{MAX_SAMPLE_BYTES >> 30} GiB, which no single prompt's hidden "
                              "states need); each file is read whole", where,
                              "write one prompt per file, as speculators and SpecForge do")


def _drop_batch(t: torch.Tensor, rank: int, key: str, where: str) -> torch.Tensor:
    """Accept [*shape] or [1, *shape]; anything else is a shape error."""
    if t.dim() == rank + 1 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != rank:
        raise DumpFormatError(f"{key} has shape {list(t.shape)}, expected {rank} dims "
                              f"(optionally with a leading batch dim of 1)", where,
                              "write one sequence per file")
    return t


def _token_ids(t: torch.Tensor, key: str, where: str) -> torch.Tensor:
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise DumpFormatError(f"{key} has dtype {t.dtype}, expected integer token ids", where,
                              "store token ids as int64")
    return t.to(torch.long)


def read_speculators_dump(path_or_dir: str | Path, layer_ids: Sequence[int] | None = None,
                          last_is_loss_layer: bool = True, dtype: torch.dtype | None = None):
    """Read speculators/vLLM `hs_{i}.safetensors` (one file -> a sample; a directory -> a sorted
    list). Keys: `hidden_states` [seq, n_captured, H] and `token_ids` [seq].

    As speculators' trainer does: the last captured layer (default [2, L//2, L-3, L], the last is
    L) is the verifier's last hidden state, pre-norm, used for the loss; the aux input is
    `hidden_states[:, :-1].flatten(1)` in ascending order. last_is_loss_layer=False: every captured
    layer is aux and there is no last hidden state. layer_ids: the captured layer ids in file
    order (all n_captured of them), recorded on the sample (the aux part).
    """
    files = _dump_files(path_or_dir, "hs_*.safetensors", False, "hs_*.safetensors")
    if files is not None:
        return [read_speculators_dump(f, layer_ids, last_is_loss_layer, dtype) for f in files]
    from safetensors import SafetensorError
    from safetensors.torch import load_file


    path = Path(path_or_dir)
    where = str(path)
    header = read_header(path)  # bounded, validated against the file size before any mapping
    missing = [k for k in ("hidden_states", "token_ids") if k not in header.tensors]
    if missing:
        raise DumpFormatError(f"missing key(s) {missing} (has {sorted(header.tensors)})", where,
                              "a speculators dump has hidden_states [seq, layers, H] and "
                              "token_ids [seq]")
    _check_sample_size(sum(t.nbytes for t in header.tensors.values()), where)
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise DumpFormatError(f"cannot read the safetensors file ({exc})", where,
                              "the file is truncated or corrupt") from None
    hidden = tensors["hidden_states"]
    tokens = _token_ids(_drop_batch(tensors["token_ids"], 1, "token_ids", where), "token_ids",
                        where)
    hidden = _drop_batch(hidden, 3, "hidden_states", where)
    if hidden.shape[0] != tokens.shape[0]:
        raise DumpFormatError(f"hidden_states has {hidden.shape[0]} positions, token_ids "
                              f"{tokens.shape[0]}", where, "the two must describe one sequence")
    n = hidden.shape[1]
    if last_is_loss_layer and n < 2:
        raise DumpFormatError(f"only {n} captured layer: nothing left for aux after the loss "
                              "layer", where, "pass last_is_loss_layer=False if every captured "
                              "layer is an aux layer")
    ids = list(layer_ids) if layer_ids is not None else None
    if ids is not None and len(ids) != n:
        raise DumpFormatError(f"{len(ids)} layer ids given for {n} captured layers", where,
                              "pass every captured layer id, the loss layer included")
    if dtype is not None:
        hidden = hidden.to(dtype)
    if last_is_loss_layer:
        aux, last = hidden[:, :-1], hidden[:, -1].contiguous()
        aux_ids = ids[:-1] if ids is not None else None
    else:
        aux, last, aux_ids = hidden, None, ids
    return HiddenStateSample(tokens, aux.flatten(1).contiguous(), last, None, aux_ids, where,
                             "speculators", "pre_norm" if last is not None else None)


SPECFORGE_REQUIRED = ("input_ids", "aux_hidden_state")
SPECFORGE_OPTIONAL = ("loss_mask", "hidden_state")


def read_specforge_dump(path_or_dir: str | Path, layer_ids: Sequence[int] | None = None,
                        dtype: torch.dtype | None = None):
    """Read SpecForge offline `.ckpt` files (`prepare_hidden_states.py`: a torch.save'd dict with
    `input_ids`, `loss_mask`, `hidden_state` (the target's final-norm state, fed to lm_head),
    `aux_hidden_state` (the aux concat [T, A*H])); shapes may carry a leading batch dim of 1.
    One file -> a sample; a directory -> all *.ckpt under it (SpecForge writes rows_*/data_*.ckpt),
    naturally sorted. Loaded only with torch.load(weights_only=True): anything needing more is
    refused. input_ids and aux_hidden_state are required; loss_mask and hidden_state may be absent.
    """
    files = _dump_files(path_or_dir, "*.ckpt", True, ".ckpt")
    if files is not None:
        return [read_specforge_dump(f, layer_ids, dtype) for f in files]
    path = Path(path_or_dir)
    where = str(path)
    obj = _torch_load_bounded(path, ".ckpt")
    if not isinstance(obj, dict):
        raise DumpFormatError(f"the .ckpt holds a {type(obj).__name__}, not a dict", where,
                              "a SpecForge dump is a dict with input_ids, loss_mask, hidden_state "
                              "and aux_hidden_state")
    missing = [k for k in SPECFORGE_REQUIRED if k not in obj]
    if missing:
        raise DumpFormatError(f"missing key(s) {missing} (has {sorted(map(str, obj))})", where,
                              "a SpecForge dump has input_ids, loss_mask, hidden_state and "
                              "aux_hidden_state")
    for key in SPECFORGE_REQUIRED + SPECFORGE_OPTIONAL:
        if key in obj and obj[key] is not None and not isinstance(obj[key], torch.Tensor):
            raise DumpFormatError(f"{key} is a {type(obj[key]).__name__}, not a tensor", where,
                                  "store every entry as a tensor")
    tokens = _token_ids(_drop_batch(obj["input_ids"], 1, "input_ids", where), "input_ids", where)
    aux = _drop_batch(obj["aux_hidden_state"], 2, "aux_hidden_state", where)
    T = tokens.shape[0]
    last = obj.get("hidden_state")
    mask = obj.get("loss_mask")
    if last is not None:
        last = _drop_batch(last, 2, "hidden_state", where)
    if mask is not None:
        mask = _drop_batch(mask, 1, "loss_mask", where)
    for key, t in (("aux_hidden_state", aux), ("hidden_state", last), ("loss_mask", mask)):
        if t is not None and t.shape[0] != T:
            raise DumpFormatError(f"{key} has {t.shape[0]} positions, input_ids {T}", where,
                                  "every entry must describe the same sequence")
    if last is not None and aux.shape[-1] % last.shape[-1]:
        raise DumpFormatError(f"aux_hidden_state width {aux.shape[-1]} is not a multiple of "
                              f"hidden_state width {last.shape[-1]}", where,
                              "aux_hidden_state must concatenate whole target layers")
    ids = list(layer_ids) if layer_ids is not None else None
    if ids is not None and last is not None and len(ids) * last.shape[-1] != aux.shape[-1]:
        raise DumpFormatError(f"{len(ids)} layer ids given but aux_hidden_state holds "
                              f"{aux.shape[-1] // last.shape[-1]} layers", where,
                              "pass the aux layer ids the dump was made with")
    if dtype is not None:
        aux = aux.to(dtype)
        last = last.to(dtype) if last is not None else None
    if last is not None:
        last = last.contiguous()
    return HiddenStateSample(tokens, aux.contiguous(), last, mask, ids, where, "specforge",
                             "final_norm" if last is not None else None)


SAVESTATE_KEYS = ("input_ids", "hidden_state")


def read_savestate_dump(path_or_dir: str | Path, layer_ids: Sequence[int] | None = None,
                        dtype: torch.dtype | None = None) -> list:
    """Read TensorRT-LLM SaveState dumps (speculative_config decoding_type: SaveState; its
    SaveHiddenStatesDrafter._write_to_file, tensorrt_llm/_torch/speculative/save_hidden_state.py,
    read in the stored NVIDIA/TensorRT-LLM main): `<file_prefix>_<iter>.pt`, a torch.save'd list
    of one dict per request with `id`, `input_ids` [T], `hidden_state` [T, H] (the last captured
    state, the final post-norm one: SaveState always captures -1) and, with more than one
    capture layer, `hidden_state_features` [T, A*H] (the aux layers, ascending). A file or a
    directory of *.pt -> the list of samples, in file then record order. Loaded only with
    torch.load(weights_only=True), after the file's size is bounded."""
    files = _dump_files(path_or_dir, "*.pt", False, ".pt")
    if files is not None:
        return [s for f in files for s in read_savestate_dump(f, layer_ids, dtype)]
    path = Path(path_or_dir)
    where = str(path)
    records = _load_torch_records(path, where)
    return [_savestate_sample(r, i, layer_ids, dtype, where) for i, r in enumerate(records)]


def _torch_load_bounded(path: Path, kind: str) -> Any:
    """A dump written by torch.save: a regular file, its archive bounded (io.torchfile) and its
    size within a sample's (stored members: the file bounds the data), then
    torch.load(weights_only=True), the only way the kit opens a pickle."""
    where = str(path)
    if not path.is_file():  # a FIFO or device would block torch.load
        raise DumpFormatError("is not a regular file", where, "point at the dump file itself")
    check_torch_file(path)
    _check_sample_size(path.stat().st_size, where)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = (str(exc).strip().splitlines() or ["unpickling refused"])[0]
        raise UnsafeInputError(f"the {kind} needs more than plain tensors to load ({first})",
                               where, "the kit loads pickles only with weights_only=True; re-save "
                               "the tensors from a trusted environment") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DumpFormatError(f"cannot read the {kind} ({first})", where,
                              "the file is truncated or not a torch.save file") from None


def _load_torch_records(path: Path, where: str) -> list:
    obj = _torch_load_bounded(path, ".pt")
    if not isinstance(obj, list) or not obj or not all(isinstance(r, dict) for r in obj):
        raise DumpFormatError(f"the .pt holds a {type(obj).__name__}, not a list of records",
                              where, "a SaveState dump is a list of dicts with input_ids and "
                              "hidden_state")
    return obj


def _savestate_sample(record: dict, i: int, layer_ids, dtype, where: str) -> HiddenStateSample:
    at = f"{where} [record {i}]"
    missing = [k for k in SAVESTATE_KEYS if not isinstance(record.get(k), torch.Tensor)]
    if missing:
        raise DumpFormatError(f"missing or non-tensor key(s) {missing} (has "
                              f"{sorted(map(str, record))})", at, "a SaveState record has "
                              "input_ids, hidden_state and hidden_state_features tensors")
    tokens = _token_ids(_drop_batch(record["input_ids"], 1, "input_ids", at), "input_ids", at)
    last = _drop_batch(record["hidden_state"], 2, "hidden_state", at)
    feats = record.get("hidden_state_features")
    if not isinstance(feats, torch.Tensor):
        raise DumpFormatError("no hidden_state_features: the dump captured one layer, so it "
                              "holds no aux states for fc", at, "dump with eagle3_layers_to_"
                              "capture naming the aux layers (SaveState adds -1 itself)")
    aux = _drop_batch(feats, 2, "hidden_state_features", at)
    T = tokens.shape[0]
    for key, t in (("hidden_state", last), ("hidden_state_features", aux)):
        if t.shape[0] != T:
            raise DumpFormatError(f"{key} has {t.shape[0]} positions, input_ids {T}", at,
                                  "every entry must describe the same sequence")
    if aux.shape[-1] % last.shape[-1]:
        raise DumpFormatError(f"hidden_state_features width {aux.shape[-1]} is not a multiple "
                              f"of hidden_state width {last.shape[-1]}", at,
                              "the features must concatenate whole target layers")
    if dtype is not None:
        aux, last = aux.to(dtype), last.to(dtype)
    ids = list(layer_ids) if layer_ids is not None else None
    return HiddenStateSample(tokens, aux.contiguous(), last.contiguous(), None, ids, at,
                             "savestate", "final_norm")


def check_dump_headers(path: str | Path) -> int:
    """Validate every dump file under `path` without reading its states: speculators files by
    their safetensors header (keys, size), SpecForge files by their zip directory and size.
    Returns the number of files; the same errors read_dump would raise for them."""
    p = Path(path)
    if p.is_dir() and next(p.glob("hs_*.safetensors"), None):
        files = _dump_files(p, "hs_*.safetensors", False, "hs_*.safetensors")
    elif p.is_dir() and next(p.glob("*.pt"), None):
        files = _dump_files(p, "*.pt", False, ".pt")
    elif p.is_dir():
        files = _dump_files(p, "*.ckpt", True, ".ckpt")
    else:
        files = [p] if p.is_file() else _dump_files(p, "*", False, "dump")
    for f in files:
        where = str(f)
        if f.suffix == ".safetensors":
            header = read_header(f)
            missing = [k for k in ("hidden_states", "token_ids") if k not in header.tensors]
            if missing:
                raise DumpFormatError(f"missing key(s) {missing}", where, "a speculators dump "
                                      "has hidden_states [seq, layers, H] and token_ids [seq]")
            _check_sample_size(sum(t.nbytes for t in header.tensors.values()), where)
        elif f.suffix in (".ckpt", ".pt"):
            check_torch_file(f)
            _check_sample_size(f.stat().st_size, where)
        else:
            raise DumpFormatError(f"unknown dump file type {f.suffix!r}", where,
                                  "pass an hs_*.safetensors or a .ckpt file")
    return len(files)


def read_dump(path: str | Path, **kwargs):
    """Dispatch on what is there: hs_*.safetensors -> speculators, *.ckpt -> SpecForge, *.pt ->
    SaveState (a list of samples per file)."""
    p = Path(path)
    if p.is_file():
        if p.suffix == ".safetensors":
            return read_speculators_dump(p, **kwargs)
        if p.suffix == ".ckpt":
            return read_specforge_dump(p, **kwargs)
        if p.suffix == ".pt":
            return read_savestate_dump(p, **kwargs)
        raise DumpFormatError(f"unknown dump file type {p.suffix!r}", str(p),
                              "pass an hs_*.safetensors, a .ckpt or a SaveState .pt file")
    if p.is_dir():
        if next(p.glob("hs_*.safetensors"), None):
            return read_speculators_dump(p, **kwargs)
        if next(p.rglob("*.ckpt"), None):
            return read_specforge_dump(p, **kwargs)
        if next(p.glob("*.pt"), None):
            return read_savestate_dump(p, **kwargs)
        raise DumpFormatError("neither hs_*.safetensors, *.ckpt nor *.pt files here", str(p),
                              "pass a speculators, SpecForge or SaveState hidden-state dump "
                              "directory")
    raise DumpFormatError("no such file or directory", str(p), "pass a dump file or directory")
