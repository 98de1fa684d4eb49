"""Config-field ablation: every config field the kit reads, absent, null, of the wrong type and
contradicting another field, through each side environment's real loader and the kit's profile.

    python tools/config_ablation.py [--engines sglang==0.5.23,vllm==0.34.0] [--write]
                                    [--variants NAME,...] [--keys]

Each variant is a copy of a bundled good draft (data_samples/drafts/good, good-speculators) with
one config.json edit, written under a temporary directory (never into data_samples). For each
side environment (.cache/engines/<engine>-<version>, built by tools/engine_env.sh) it runs the
engine's own draft class and load_weights through the probe's adapter (one process per release;
--keys: the full `eagle3-nb probe` comparison where the kit reads the config) and asks the kit
what that release's profile predicts (inspect_checkpoint, target data_samples/target). The
startup outcome is compared: the draft starts, or the engine raises (where, and its first
line). --write puts the table into docs/engine-truth.md, section "Config-field ablation".
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "data_samples" / "drafts"
TARGET = ROOT / "data_samples" / "target"
DOC = ROOT / "docs" / "engine-truth.md"
BEGIN = "<!-- config-ablation: begin (tools/config_ablation.py --write replaces this part) -->"
END = "<!-- config-ablation: end -->"
# the side environments tried by default: the two the test suite builds, then the older ones
# the doc's table reports when they are there
DEFAULT_ENGINES = ("sglang==0.5.23", "vllm==0.34.0", "sglang==0.5.9", "vllm==0.33.0")

if str(ROOT) not in sys.path:  # the kit, when this runs outside its editable install
    sys.path.insert(0, str(ROOT))

from eagle3_nb.engines.config_rules import MISSING, lookup  # noqa: E402  (after the path)

STARTS, RAISES, REFUSES = "starts", "raises", "refuses"
ABSENT = MISSING


# --------------------------------------------------------------------------- the variants

@dataclass(frozen=True)
class Field:
    """A config field the kit reads (a dotted path in config.json), its wrong-type value and,
    when one exists, a value that contradicts another field of the draft (and which)."""
    path: str
    wrong: Any
    contra: Any = ABSENT
    against: str = ""


@dataclass(frozen=True)
class Variant:
    name: str
    base: str          # the bundled draft it edits
    path: str
    kind: str          # absent | null | wrong type | contradicts
    value: Any         # ABSENT for "absent"
    against: str = ""

    def edit(self) -> str:
        if self.kind == "absent":
            return f"`{self.path}` removed"
        shown = json.dumps(self.value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return f"`{self.path}: {shown}`" + (f" (against {self.against})" if self.against else "")


# eagle3_nb/config.py parse_config: the flat dialect's fields (DraftConfig, _layer_fields,
# _parse_flat, _mla_fields) on data_samples/drafts/good (H 64, 4 heads x 16, 2 kv heads,
# intermediate 128, vocab 512, draft vocab 256, one layer, fc 3 x 64 wide)
FLAT_FIELDS = (
    Field("architectures", "LlamaForCausalLMEagle3", ["LlamaForCausalLM"],
          "the draft's EAGLE-3 keys (a target class name)"),
    Field("model_type", 5, "qwen3", "architectures[0] LlamaForCausalLMEagle3"),
    Field("hidden_size", "64", 128, "the weights' 64-wide tensors"),
    Field("num_attention_heads", "4", 8, "head_dim 16 and q_proj's 64 rows"),
    Field("num_key_value_heads", "2", 3, "num_attention_heads 4 (not a multiple)"),
    Field("head_dim", "16", 32, "q_proj's 64 rows (4 heads)"),
    Field("intermediate_size", "128", 256, "the 128-wide MLP tensors"),
    Field("vocab_size", "512", 128, "draft_vocab_size 256 (larger than the target's)"),
    Field("num_hidden_layers", "1", 2, "the one decoder layer in the weights"),
    Field("max_position_embeddings", "4096", 1024, "the target's 4096"),
    Field("rms_norm_eps", "1e-05"),
    Field("rope_theta", "10000"),
    Field("rope_scaling", "linear", {"rope_type": "yarn"}, "no factor for yarn"),
    Field("hidden_act", 5, "gelu", "the draft's Llama MLP (silu only)"),
    Field("attention_bias", "false", True, "no bias tensors in the weights"),
    Field("mlp_bias", "false", True, "no bias tensors in the weights"),
    Field("tie_word_embeddings", "false", True, "lm_head (256 rows) beside embed_tokens (512)"),
    Field("draft_vocab_size", "256", 300, "d2t, t2d and lm_head (256)"),
    Field("target_hidden_size", "64", 128, "fc's 192 inputs (3 x 64)"),
    Field("eagle_config", "x"),
    Field("eagle_config.eagle_aux_hidden_state_layer_ids", "1,3,5", [1, 3],
          "fc's 192 inputs (3 aux states)"),
    Field("eagle_config.use_aux_hidden_state", "true", False, "the fc tensor in the weights"),
    Field("eagle_config.norm_before_fc", "true", True, "no input_norm tensor in the weights"),
    Field("eagle_aux_hidden_state_layer_ids", "1,3,5", [1, 3], "fc's 192 inputs (3 aux states)"),
    Field("num_aux_hidden_states", "3", 2, "fc's 192 inputs (3 aux states)"),
    Field("norm_before_residual", "true"),
    Field("norm_before_fc", "true", True, "no input_norm tensor in the weights"),
    Field("fc_norm", "true", True, "no fc_norm tensor in the weights"),
    Field("use_aux_norm", "true", True, "no fc_norm tensor in the weights"),
    Field("norm_output", "true"),
    Field("kv_lora_rank", "16", 16, "a GQA Llama draft without the other MLA sizes"),
)

# _parse_speculators on data_samples/drafts/good-speculators (the same sizes; ids [2, 4, 5],
# target_hidden_size null)
_L = "transformer_layer_config."
SPECULATORS_FIELDS = (
    Field("architectures", "Eagle3DraftModel", ["LlamaForCausalLMEagle3"],
          "speculators_model_type eagle3 (a flat draft's class)"),
    Field("speculators_model_type", 3, "eagle", "the EAGLE-3 fields (an EAGLE-1 type)"),
    Field("speculators_config", "x"),
    Field("speculators_config.verifier", "x", {"architectures": ["Qwen3ForCausalLM"]},
          "the Llama target"),
    Field("transformer_layer_config", "x"),
    Field("draft_vocab_size", "256", 300, "d2t, t2d and lm_head (256)"),
    Field("target_hidden_size", "64", 128, "fc's 192 inputs (3 x 64)"),
    Field("eagle_aux_hidden_state_layer_ids", "2,4,5", [2, 4], "fc's 192 inputs (3 aux states)"),
    Field("num_aux_hidden_states", "3", 2, "fc's 192 inputs (3 aux states)"),
    Field("tie_word_embeddings", "false", True, "lm_head (256 rows) beside embed_tokens (512)"),
    Field("norm_before_residual", "true"),
    Field("norm_before_fc", "true", True, "no input_norm tensor in the weights"),
    Field("fc_norm", "true", True, "no fc_norm tensor in the weights"),
    Field("norm_output", "true"),
    Field(_L + "model_type", 5, "qwen3", "the weights' Llama layer (no q_norm / k_norm)"),
    Field(_L + "hidden_size", "64", 128, "the weights' 64-wide tensors"),
    Field(_L + "num_attention_heads", "4", 8, "head_dim 16 and q_proj's 64 rows"),
    Field(_L + "num_key_value_heads", "2", 3, "num_attention_heads 4 (not a multiple)"),
    Field(_L + "head_dim", "16", 32, "q_proj's 64 rows (4 heads)"),
    Field(_L + "intermediate_size", "128", 256, "the 128-wide MLP tensors"),
    Field(_L + "vocab_size", "512", 128, "draft_vocab_size 256 (larger than the target's)"),
    Field(_L + "num_hidden_layers", "1", 2, "the one decoder layer in the weights"),
    Field(_L + "max_position_embeddings", "4096", 1024, "the target's 4096"),
    Field(_L + "rms_norm_eps", "1e-05"),
    Field(_L + "rope_parameters", "default", {"rope_type": "yarn", "rope_theta": 10000.0},
          "no factor for yarn"),
    Field(_L + "hidden_act", 5, "gelu", "the draft's Llama MLP (silu only)"),
    Field(_L + "attention_bias", "false", True, "no bias tensors in the weights"),
    Field(_L + "mlp_bias", "false", True, "no bias tensors in the weights"),
    Field(_L + "tie_word_embeddings", "false", True,
          "lm_head (256 rows) beside embed_tokens (512)"),
)
BASES = (("flat", "good", FLAT_FIELDS), ("spec", "good-speculators", SPECULATORS_FIELDS))


def edited(config: dict, path: str, value: Any) -> dict:
    """A copy of CONFIG with PATH set to VALUE (ABSENT: removed); a missing parent object is
    created, a parent that is not an object is replaced by one."""
    out = copy.deepcopy(config)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        if not isinstance(node.get(part), dict):
            if value is ABSENT:
                return out
            node[part] = {}
        node = node[part]
    if value is ABSENT:
        node.pop(last, None)
    else:
        node[last] = value
    return out


def variants() -> list[Variant]:
    """Every variant, the two unedited bases first; an edit that leaves the base's config as
    it is (a key the base does not have, removed) is left out."""
    out = []
    for short, base, fields in BASES:
        config = json.loads((DRAFTS / base / "config.json").read_text())
        out.append(Variant(f"{short}.base", base, "", "base", None))
        for f in fields:
            kinds = [("absent", ABSENT, ""), ("null", None, ""), ("wrong type", f.wrong, "")]
            if f.contra is not ABSENT:
                kinds.append(("contradicts", f.contra, f.against))
            for kind, value, against in kinds:
                if edited(config, f.path, value) == config:
                    continue
                slug = kind.replace(" ", "-")
                out.append(Variant(f"{short}.{f.path}.{slug}", base, f.path, kind, value, against))
    return out


def write_variant(v: Variant, into: Path) -> Path:
    """The base draft's files copied to INTO/<name>, config.json edited."""
    folder = into / v.name
    shutil.copytree(DRAFTS / v.base, folder)
    config = json.loads((folder / "config.json").read_text())
    if v.kind != "base":
        config = edited(config, v.path, v.value)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


# --------------------------------------------------------------------------- the kit's answer

def kit_prediction(folder: Path, profile_key: str) -> dict[str, Any]:
    """What the kit says this release does at startup: starts, raises (at build: the probe's
    startup errors; at load: a key or parameter the loader raises on) or refuses (the kit
    cannot read the config: Eagle3NbError). `beyond`: its other startup failures, which the
    probe does not reach (the target's context, its capture)."""
    from eagle3_nb.checks.load import inspect_checkpoint
    from eagle3_nb.errors import Eagle3NbError
    from eagle3_nb.probe.compare import startup_errors

    try:
        ins = inspect_checkpoint(folder, [profile_key], TARGET / "config.json", stats=False)
    except Eagle3NbError as exc:
        return {"outcome": REFUSES, "stage": "", "line": exc.one_line()[:300], "beyond": [],
                "verdict": "bad input"}
    (plan,) = ins.plans
    build = startup_errors(plan)
    load = [f.message for f in plan.findings if f.code == "LOAD_ERROR" and f.message not in build
            and ({"keys", "params"} & set(f.evidence))]
    beyond = [f.message for f in plan.findings if f.code == "LOAD_ERROR"
              and f.message not in build + load]
    stage, line = (("build", build[0]) if build else ("load", load[0]) if load else ("", ""))
    return {"outcome": RAISES if stage else STARTS, "stage": stage, "line": line[:300],
            "beyond": [b[:200] for b in beyond],
            "verdict": plan.verdict_with(ins.beyond_plan(plan))}


# --------------------------------------------------------------------------- the engine's answer

def engine_outcome(folder: Path, engine: str, keys: bool) -> dict[str, Any]:
    """Runs in a side environment: the engine's own draft class built and its load_weights run
    on every key at once (KEYS: key by key too, and compared with the profile where the kit
    reads the config), through the probe's adapter; its scratch folders go when it ends."""
    from eagle3_nb.engines.probing import remove_scratch

    try:
        return _engine_outcome(folder, engine, keys)
    finally:
        remove_scratch()


def _engine_outcome(folder: Path, engine: str, keys: bool) -> dict[str, Any]:
    import importlib

    from eagle3_nb.engines import engine as registered, resolve_engine, stubs
    from eagle3_nb.engines.probing import BuildError, engine_version
    from eagle3_nb.io.checkpoint import Checkpoint
    from eagle3_nb.probe import read_weights
    from eagle3_nb.probe.record import observe_load

    profile = resolve_engine(f"{engine}=={engine_version(engine)}")
    ckpt = Checkpoint.open(folder)
    weights = read_weights(ckpt)
    stubs.install()
    try:
        built = importlib.import_module(registered(engine).probe).build(
            ckpt.path, TARGET, profile.d2t_param)
    except BuildError as exc:
        return {"outcome": RAISES, "stage": "build", "line": str(exc)[:300]}
    if keys:
        obs = observe_load(built.model, built.load, weights, built.watch_attrs)
        return {"outcome": RAISES if obs.raised else STARTS, "stage": "load" if obs.raised else "",
                "line": obs.raised[:300], "key_differences": _key_differences(profile, ckpt, obs)}
    try:
        built.load(iter([(n, t.clone()) for n, t in weights]))
    except Exception as exc:  # the engine's own error is the answer
        first = (str(exc).strip().splitlines() or [""])[0]
        return {"outcome": RAISES, "stage": "load", "line": f"{type(exc).__name__}: {first}"[:300]}
    return {"outcome": STARTS, "stage": "", "line": ""}


def _key_differences(profile, ckpt, obs) -> list[str] | None:
    """The probe's comparison of each key's fate with the plan (None: the kit does not read
    this config, so there is no plan)."""
    from eagle3_nb.engines.planner import plan_load
    from eagle3_nb.errors import Eagle3NbError
    from eagle3_nb.io.checkpoint import load_target_info
    from eagle3_nb.probe.compare import compare

    try:
        plan = plan_load(profile, ckpt.config, {n: t.shape for n, t in ckpt.tensors.items()},
                         load_target_info(TARGET))
    except Eagle3NbError:
        return None
    return [d.text()[:200] for d in compare(plan, obs, engine_params=list(plan.params))
            if d.what != "startup"]


def worker(engine: str, folders: list[str], keys: bool) -> int:
    """One JSON line per variant folder (a variant's failure must not hide the others)."""
    for folder in folders:
        t = time.time()
        try:
            row = engine_outcome(Path(folder), engine, keys)
        except Exception as exc:
            row = {"outcome": "probe error", "stage": "", "line": f"{type(exc).__name__}: "
                   f"{str(exc)[:250]}"}
        row["variant"], row["seconds"] = Path(folder).name, round(time.time() - t, 2)
        print("@@" + json.dumps(row), flush=True)
    return 0


# --------------------------------------------------------------------------- the driver

def side_python(engine: str, release: str) -> Path:
    return ROOT / ".cache" / "engines" / f"{engine}-{release}" / "bin" / "python"


def side_envs_present() -> list[tuple[str, str]]:
    """(engine, release) of every finished side environment whose release a profile covers."""
    from eagle3_nb.engines import resolve_engine

    out = []
    for env in sorted((ROOT / ".cache" / "engines").glob("*/.ready")):
        engine, _, release = env.parent.name.partition("-")
        try:
            if not resolve_engine(f"{engine}=={release}").based_on:
                out.append((engine, release))
        except Exception:  # an environment of an engine or release the kit has no profile for
            continue
    return out


def run_engine(engine: str, release: str, folders: list[Path], keys: bool,
               timeout: int = 1800) -> dict[str, dict]:
    """The worker in ENGINE's side environment over FOLDERS; a worker that dies (a crash in the
    engine) is started again after the variant it died on, which is recorded as such."""
    rows: dict[str, dict] = {}
    todo = list(folders)
    while todo:
        cmd = [str(side_python(engine, release)), str(Path(__file__).resolve()), "--worker",
               engine, *(["--keys"] if keys else []), *map(str, todo)]
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
        for ln in run.stdout.splitlines():
            if ln.startswith("@@"):
                row = json.loads(ln[2:])
                rows[row["variant"]] = row
        todo = [f for f in todo if f.name not in rows]
        if todo:
            tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
            rows[todo[0].name] = {"outcome": "probe error", "stage": "",
                                  "line": f"the worker died (exit {run.returncode}): {tail[:200]}"}
            todo = todo[1:]
    return rows


# Variants whose outcome on the probe differs from the engine's startup on a GPU, by the engine's
# own code: the probe builds the draft and runs load_weights on a CPU and stops there, while a
# GPU startup narrows tensors without padding, captures CUDA graphs, starts the workers and runs
# a first forward. The kit answers for the GPU. (engine or "engine release", variant) -> why.
# The test checks each still shows as said.
_NARROW = ("sglang srt/layers/linear.py ColumnParallelLinear / QKVParallelLinear / "
           "RowParallelLinear.weight_loader [0.5.9, 0.5.23]: on a CPU (_is_cpu) "
           "narrow_padded_param_and_loaded_weight fits a smaller checkpoint tensor into the larger "
           "parameter (the rest zeroed), so the shape assertion never fires; on a GPU "
           "loaded_weight.narrow(output_dim, 0, shard_size) raises for a tensor smaller than the "
           "parameter, as the kit predicts (or, where the kit refuses the head counts, as the "
           "refusal says)")
_GRAPH = ("sglang srt/speculative/eagle_worker_v2.py EagleDraftWorker._capture_cuda_graphs "
          "[0.5.23]: no CUDA graph on a CPU (_is_cpu); on a GPU the draft-extend graph's "
          "hidden-state input is len(top-level eagle_aux_hidden_state_layer_ids) x "
          "target_hidden_size (eagle_utils.py get_draft_input_from_target_hidden_dim) while fc "
          "takes 3 x target_hidden_size, and capture runs fc on it (llama_eagle3.py "
          "LlamaModel.forward): startup fails, as the kit predicts")
_WORKER = ("sglang srt/speculative/eagle_worker.py EAGLEWorker.__init__ and eagle_worker_v2.py "
           "EAGLEWorkerV2.__init__ [0.5.9]: getattr(hf_config, 'eagle_config', {})"
           ".get('use_aux_hidden_state', True) raises AttributeError on a string or a null "
           "(the {} default covers an absent key only); the probe "
           "builds the draft class only, which never reads eagle_config in 0.5.9")
_CAPTURE = ("sglang srt/model_executor/model_runner.py ModelRunner.__init__ [0.5.9]: the target "
            "gets eagle_config's ids as written and models/llama.py set_eagle3_layers_to_capture "
            "computes [val + 1 for val in layer_ids] (TypeError on a string's characters); the "
            "probe builds no target")
_FORWARD = ("vllm v1/worker/gpu/model_runner.py profile_run -> _dummy_run -> speculator.propose "
            "[0.33.0, 0.34.0]: startup runs the draft's forward, where layers/layernorm.py "
            "RMSNorm (ir/ops/layernorm.py rms_norm: variance + epsilon) meets the string eps "
            "that SpeculatorsConfig passed on unchecked (TypeError); the probe runs no forward")
_EPS = ("sglang srt/layers/layernorm.py RMSNorm.forward_cuda [0.5.9]: sgl_kernel rmsnorm(x, "
        "weight, self.variance_epsilon) meets the string eps that transformers 4.57.1's "
        "unchecked LlamaConfig passed on (TypeError), the first time the draft runs: "
        "eagle_worker.py EAGLEWorker.init_cuda_graphs -> EAGLEDraftCudaGraphRunner.capture "
        "at startup (with --disable-cuda-graph, the first request); the probe runs no forward")
CPU_ARTEFACTS = {
    **{("sglang", name): _NARROW for name in (
        "flat.num_attention_heads.contradicts", "flat.num_key_value_heads.absent",
        "flat.num_key_value_heads.null", "flat.head_dim.contradicts",
        "flat.intermediate_size.contradicts", "flat.num_attention_heads.absent",
        "flat.intermediate_size.absent", "flat.num_key_value_heads.contradicts")},
    ("sglang 0.5.23", "flat.eagle_aux_hidden_state_layer_ids.wrong-type"): _GRAPH,
    ("sglang 0.5.23", "flat.eagle_aux_hidden_state_layer_ids.contradicts"): _GRAPH,
    ("sglang 0.5.9", "flat.eagle_config.wrong-type"): _WORKER,
    ("sglang 0.5.9", "flat.eagle_config.null"): _WORKER,
    ("sglang 0.5.9", "flat.rms_norm_eps.wrong-type"): _EPS,
    ("sglang 0.5.9", "flat.eagle_config.eagle_aux_hidden_state_layer_ids.wrong-type"): _CAPTURE,
    ("vllm", "spec.transformer_layer_config.rms_norm_eps.wrong-type"): _FORWARD,
}


def artefact(column: str, variant: str) -> str | None:
    """Why the probe's outcome for VARIANT in COLUMN ("sglang 0.5.23") is not the GPU's, or None."""
    return CPU_ARTEFACTS.get((column, variant)) or \
        CPU_ARTEFACTS.get((column.split()[0], variant))


AGREE, DISAGREE, ARTEFACT, UNREAD = "agree", "disagree", "CPU artefact", "not evidence"
REFUSES_RAISES, REFUSES_STARTS = "kit refuses, engine raises", "kit refuses, engine starts"
NOT_RUN = "not run"


def agreement(kit: dict, eng: dict, column: str = "", variant: str = "",
              evidence: bool = True) -> str:
    """How the kit's prediction stands against the engine's outcome (see _summary)."""
    if eng["outcome"] not in (STARTS, RAISES):
        return NOT_RUN
    if kit["outcome"] == eng["outcome"]:
        return AGREE
    if eng["outcome"] == STARTS and artefact(column, variant):
        return ARTEFACT   # the kit refuses or raises, as the engine does on a GPU
    if kit["outcome"] == REFUSES:
        if eng["outcome"] == RAISES:
            return REFUSES_RAISES
        return REFUSES_STARTS if evidence else UNREAD
    return DISAGREE if evidence else UNREAD


@dataclass
class Result:
    variant: Variant
    column: str           # "vllm 0.34.0"
    kit: dict
    engine: dict
    evidence: bool = True   # the side environment's transformers reads configs as the release's

    @property
    def agreement(self) -> str:
        return agreement(self.kit, self.engine, self.column, self.variant.name, self.evidence)


# transformers releases on either side of the config-reading changes the kit's rules encode
# (eagle3_nb/engines/config_rules.py: path guess dropped in 5.2.0, @strict LlamaConfig in 5.4.0)
_READING_PROBES = ("4.56.0", "4.57.1", "5.0.0", "5.3.0", "5.4.0", "5.5.3", "5.10.4", "5.16.1",
                   "5.19.0", "5.22.0", "5.23.0", "5.30.0")


def _reading(version: str) -> str:
    from packaging.version import Version

    return "strict" if Version(version) >= Version("5.4.0") else "lenient"


def transformers_fit(engine: str, release: str) -> dict[str, Any]:
    """The release's transformers requirement (its wheel's Requires-Dist), the transformers its
    side environment runs, and whether that one reads draft configs as every allowed one does."""
    from importlib import metadata

    from packaging.requirements import Requirement

    env = ROOT / ".cache" / "engines" / f"{engine}-{release}"
    site = next(env.glob("lib/python*/site-packages"))
    running = next((d.name.removesuffix(".dist-info").split("-")[1]
                    for d in site.glob("transformers-*.dist-info")),
                   metadata.version("transformers"))
    meta = next(site.glob(f"{engine}-*.dist-info/METADATA"), None)
    pins = [Requirement(ln.split(":", 1)[1].strip()) for ln in
            (meta.read_text().splitlines() if meta else []) if ln.startswith("Requires-Dist:")]
    pin = next((r for r in pins if r.name == "transformers" and not r.marker), None)
    allowed = [v for v in _READING_PROBES if pin is None or pin.specifier.contains(v)]
    kinds = {_reading(v) for v in allowed}
    return {"pin": str(pin.specifier) if pin else "none", "running": running,
            "evidence": kinds == {_reading(running)}}


def _word_free_tempdir() -> tempfile.TemporaryDirectory:
    """A temporary directory whose random name writes no model type: transformers' AutoConfig
    (up to 5.1) builds a config without model_type from such a word in the path (engines'
    PATH_GUESSED_MODEL_TYPE), so the model_type variants would depend on the draw."""
    from eagle3_nb.engines.config_rules import guessed_type
    from eagle3_nb.engines.sglang.profiles import PATH_GUESSED_MODEL_TYPE

    while True:
        tmp = tempfile.TemporaryDirectory(prefix="config-ablation-")
        if not guessed_type(tmp.name, PATH_GUESSED_MODEL_TYPE[0].path_words):
            return tmp
        tmp.cleanup()


def ablate(envs: list[tuple[str, str]], names: list[str] | None = None, keys: bool = False,
           log=print) -> list[Result]:
    """Every variant (or those NAMES) through every (engine, release) in ENVS."""
    from eagle3_nb.engines import resolve_engine

    chosen = [v for v in variants() if not names or v.name in names]
    results = []
    with _word_free_tempdir() as tmp:
        folders = {v.name: write_variant(v, Path(tmp)) for v in chosen}
        for engine, release in envs:
            profile = resolve_engine(f"{engine}=={release}")
            t = time.time()
            rows = run_engine(engine, release, list(folders.values()), keys)
            fit = transformers_fit(engine, release)
            log(f"{engine} {release}: {len(rows)} variants through the engine in "
                f"{time.time() - t:.0f}s; transformers {fit['running']} (the release pins "
                f"{fit['pin']}): " + ("reads configs as the pinned ones do" if fit["evidence"]
                                      else "reads configs otherwise than the pinned ones, so "
                                      "config-reading outcomes here are not evidence"))
            for v in chosen:
                kit = kit_prediction(folders[v.name], profile.key)
                results.append(Result(v, f"{engine} {release}", _plain(kit, folders[v.name]),
                                      _plain(rows[v.name], folders[v.name]), fit["evidence"]))
    return results


def _plain(row: dict, folder: Path) -> dict:
    """The row with the variant's temporary path written as DRAFT."""
    return {k: v.replace(str(folder), "DRAFT") if isinstance(v, str) else v
            for k, v in row.items()}


def build_envs(specs: list[str], log=print) -> tuple[list[tuple[str, str]], list[str]]:
    """The side environments for NAME==VERSION specs, built when missing (tools/engine_env.sh);
    (the ready ones, a line per one that could not be built)."""
    from eagle3_nb.engines import resolve_engine

    ready, failed = [], []
    for spec in specs:
        engine, _, version = spec.partition("==")
        release = version if version.count(".") >= 2 else version + ".0"
        profile = resolve_engine(spec)
        if profile.based_on:
            failed.append(f"{engine} {release}: no profile read from its code")
            continue
        env = subprocess.run(["bash", str(ROOT / "tools" / "engine_env.sh"), engine, release],
                             capture_output=True, text=True, cwd=ROOT)
        if env.returncode:
            why = (env.stderr.strip().splitlines() or ["unknown"])[-1]
            failed.append(f"{engine} {release}: side environment failed ({why[:200]})")
            continue
        log(env.stdout.strip().splitlines()[-1])
        ready.append((engine, release))
    return ready, failed


def unprobed_releases(envs: list[tuple[str, str]]) -> str:
    """One line naming the profiled SGLang and vLLM ranges no environment of this run covers."""
    from eagle3_nb.engines import PROFILES

    missing = [p.range_text() for p in PROFILES if p.name in ("sglang", "vllm")
               and not any(e == p.name and p.covers_release(r) for e, r in envs)]
    return ("the other profiled ranges, " + ", ".join(missing) + ": no side environment in "
            "this run (tools/engine_env.sh builds one per release; TensorRT-LLM has no probe)")


# --------------------------------------------------------------------------- the report

def _cell(r: Result) -> str:
    kit, eng = r.kit, r.engine
    said = {STARTS: "starts", RAISES: f"raises ({kit['stage']})",
            REFUSES: "refuses"}[kit["outcome"]]
    did = eng["outcome"] if eng["outcome"] != RAISES else f"raises ({eng['stage']})"
    mark = {DISAGREE: "**DISAGREE** ", ARTEFACT: "*CPU artefact* ",
            UNREAD: "*not evidence* "}.get(r.agreement, "")
    return f"{mark}kit {said} / engine {did}"


def render(results: list[Result], setup: list[str], not_run: list[str]) -> str:
    columns = list(dict.fromkeys(r.column for r in results))
    out = [BEGIN, "## Config-field ablation", "",
           "Generated by `python tools/config_ablation.py --write` (test: "
           "tests/test_config_ablation.py). Every config field the kit reads (eagle3_nb/config.py "
           "parse_config) in the flat dialect (base data_samples/drafts/good) and the speculators "
           "dialect (base good-speculators), each absent, null, of the wrong type and, where "
           "another field pins it, contradicting that field; each variant is one config.json edit "
           "of a copy. Each went through the release's own draft class and load_weights (the "
           "probe's adapter, on this CPU) and through the kit's profile for that release "
           "(inspect, target data_samples/target). *starts*: the draft builds and load_weights "
           "returns; *raises (build)* / *raises (load)*: the engine's exception while reading the "
           "config and building the draft / while loading the weights; *refuses*: the kit stops "
           "with a config error (exit 2, what / where / what to do) and predicts nothing, so the "
           "kit's probe does not run there either.", "", "### Set-up", ""]
    out += [f"- {line}" for line in setup] + [f"- not run: {line}" for line in not_run] + [""]
    out += ["### What the ablation changed in the kit", ""] + [f"- {c}" for c in CHANGED] + [""]
    out += _summary(results, columns) + _lists(results) + _table(results, columns)
    out += _engine_lines(results) + [END]
    return "\n".join(out)


_KINDS = (AGREE, DISAGREE, ARTEFACT, UNREAD, REFUSES_RAISES, REFUSES_STARTS, NOT_RUN)

# What the first runs found wrong in the kit, and where the fix lives (each engine fact is cited
# in the profile field named)
CHANGED = (
    "vLLM, every range: a null target_hidden_size in a flat config is TypeError while the draft "
    "is built (the issue's case); its speculators converter drops the null "
    "(EngineProfile.target_hidden_null_breaks_fc now names the dialects).",
    "The engines' config readers (EngineProfile.config_rules, eagle3_nb/engines/config_rules.py): "
    "transformers' @strict LlamaConfig for the releases whose wheel pins transformers 5.4 or "
    "newer (SGLang 0.5.11 on, vLLM 0.24 on) refuses a null or wrongly typed num_hidden_layers, "
    "rms_norm_eps, hidden_act, attention_bias, mlp_bias or tie_word_embeddings, and a config "
    "without model_type; every release refuses a null or non-string model_type, a hidden_act "
    "other than silu, a null rope_theta and a rope_type without its required keys; vLLM "
    "0.33-0.34's speculators reader needs speculators_config, speculators_model_type 'eagle3' and "
    "a transformer_layer_config with num_hidden_layers, rms_norm_eps and hidden_act.",
    "vLLM builds its own lm_head whatever tie_word_embeddings says (EngineProfile.ties_lm_head), "
    "and its speculators converter does not pass num_aux_hidden_states on, so fc stays "
    "3 x target_hidden_size (EngineProfile.speculators_keys_passed).",
    "A flat config without num_hidden_layers gets its transformers class's default (32 for "
    "Llama), not one layer (eagle3_nb/config.py CONFIG_CLASS_LAYERS); SGLang 0.5.9's one-layer "
    "draft refuses it.",
    "Key by key (--keys): attention_bias gives the draft an o_proj bias in both engines and no "
    "q/k/v bias in SGLang's draft, mlp_bias gives vLLM's draft gate_up / down biases, and vLLM "
    "builds no fc while use_aux_hidden_state is off (EngineProfile.qkv_bias, o_proj_bias, "
    "mlp_bias_params; engines/draft_params.py).",
    "Refusals where the engine starts (#25): a flat config without hidden_size, "
    "num_attention_heads, intermediate_size or vocab_size gets LlamaConfig's default, as "
    "AutoConfig gives the engine (eagle3_nb/config.py CONFIG_CLASS_SIZES), and the plan judges "
    "the shapes; top-level aux ids that are not a list (a string \"1,3,5\"), a "
    "num_aux_hidden_states that is not an integer, MLA sizes beside a Llama draft class, and a "
    "speculators config's speculators_config or architectures of the wrong type are set aside "
    "(DraftConfig.unread, mla_unread) instead of refused: aux ids no engine reads as ids give "
    "AUX_LAYERS_DEFAULTED naming the value, and each release's config_rules say where one "
    "raises (num_aux_hidden_states where fc is built from it; SGLang 0.5.15+ sizes its "
    "draft-extend CUDA graph from len() of the top-level ids, so one whose length is not 3 fails "
    "at graph capture; the draft classes that count top-level ids with len()). An "
    "eagle_config written as null starts everywhere but on SGLang 0.5.8-0.5.14, whose EAGLE "
    "worker reads it with getattr(..., {}).get() (a CPU artefact: the probe builds no worker).",
    "Still refused (genuinely unreadable, or failing on a GPU where the probe starts, listed under "
    "CPU artefacts): head counts that do not divide, a string rms_norm_eps (the draft's first "
    "forward fails: vLLM's speculators layer config, SGLang 0.5.9's unchecked LlamaConfig), "
    "eagle_config or its ids of the wrong type, wrong "
    "types and nulls of the layer's sizes, out-of-bounds numbers; the kit stops there with what, "
    "where and what to do.",
)


def _summary(results, columns) -> list[str]:
    out = ["### Agreement", "", "| release | variants | " + " | ".join(_KINDS) + " |",
           "|---|---|" + "---|" * len(_KINDS)]
    for col in columns:
        mine = [r.agreement for r in results if r.column == col]
        out.append(f"| {col} | {len(mine)} | " + " | ".join(str(mine.count(k)) for k in _KINDS)
                   + " |")
    return out + ["", "*CPU artefact*: the probe builds the draft and loads it on a CPU and "
                  "stops there, while the engine's startup on a GPU takes another path (no "
                  "padding of smaller tensors, CUDA graph capture, its workers, a first "
                  "forward) and fails; the kit answers for the GPU (below). *not evidence*: the "
                  "side environment runs a transformers that reads configs otherwise than the one "
                  "the release pins (Set-up), so a config-reading outcome there is not the "
                  "release's.", ""]


def _line(r: Result) -> str:
    stage = f" ({r.kit['stage']})" if r.kit["stage"] else ""
    kit = r.kit["outcome"] + (f"{stage}: {r.kit['line']}" if r.kit["line"] else "")
    eng = r.engine["outcome"] + (f": `{r.engine['line'].replace('`', chr(39))}`"
                                 if r.engine["line"] else "")
    return f"- **{r.variant.name}** on {r.column} ({r.variant.edit()}): kit {kit}; engine {eng}"


def _lists(results) -> list[str]:
    out = []
    for kind, title in ((DISAGREE, "Disagreements"), (REFUSES_STARTS, "The kit refuses, the "
                         "engine starts"), (UNREAD, "Not evidence (transformers outside the "
                         "release's pin)")):
        mine = [r for r in results if r.agreement == kind]
        out += [f"### {title}", ""] + [_line(r) for r in mine] + (["none"] if not mine else [])
        out.append("")
    keyed = [r for r in results if r.engine.get("key_differences")]
    if any("key_differences" in r.engine for r in results):  # a --keys run
        out += ["### Key by key (--keys): where the kit's plan and the engine differ", ""]
        out += [f"- **{r.variant.name}** on {r.column}: " + "; ".join(r.engine["key_differences"])
                for r in keyed] + (["none"] if not keyed else []) + [""]
    artefacts = [r for r in results if r.agreement == ARTEFACT]
    out += ["### CPU artefacts", ""]
    for why in dict.fromkeys(artefact(r.column, r.variant.name) for r in artefacts):
        names = sorted({f"{r.variant.name} ({r.column})" for r in artefacts
                        if artefact(r.column, r.variant.name) == why})
        out.append(f"- {', '.join(names)}: {why}")
    return out + (["none"] if not artefacts else []) + [""]


def _table(results, columns) -> list[str]:
    by_variant: dict[str, dict[str, Result]] = {}
    for r in results:
        by_variant.setdefault(r.variant.name, {})[r.column] = r
    out = ["### Every variant", "", "| variant | edit | " + " | ".join(columns) + " |",
           "|---|---|" + "---|" * len(columns)]
    for name, cells in by_variant.items():
        v = next(iter(cells.values())).variant
        out.append(f"| {name} | {v.edit() if v.kind != 'base' else 'unedited'} | "
                   + " | ".join(_cell(cells[c]) if c in cells else NOT_RUN for c in columns)
                   + " |")
    return out + [""]


def _engine_lines(results) -> list[str]:
    """Each engine's first exception line per variant, once per distinct line."""
    out = ["### What the engines raised", ""]
    seen: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r.engine["outcome"] == RAISES:
            seen.setdefault((r.variant.name, r.engine["line"]), []).append(r.column)
    for (name, line), cols in seen.items():
        out.append(f"- {name} ({', '.join(cols)}): `{line.replace('`', chr(39))}`")
    return out + (["none"] if not seen else []) + [""]


def write_doc(section: str, doc: Path = DOC) -> None:
    """SECTION in place of the doc's config-ablation part (appended when there is none)."""
    text = doc.read_text() if doc.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="",
                    help=f"comma-separated NAME==VERSION (default: {','.join(DEFAULT_ENGINES)})")
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--keys", action="store_true",
                    help="also compare each key's fate with the profile (slower)")
    ap.add_argument("--write", action="store_true", help=f"write the section into {DOC}")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("folders", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.folders, args.keys)
    specs = [s for s in args.engines.split(",") if s] or list(DEFAULT_ENGINES)
    envs, not_run = build_envs(specs, log=lambda m: print(m, file=sys.stderr))
    not_run.append(unprobed_releases(envs))
    setup: list[str] = []
    results = ablate(envs, [v for v in args.variants.split(",") if v] or None, args.keys,
                     log=setup.append)
    section = render(results, setup, not_run)
    print(section)
    if args.write:
        write_doc(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
