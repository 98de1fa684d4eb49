"""What a check is asked besides its inputs: one frozen, keyword-only dataclass per check.

The command line builds one from its flags (`from_args`), a notebook from its parameters
(`from_parameters`, whose keywords are the notebook's parameter names and defaults, "" and 0
standing for unset). Both mappings live here, so the same question asked from either gets the
same options (tests/test_defaults.py holds them to the notebooks' parameters cells). No torch:
the report reads these before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_nb.defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS, DEFAULT_N_SAMPLES
from eagle3_nb.engines import parse_engines, wiring_name

# notebook 03's wirings besides the engines': as trained, its last layer alone, one layer off
DEFAULT_WIRINGS = ("trained", "single_layer", "layers_plus_one")


def _unset(value):
    """A notebook parameter's "unset" ("" or 0) as None."""
    return value or None


@dataclass(frozen=True, kw_only=True)
class AcceptanceOptions:
    """How notebook 04 and `eagle3-nb accept` simulate the draft against its target.

    num_steps, topk, num_draft_tokens: the drafting settings; unset ones come from the launch
    command, else the observed figure, else the kit's defaults (checks.drafting
    .resolve_drafting)."""
    hidden_states: str | Path | None = None  # engine dumps instead of a target: teacher-forced
    wiring: str = "trained"                  # the wiring shown in detail
    compare: str | None = None               # the wiring beside it (None: the furthest engine)
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    launch: Any = None                       # the serving command, its file, or LaunchSettings
    observed: Any = None                     # what the engine reported (observed.metrics)
    temperature: float = 0.0                 # 0: greedy verification
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    n_samples: int | None = DEFAULT_N_SAMPLES
    batch_size: int = DEFAULT_BATCH_SIZE
    what_if: bool = True                     # every wiring simulated and ranked
    engines: list[str] | None = None         # the releases whose wirings run (None: the newest)
    device: str | None = None                # None: cuda when present
    stop_at_eos: bool = False                # measure_acceptance: end a prompt at EOS
    seed: int = 0                            # measure_acceptance: the sampling seed

    @classmethod
    def from_args(cls, args) -> "AcceptanceOptions":
        """`eagle3-nb accept`'s flags; --observed implies --what-if."""
        return cls(hidden_states=args.hidden_states, wiring=wiring_name(args.wiring),
                   num_steps=args.num_steps, topk=args.topk,
                   num_draft_tokens=args.num_draft_tokens, launch=args.launch,
                   observed=args.observed, temperature=args.temperature,
                   max_new_tokens=args.max_new_tokens, n_samples=args.n_samples,
                   batch_size=args.batch_size,
                   what_if=bool(args.what_if or args.observed is not None),
                   engines=args.engine, device=args.device, stop_at_eos=args.stop_at_eos)

    @classmethod
    def from_parameters(cls, *, hidden_states: str = "", n_samples: int = DEFAULT_N_SAMPLES,
                        num_steps: int = 0, topk: int = 0, num_draft_tokens: int = 0,
                        launch: str = "", temperature: float = 0.0,
                        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                        batch_size: int = DEFAULT_BATCH_SIZE, wiring: str = "trained",
                        compare_wiring: str = "", what_if: bool = True, observed: str = "",
                        engine: str = "", device: str = "") -> "AcceptanceOptions":
        """Notebook 04's parameters (engine: comma-separated, engines.parse_engines)."""
        return cls(hidden_states=_unset(hidden_states), wiring=wiring_name(wiring),
                   compare=_unset(compare_wiring), num_steps=_unset(num_steps),
                   topk=_unset(topk), num_draft_tokens=_unset(num_draft_tokens),
                   launch=_unset(launch), observed=_unset(observed), temperature=temperature,
                   max_new_tokens=max_new_tokens, n_samples=n_samples, batch_size=batch_size,
                   what_if=what_if, engines=parse_engines(engine), device=_unset(device))


@dataclass(frozen=True, kw_only=True)
class HiddenStateOptions:
    """How notebook 03 compares the hidden states each wiring feeds the draft."""
    hidden_states: str | Path | None = None  # engine dumps instead of running the target
    dump_layer_ids: Any = None               # the layers the dumps hold: a list or "2,4,5,8"
    engines: list[str] | None = None         # the releases whose wirings are compared
    n_samples: int = DEFAULT_N_SAMPLES
    device: str | None = None                # None: cuda when present
    wirings: tuple[str, ...] = DEFAULT_WIRINGS
    launch: Any = None     # the serving command, its file, or LaunchSettings: the draft path and
    #                        aux ids the engines' wirings take from it (wirings.Served)

    @classmethod
    def from_parameters(cls, *, hidden_states: str = "", dump_layer_ids: str = "",
                        engine: str = "", n_samples: int = DEFAULT_N_SAMPLES,
                        device: str = "", launch: str = "") -> "HiddenStateOptions":
        """Notebook 03's parameters (engine: comma-separated, engines.parse_engines)."""
        return cls(hidden_states=_unset(hidden_states), dump_layer_ids=_unset(dump_layer_ids),
                   engines=parse_engines(engine), n_samples=n_samples, device=_unset(device),
                   launch=_unset(launch))
