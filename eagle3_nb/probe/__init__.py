"""Proof instead of prediction: run the INSTALLED engine's own draft class and `load_weights`
on a checkpoint and compare what it did with the engine's profile (engines.planner.plan_load).

    probe_checkpoint(draft_dir, "sglang") -> ProbeResult

Imports torch and the engine; nothing on the header path imports this package.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_nb.findings import Finding
from eagle3_nb.probe.budget import check_build_size, raise_if_out_of_memory
from eagle3_nb.probe.compare import Difference, compare, findings
from eagle3_nb.probe.record import Observation, observe_load


@dataclass
class ProbeResult:
    engine: str
    version: str
    profile: str                 # key of the profile that answered
    profile_verified: bool       # False: the nearest profile stood in for an unread release
    draft_class: str
    observation: Observation
    differences: list[Difference]
    findings: list[Finding]
    stubs: list[dict[str, str]]
    notes: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"kind": "probe", "engine": self.engine, "version": self.version,
                "profile": self.profile, "profile_verified": self.profile_verified,
                "draft_class": self.draft_class, "agrees": self.agrees,
                "differences": [d.to_json() for d in self.differences],
                "observed": self.observation.to_json(),
                "findings": [f.to_json() for f in self.findings],
                "stubs": self.stubs, "notes": self.notes}

    def summary(self) -> str:
        head = (f"{self.engine} {self.version} (profile {self.profile}"
                f"{'' if self.profile_verified else ', unverified'}), {self.draft_class or 'no draft'}: "
                + ("agrees with the profile" if self.agrees
                   else f"{len(self.differences)} difference(s) from the profile"))
        lines = [head]
        obs = self.observation
        if obs.build_error:
            lines.append(f"  build raised: {obs.build_error}")
        for k in obs.keys:
            where = ", ".join(k.params) if k.params else ""
            lines.append(f"  {k.name}: {k.fate}" + (f" -> {where}" if where else "")
                         + (f" ({k.error})" if k.error else ""))
        if not obs.build_error:
            lines.append(f"  load_weights: {'raised ' + obs.raised if obs.raised else 'returned'}")
            if obs.unwritten:
                lines.append("  never written: " + ", ".join(
                    f"{p}" + (f" ({s:.0%})" if s < 1 else "") for p, s in obs.unwritten.items()))
        for d in self.differences:
            lines.append(f"  DISAGREES {d.text()}")
        lines.append("  stubs: " + (", ".join(s["module"] for s in self.stubs) or "none"))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def read_weights(ckpt) -> list[tuple[str, Any]]:
    """The checkpoint's tensors through the kit's own reader (safetensors: eagle3_nb.io; pickle:
    already loaded with weights_only=True), as CPU torch tensors in their stored dtype."""
    import torch

    out = []
    for name, info in ckpt.tensors.items():
        if ckpt.format == "pickle":
            out.append((name, ckpt.pickled_tensor(name).detach().cpu()))
            continue
        array = ckpt.read_array(name, max_bytes=8 << 30)
        tensor = torch.from_numpy(array.copy())
        dtype = _TORCH_DTYPES.get(info.dtype)
        out.append((name, tensor.to(getattr(torch, dtype)) if dtype else tensor))
    return out


_TORCH_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64",
                 "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "I64": "int64",
                 "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def _inside(path: str | None, folder: Path) -> bool:
    if not isinstance(path, str) or not os.path.isabs(path):  # torch.ops's __file__ is a name
        return False
    try:
        return Path(path).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def refuse_checkpoint_code(folder: Path) -> None:
    """The probe runs untrusted checkpoints through the engine's loader: refuse when the
    checkpoint's folder is on sys.path (its .py files would shadow real modules) or when a module
    was already imported from it."""
    from eagle3_nb.errors import Eagle3NbError

    folder = Path(folder).resolve()
    on_path = [p for p in sys.path if isinstance(p, str) and os.path.isdir(p or ".")
               and _inside(os.path.abspath(p or "."), folder)]
    loaded = sorted(name for name, mod in list(sys.modules.items())
                    if _inside(getattr(mod, "__file__", None), folder))
    if on_path or loaded:
        what = (f"modules imported from it: {', '.join(loaded[:5])}" if loaded
                else f"it is on sys.path ({on_path[0] or 'the working directory'})")
        raise Eagle3NbError(
            f"the checkpoint folder could run its own code in this process: {what}", str(folder),
            "run the probe through the side environment's console script "
            "(.cache/engines/<engine>-<version>/bin/eagle3-nb probe DRAFT), or with python -P, "
            "from a directory outside the checkpoint, and without it on PYTHONPATH")


def probe_checkpoint(path: str | Path, engine: str,
                     target_config: str | Path | None = None) -> ProbeResult:
    """Run ENGINE's own draft class and load_weights on the checkpoint at PATH and compare
    what it did with the profile; the adapter's temporary directories go when it ends."""
    from eagle3_nb.engines.probing import remove_scratch

    path = Path(path).absolute()
    target_config = Path(target_config).absolute() if target_config else None
    try:
        return _probe(path, engine, target_config)
    finally:
        remove_scratch()


@contextmanager
def _working_directory_of_its_own():
    """The engine starts child Pythons with `python -m` (vLLM's registry._run_in_subprocess
    inspects model classes that way), and `-m` puts the working directory first on the child's
    path: run from a scratch directory, and tell every child Python not to put its directory on
    the path at all (PYTHONSAFEPATH, Python 3.11+)."""
    from eagle3_nb.engines.probing import scratch_dir

    before, safe = os.getcwd(), os.environ.get("PYTHONSAFEPATH")
    os.chdir(scratch_dir("cwd"))
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        os.chdir(before)
        if safe is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = safe


def _probe(path: Path, engine: str, target_config: Path | None) -> ProbeResult:
    from eagle3_nb.engines import engine as registered
    from eagle3_nb.engines.probing import engine_version
    from eagle3_nb.io.checkpoint import Checkpoint

    adapter = registered(engine).probe
    if not adapter:
        from eagle3_nb.errors import Eagle3NbError
        raise Eagle3NbError(f"the kit has no probe adapter for {engine}", "--engine",
                            "inspect answers from the profiles without one")
    version = engine_version(engine)
    ckpt = Checkpoint.open(path)
    refuse_checkpoint_code(ckpt.path)   # before leaving the working directory it may be
    with _working_directory_of_its_own():
        return _probe_from_scratch(ckpt, engine, version, adapter, target_config)


def _probe_from_scratch(ckpt, engine: str, version: str, adapter: str,
                        target_config: Path | None) -> ProbeResult:
    import importlib

    from eagle3_nb.engines import resolve_engine, stubs
    from eagle3_nb.engines.planner import plan_load
    from eagle3_nb.engines.probing import BuildError
    from eagle3_nb.io.checkpoint import load_target_info

    check_build_size(ckpt)        # before the weights are read and the engine allocates
    cfg = ckpt.config
    target = load_target_info(target_config) if target_config else None
    profile = resolve_engine(f"{engine}=={version}")
    shapes = {name: t.shape for name, t in ckpt.tensors.items()}
    plan = plan_load(profile, cfg, shapes, target)
    weights = read_weights(ckpt)
    notes: list[str] = []
    stubs.install()
    try:
        built = importlib.import_module(adapter).build(ckpt.path, target_config, profile.d2t_param)
    except BuildError as exc:  # the engine refused this draft at startup
        raise_if_out_of_memory(exc, "while the engine built the draft")
        obs = Observation([], [], {}, build_error=str(exc)[:500])
        diffs = compare(plan, obs)
        return ProbeResult(engine, version, profile.key, not profile.based_on, "", obs, diffs,
                           findings(diffs, f"{engine} {version}", profile.key), stubs.used(),
                           notes)
    refuse_checkpoint_code(ckpt.path)
    notes += built.notes
    obs = observe_load(built.model, built.load, weights, built.watch_attrs)
    diffs = compare(plan, obs, engine_params=list(plan.params))
    return ProbeResult(engine, version, profile.key, not profile.based_on, built.cls, obs, diffs,
                       findings(diffs, f"{engine} {version}", profile.key), stubs.used(), notes)
