"""Every profiled engine release the probe can install, over every bundled sample draft.

    python tools/engine_truth.py [--engines sglang==0.5.23,vllm==0.33] [--out docs/engine-truth.md]

For each profile in eagle3_nb.engines.PROFILES (or --engines) it sets up the side environment
(tools/engine_env.sh; a release whose environment cannot be built is listed with the reason),
runs `eagle3_nb.probe` on every sample draft in that environment's Python (one process per
release) and prints a table variant x release: agree / N differences, then every difference.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "data_samples" / "drafts"
TARGET = ROOT / "data_samples" / "target"


def release_of(profile) -> str:
    """The wheel a profile was read from ('code of the 0.5.4.post3 wheel'), else its version."""
    m = re.search(r"code of the (\S+) wheel", profile.evidence)
    version = m.group(1) if m else profile.version
    return version if version.count(".") >= 2 else version + ".0"


def worker(engine: str, drafts: list[str]) -> int:
    """Runs inside a side environment: one JSON line per draft."""
    from eagle3_nb.errors import Eagle3NbError
    from eagle3_nb.probe import probe_checkpoint

    for d in drafts:
        t = time.time()
        try:
            r = probe_checkpoint(d, engine, TARGET).to_json()
        except Eagle3NbError as exc:
            r = {"error": exc.one_line()}
        except Exception as exc:  # one draft's failure must not hide the others
            r = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        r["variant"], r["seconds"] = Path(d).name, round(time.time() - t, 1)
        print("@@" + json.dumps(r), flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="", help="comma-separated NAME==VERSION (default: all)")
    ap.add_argument("--variants", default="", help="comma-separated sample names (default: all)")
    ap.add_argument("--out", default=None, help="also write the report (markdown) here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("drafts", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.drafts)

    sys.path.insert(0, str(ROOT))
    from eagle3_nb.engines import resolve_engines

    profiles = resolve_engines([s for s in args.engines.split(",") if s] or None)
    wanted = [v for v in args.variants.split(",") if v]
    variants = sorted(p.name for p in DRAFTS.iterdir() if (p / "config.json").exists()
                      and (not wanted or p.name in wanted))
    columns, results, setup = [], {}, []
    for profile in profiles:
        release = release_of(profile)
        col = f"{profile.name} {release}"
        columns.append(col)
        t = time.time()
        env = subprocess.run(["bash", str(ROOT / "tools" / "engine_env.sh"), profile.name,
                              release], capture_output=True, text=True, cwd=ROOT)
        if env.returncode:
            why = [ln for ln in (env.stderr + env.stdout).splitlines()
                   if ln.strip() and "WARNING" not in ln][-1:] or ["unknown"]
            setup.append(f"{col}: side environment failed ({why[0][:200]})")
            results[col] = None
            continue
        setup.append(f"{col}: {env.stdout.strip().splitlines()[-1]} "
                     f"(this run: {time.time() - t:.0f}s)")
        py = ROOT / ".cache" / "engines" / f"{profile.name}-{release}" / "bin" / "python"
        t = time.time()
        run = subprocess.run([str(py), str(Path(__file__).resolve()), "--worker", profile.name,
                              *[str(DRAFTS / v) for v in variants]],
                             capture_output=True, text=True, cwd=ROOT)
        rows = [json.loads(ln[2:]) for ln in run.stdout.splitlines() if ln.startswith("@@")]
        results[col] = {r["variant"]: r for r in rows}
        setup[-1] += f"; probing {len(rows)} drafts took {time.time() - t:.0f}s"
        if run.returncode and len(rows) < len(variants):
            tail = run.stderr.strip().splitlines()[-1:] or ["?"]
            setup[-1] += f"; worker stopped: {tail[0][:200]}"
    text = render(variants, columns, results, setup)
    print(text)
    if args.out:
        Path(args.out).write_text(text + kept_ablation(Path(args.out)))
    return 0


def kept_ablation(doc: Path) -> str:
    """The doc's config-field ablation section (tools/config_ablation.py writes it), kept."""
    from config_ablation import BEGIN, END

    text = doc.read_text() if doc.exists() else ""
    if BEGIN not in text or END not in text:
        return ""
    return "\n" + BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END + "\n"


def render(variants, columns, results, setup) -> str:
    out = ["# Engine truth: the installed engines' own loaders against their profiles", "",
           "Generated by `make engine-truth` (tools/engine_truth.py): every bundled sample draft "
           "(data_samples/drafts) probed with `eagle3-nb probe` in each release's side "
           "environment, target data_samples/target. *agree*: every key's fate and parameter, "
           "the parameters left unwritten and the startup outcome match the profile's "
           "prediction.", "", "## Set-up", ""]
    out += [f"- {s}" for s in setup]
    out += ["", "## Agreement", "", "| variant | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns)]
    for v in variants:
        cells = []
        for col in columns:
            rows = results.get(col)
            r = rows.get(v) if rows else None
            if rows is None:
                cells.append("not installed")
            elif r is None:
                cells.append("not run")
            elif "error" in r:
                cells.append("probe error")
            else:
                n = len(r["differences"])
                cells.append("agree" if n == 0 else f"{n} difference{'s' * (n != 1)}")
        out.append(f"| {v} | " + " | ".join(cells) + " |")
    out += ["", "## Differences", ""]
    any_diff = False
    for col in columns:
        for v, r in sorted((results.get(col) or {}).items()):
            if "error" in r:
                out.append(f"- **{v}** on {col}: probe error: {r['error']}")
                any_diff = True
                continue
            for d in r["differences"]:
                any_diff = True
                line = (f"- **{v}** on {col} ({r['profile']}): {d['what']} `{d['name']}`: "
                        f"profile says {d['predicted']}; engine did {d['observed']}")
                out.append(line + (f" — engine: `{d['engine_line']}`" if d["engine_line"] else ""))
    if not any_diff:
        out.append("none")
    stubs = sorted({s["module"] for rows in results.values() if rows for r in rows.values()
                    for s in r.get("stubs", [])})
    out += ["", "## Stubs used", "", ", ".join(stubs) or "none", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
