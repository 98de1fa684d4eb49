"""Advice checked by following it (#25): wrong advice is a false alarm too.

Every `eagle3-nb convert ...` command the kit prints for the bundled samples (a finding's
`command`, engines.advice.with_advice over every registered release range, with the target's
config) is run into tmp_path; the copy is inspected again and the finding the command addressed
is gone for its engine. A serving flag cannot be run here: the engine's serving command with the
flag its finding names parses with that engine's launch dialect, and inspecting with it removes
the finding. `convert` never calls a copy ok for an engine without knowing the target.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict

from conftest import DRAFTS, SAMPLES, TARGET_CONFIG
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.cli import main
from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.advice import with_advice
from eagle3_nb.engines.launch import read_launch
from eagle3_nb.engines.registry import engines

KEYS = [p.key for e in engines().values() for p in e.profiles]
SERIOUS = ("error", "warning")


def _samples():
    return sorted(d for d in DRAFTS.iterdir() if (d / "config.json").is_file())


def _alarms(path, keys, launch=None) -> set[tuple[str, str | None]]:
    data = inspect_checkpoint(path, keys, TARGET_CONFIG, launch=launch).to_json()
    return {(f["code"], f["engine"]) for f in data["findings"] if f["severity"] in SERIOUS}


def _printed_conversions(draft) -> dict[str, set[tuple[str, str | None]]]:
    """command -> the (code, engine) findings it is printed for."""
    data = with_advice(inspect_checkpoint(draft, KEYS, TARGET_CONFIG).to_json(),
                       {"TARGET_CONFIG": str(TARGET_CONFIG)})
    out: dict[str, set] = defaultdict(set)
    for f in data["findings"]:
        if f["severity"] in SERIOUS and (f.get("command") or "").startswith("eagle3-nb convert"):
            out[f["command"]].add((f["code"], f["engine"]))
    return out


def test_every_printed_conversion_removes_the_finding_it_addresses(tmp_path, capsys):
    followed, left = 0, []
    for draft in _samples():
        for command, addressed in _printed_conversions(draft).items():
            words = shlex.split(command)[1:]
            assert words[:2] == ["convert", str(draft)], command
            words[2] = str(tmp_path / f"copy{followed}")   # NEW, here instead of beside the draft
            followed += 1
            main(words)
            capsys.readouterr()
            keys = sorted({e for _, e in addressed if e}) or KEYS
            still = _alarms(words[2], keys)
            left += [f"{draft.name}: {command.split(str(DRAFTS))[-1]} -> {code} ({engine})"
                     for code, engine in addressed if (code, engine) in still]
    assert followed >= 20                       # the walk is not vacuous
    assert left == [], "\n".join(left[:10])


def test_no_conversion_is_printed_where_the_copy_keeps_the_error():
    """The 0.9-0.10 vLLM releases refuse the good draft's architecture name: no layout
    conversion changes it, so none is advised (it used to print `convert --engine`)."""
    data = with_advice(inspect_checkpoint(DRAFTS / "good", ["vllm==0.10.0"], TARGET_CONFIG,
                                          stats=False).to_json())
    (error,) = [f for f in data["findings"] if f["code"] == "LOAD_ERROR"]
    assert error["command"] is None and "does not remove this" in error["next_step"]
    missing = with_advice(inspect_checkpoint(DRAFTS / "d2t-missing", ["vllm==0.34.0"],
                                             TARGET_CONFIG).to_json())
    (d2t,) = [f for f in missing["findings"] if f["code"] == "D2T_MISSING"]
    assert d2t["command"] is None and "no t2d" in d2t["next_step"]


def _without_the_switch(command: str, setting: str) -> str:
    """The engine's serving command with its EAGLE-3 method turned into EAGLE-1's; in a
    --config YAML (decoding_type) into Medusa, since there "Eagle" is EAGLE-3's older name
    (NVIDIA/TensorRT-LLM llm_args.py EagleDecodingConfig.spec_dec_mode: EAGLE3 either way)."""
    assert setting.strip('"').rsplit(".", 1)[-1] in command, (setting, command)
    if "decoding_type: " in command:
        return re.sub(r"decoding_type: Eagle3?\b", "decoding_type: Medusa", command)
    return re.sub(r"eagle3", "eagle", re.sub(r"EAGLE3", "EAGLE", command))


def test_the_serving_switch_a_finding_names_parses_and_removes_it():
    """EAGLE-1 instead of EAGLE-3 in the serving command: each release's LAUNCH_SETTING names
    its capture switch; the command with that switch (the engine's own serving command) parses
    with the engine's dialect and inspecting with it removes the finding."""
    draft = DRAFTS / "good"
    checked = set()
    for name, engine in engines().items():
        if engine.launch is None:
            continue
        fixed = engine.launch.serve(str(SAMPLES / "target"), str(draft))
        broken = _without_the_switch(fixed, engine.launch.setting_names["method"])
        keys = [p.key for p in engine.profiles if not p.eagle3_since]
        before = _alarms(draft, keys, broken)
        settings = read_launch(fixed)
        assert settings.engine == name and settings.method.lower() == "eagle3"
        after = _alarms(draft, keys, fixed)
        for key in keys:
            assert ("LAUNCH_SETTING", key) in before, key
            switch = resolve_engine(key).capture_switch
            assert "eagle3" in switch.lower() or not switch, (key, switch)
            assert ("LAUNCH_SETTING", key) not in after, key
            checked.add(name)
    assert checked == {name for name, e in engines().items() if e.launch}   # every dialect serves


def test_convert_calls_a_copy_ok_only_knowing_the_target(tmp_path, capsys):
    """`convert --fix-d2t` used to print `vllm==0.33 ok` with no target known, while
    `inspect --target-config` on the copy could say LOAD ERROR. Without a target no engine line
    says a bare ok; with it, each line agrees with inspect --target-config on the copy."""
    src = DRAFTS / "d2t-absolute"
    main(["convert", str(src), str(tmp_path / "a"), "--fix-d2t"])
    lines = [line.split() for line in capsys.readouterr().out.splitlines()
             if line.startswith("  ") and "==" in line]
    assert lines and all(words[1:] != ["ok"] for words in lines), lines
    main(["convert", str(src), str(tmp_path / "b"), "--fix-d2t", "--target-config",
          str(TARGET_CONFIG)])
    printed = {w[0]: w[1] for w in (line.split() for line in capsys.readouterr().out.splitlines()
                                    if line.startswith("  ") and "==" in line)}
    truth = inspect_checkpoint(tmp_path / "b", list(printed), TARGET_CONFIG).to_json()
    assert printed == {e["profile"]: e["verdict"] for e in truth["engines"]}
