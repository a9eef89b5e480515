"""The codegen benchmark's JSON: its summary (geometric means, the regions below Inductor, the errors), its
table, and the merge of one session's calls into one file.

    python benchmarks/codegen_report.py RUN.json ... --out benchmarks/results/codegen/codegen-merged.json

`benchmarks/codegen.py` runs in parts, one device call each (its doc), and each call writes a file of its
own; the issue's figure is the geometric mean over every model's regions, so the calls of a session are
merged: rows by model (regions, whole) or form, a later file's row replacing an earlier one's, and the
summary computed again over all of them. Files of different devices, versions, layers or dtypes are refused
(their figures are not one run's), naming what differs; each file's date, parts and wall time stay under
`runs`.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

SAME = ("benchmark", "smoke", "device", "torch", "triton", "transformers", "python", "layers", "dtype")


def geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(data: dict) -> dict:
    """The figures over a run's rows: the geometric means against Inductor (the regions, at the faster of
    "auto" and tuned, and at "auto" alone; the forms), each region below Inductor, and every error row."""
    models = data["parts"].get("regions", {}).get("rows", [])
    regions = [r for m in models for r in m.get("regions", ())]
    forms = data["parts"].get("forms", {}).get("rows", [])
    return dict(
        geomean_vs_inductor=geomean(r.get("speedup") for r in regions),
        geomean_auto_vs_inductor=geomean(r.get("speedup_auto") for r in regions),
        geomean_forms_vs_inductor=geomean(r.get("speedup") for r in forms),
        regions_below_inductor=[{"model": m["model"], **r} for m in models for r in m.get("regions", ())
                                if r.get("speedup", 0) < 1.0],
        errors=[{"where": m.get("model") or m.get("form"), "kernel": r.get("kernel"), "error": r["error"]}
                for part in data["parts"].values() for m in part.get("rows", ())
                for r in [m, *m.get("regions", ())] if "error" in r])


def merge(runs: list[dict], names: list[str]) -> dict:
    """One report of several runs (`names`: where each came from); raises ValueError where they differ in
    what makes figures comparable."""
    for key in SAME:
        seen = {json.dumps(run.get(key)) for run in runs}
        if len(seen) > 1:
            raise ValueError(f"the runs differ in {key} ({', '.join(sorted(seen))}): merge one session's calls only")
    merged = {key: runs[0].get(key) for key in SAME}
    merged.update(note=runs[-1].get("note"), date=max(run["date"] for run in runs), parts={}, part_s={},
                  runs=[{"file": name, "date": run["date"], "parts_run": run["parts_run"],
                         "models_run": run["models_run"], "part_s": run["part_s"], "wall_s": run.get("wall_s")}
                        for run, name in zip(runs, names, strict=True)])
    for run in runs:
        for part, body in run["parts"].items():
            rows = merged["parts"].setdefault(part, {}).setdefault("rows", [])
            for row in body.get("rows", ()):
                key = row.get("model") or row.get("form")
                rows[:] = [r for r in rows if (r.get("model") or r.get("form")) != key] + [row]
        for part, seconds in run["part_s"].items():
            merged["part_s"][part] = merged["part_s"].get(part, 0.0) + seconds
    merged["wall_s"] = sum(run.get("wall_s") or 0.0 for run in runs)
    merged.update(summarize(merged))
    return merged


def print_table(data: dict) -> None:
    print(f"\n{'model':26} {'region':18} {'ops':30} {'auto':>9} {'tuned':>9} {'inductor':>9} {'x':>6}")
    for part in ("regions", "forms"):
        for m in data["parts"].get(part, {}).get("rows", ()):
            where = m.get("model") or m.get("form")
            for r in m.get("regions", ()) if part == "regions" else [m]:
                if "error" in r:
                    print(f"{where:26} {r.get('kernel', ''):18} error: {r['error'][:70]}")
                    continue
                print(f"{where:26} {r['kernel']:18} {'+'.join(r['ops'])[:30]:30} {r['hoid_auto_s'] * 1e6:8.1f}u "
                      f"{r['hoid_tuned_s'] * 1e6:8.1f}u {r['inductor_s'] * 1e6:8.1f}u {r['speedup']:6.2f}")
            if part == "regions" and "error" in m:
                print(f"{where:26} error: {m['error'][:100]}")
    for m in data["parts"].get("whole", {}).get("rows", ()):
        if "vs_max_autotune" in m:
            ratio = (f"{m['vs_max_autotune']:.2f}x" if m["vs_max_autotune"] is not None
                     else "no ratio (hoid's time is modelled)")
            print(f"{m['model']:26} whole model: hoid {m['hoid_best_s'] * 1e3:.3f} ms ({m['hoid_evidence']}) vs "
                  f"max-autotune {m['max_autotune_s'] * 1e3:.3f} ms: {ratio}")
        elif "error" in m:
            print(f"{m['model']:26} whole model error: {m['error'][:100]}")
    for key in ("geomean_vs_inductor", "geomean_auto_vs_inductor", "geomean_forms_vs_inductor"):
        if data.get(key):
            print(f"{key}: {data[key]:.3f}x")
    print("part times: " + ", ".join(f"{k} {v:.0f} s" for k, v in data["part_s"].items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="codegen.py's JSON files, in the order they ran")
    ap.add_argument("--out", type=Path, required=True, help="the merged JSON to write")
    args = ap.parse_args(argv)
    try:
        merged = merge([json.loads(p.read_text()) for p in args.runs], [p.name for p in args.runs])
    except ValueError as e:
        ap.error(str(e))
    from hoid.ir.io import replace_atomically  # the one write-then-rename

    text = json.dumps(merged, indent=1, default=str)
    replace_atomically(args.out, lambda tmp: tmp.write_text(text))
    print_table(merged)
    print(f"wrote {args.out} ({len(args.runs)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
