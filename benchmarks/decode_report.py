"""The decode benchmark's figures: the HBM roofline, best stock, the reference rule, and the report.

    python benchmarks/decode_report.py                       # markdown table of benchmarks/results/decode/
    python benchmarks/decode_report.py DIR --plot out.png    # and the plot (tokens/s per configuration)

Run files (`decode.py` writes one per run, `format: 2`) hold cells: one (prompt, batch) shape of one model
on one device, with its rows. Reading merges the files of a folder: cells by (device, model, shape), rows
by key, the later run winning; best stock is taken over the merged rows. The first version's file
(`benchmarks/results/decode.json`: one shape, a `results` list) is read as a legacy cell.

Roofline: a decode step reads every weight once (a tied embedding once: it is the LM head; an untied input
embedding only its B rows, so it is not counted) and, per sequence, the keys and values of the positions it
attends; over the decode steps of a generation that is P + N/2 positions on average. Tokens/s at the
roofline = B x copy bandwidth / (weight bytes + B x KV bytes per position x (P + N/2)), the bandwidth
measured at the start of the run (a device-to-device copy, read + write bytes per second).

Reference rule: the first run on a device commits every stock cell (`reference.json`: device, model,
shape, row -> tokens/s and time to first token); a later run's best stock is compared with the
reference's best over the same rows, per metric, and is `off` when it differs by more than 5% (the run's
`--note` must then say, measured, why).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TOLERANCE = 0.05
WARM_OPTIMIZE_S = 300  # issue 21: optimization <= 5 minutes per model, warm
METRICS = {"tokens_per_s": max, "ttft_s": min, "peak_bytes": min}  # what "best" means per metric
RESULTS = Path(__file__).parent / "results"


# --- the roofline ------------------------------------------------------------------------------------
def streamed_weight_bytes(lm) -> int:
    """Bytes of weights one decode step reads: every parameter once (shared ones once), except an untied
    input embedding table, of which a step reads only its tokens' rows."""
    embed = lm.get_input_embeddings().weight
    head = lm.get_output_embeddings().weight
    total = sum(p.numel() * p.element_size() for p in lm.parameters())  # parameters() yields shared ones once
    if embed.data_ptr() != head.data_ptr():
        total -= embed.numel() * embed.element_size()
    return total


def kv_bytes_per_position(cfg, dtype_bytes: int = 2) -> int:
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * dtype_bytes


def roofline_tokens_per_s(weight_bytes: int, kv_position_bytes: int, prompt: int, new: int, batch: int,
                          bandwidth: float) -> float:
    per_step = weight_bytes + batch * kv_position_bytes * (prompt + new / 2)
    return batch * bandwidth / per_step


# --- best stock and the reference rule ---------------------------------------------------------------
def _ok(rows, group):
    return [r for r in rows if r.get("group") == group and r.get("status") == "ok" and not r.get("failed")]


def best_of(rows, group: str = "stock") -> dict:
    """Per metric, the best value among `group`'s rows that ran (and passed the gate, where gated)."""
    out = {}
    for metric, pick in METRICS.items():
        candidates = [r for r in _ok(rows, group) if r.get(metric) is not None]
        if candidates:
            best = pick(candidates, key=lambda r: r[metric])
            out[metric] = {"value": best[metric], "key": best["key"], "name": best["name"]}
    return out


def cell_id(device: str, model: str, shape_key: str) -> str:
    return f"{device}|{model}|{shape_key}"


def check_reference(reference: dict, cell: str, rows: list[dict], note: str | None = None) -> tuple[dict, int]:
    """(the check for this cell's best stock, how many cells were added to `reference`, which it updates).

    Cells already there are never replaced: the first run's figures stay the reference."""
    cells = reference.setdefault("cells", {})
    stock = _ok(rows, "stock")
    prior = {r["key"]: cells[f"{cell}|{r['key']}"] for r in stock if f"{cell}|{r['key']}" in cells}
    added = 0
    for r in stock:
        name = f"{cell}|{r['key']}"
        if name not in cells:
            cells[name] = {"tokens_per_s": r.get("tokens_per_s"), "ttft_s": r.get("ttft_s"), "date": r.get("date")}
            added += 1
    if not prior:
        return {"status": "reference created", "rows": len(stock)}, added
    check = {"status": "within", "tolerance": TOLERANCE, "metrics": {}}
    for metric in ("tokens_per_s", "ttft_s"):
        pick = METRICS[metric]
        ours = [r[metric] for r in stock if r["key"] in prior and r.get(metric) is not None]
        theirs = [prior[k][metric] for k in prior if prior[k].get(metric) is not None]
        if not ours or not theirs:
            continue
        ratio = pick(ours) / pick(theirs)
        off = abs(ratio - 1) > TOLERANCE
        check["metrics"][metric] = {"run": pick(ours), "reference": pick(theirs), "ratio": ratio, "off": off}
        if off:
            check["status"] = "off"
    if check["status"] == "off":
        check["note"] = note or "UNEXPLAINED: best stock moved more than 5% from the reference; say, measured, why"
    return check, added


# --- reading results ---------------------------------------------------------------------------------
def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def legacy_cell(data: dict, source: str) -> dict:
    """The first version's file: Qwen3-1.7B decoded from position 0 (no prompt) over a cache of 1024."""
    rows = []
    for r in data["results"]:
        group = "hoid" if "hoid" in r["name"].lower() else "stock"
        rows.append({**r, "key": "legacy-" + _slug(r["name"]), "group": group, "status": "ok", "date": data["date"]})
    shape = {"prompt": None, "new": data["steps"], "batch": 1, "cache_len": data["cache_len"],
             "key": f"legacy-cache{data['cache_len']}-n{data['steps']}"}
    return {"device": data["device"], "model": data["model"], "shape": shape, "rows": rows, "legacy": True,
            "versions": {"torch": data.get("torch"), "triton": data.get("triton")}, "sources": [source]}


def read_cells(path: Path) -> list[dict]:
    """A run file's cells, each row with its date and its file (`source`). Read too: a decoder workload's run
    (`benchmark: workload` with decode's cells: `workload_qwen3_moe.py`), so that its slices merge as decode's."""
    data = json.loads(Path(path).read_text())
    workload = data.get("benchmark") == "workload" and "cells" in data
    if data.get("benchmark") != "decode" and not workload:
        return []
    if data.get("format") != 2 and not workload:
        return [legacy_cell(data, str(path))]
    cells = []
    for cell in data["cells"]:
        rows = [{**r, "date": r.get("date") or data["date"], "source": str(path)} for r in cell["rows"]]
        cells.append({**cell, "device": data["device"], "model": data["model"], "rows": rows,
                      "versions": data.get("versions"), "sources": [str(path)]})
    return cells


def load(where, *, legacy: Path | None = RESULTS / "decode.json") -> list[dict]:
    """Every cell of `where` (a folder, a file, or a list of files) and of the legacy file, merged: rows by
    key, the later date winning."""
    if isinstance(where, list | tuple):
        paths = [Path(p) for p in where]
    else:
        where = Path(where)
        paths = sorted(where.glob("*.json")) if where.is_dir() else [where] if where.is_file() else []
    paths = [p for p in paths if p.name != "reference.json"]
    if legacy is not None and legacy.is_file() and legacy not in paths:
        paths.append(legacy)
    merged: dict[str, dict] = {}
    for path in paths:
        for cell in read_cells(path):
            name = cell_id(cell["device"], cell["model"], cell["shape"]["key"])
            if name not in merged:
                merged[name] = {**cell, "rows": {}}
            else:
                merged[name]["sources"] += cell["sources"]
                for k in ("roofline_tokens_per_s", "gate_baseline", "gate_sequences"):
                    merged[name][k] = cell.get(k) or merged[name].get(k)
            rows = merged[name]["rows"]
            for r in cell["rows"]:
                if r["key"] not in rows or (r.get("date") or "") >= (rows[r["key"]].get("date") or ""):
                    rows[r["key"]] = r
    out = []
    for cell in merged.values():
        cell["rows"] = list(cell["rows"].values())
        cell["best_stock"] = best_of(cell["rows"])
        out.append(cell)
    return sorted(out, key=lambda c: (c["device"], c["model"], c["shape"]["key"]))


# --- the README table and the plot -------------------------------------------------------------------
def _row(cell, key):
    return next((r for r in cell["rows"] if r["key"] == key and r.get("status") == "ok"), None)


def stock_lattice() -> tuple[str, ...]:
    """The stock rows issue 21 takes best stock over (`decode_stock.ROWS`, imported here only: it needs torch)."""
    from decode_stock import ROWS

    return tuple(ROWS)


def stock_not_run(cell, lattice: tuple[str, ...] | None = None) -> list[str]:
    """The lattice's rows this cell has no result of (a legacy cell: none asked): best stock over fewer rows
    is a lower bar, so the musts are not met until they ran (12-04: Qwen3-4B's only stock row was
    transformers eager, and the table said 29x)."""
    if cell.get("legacy"):
        return []
    ran = {r["key"] for r in cell["rows"] if r.get("group") == "stock" and r.get("status") == "ok"}
    raised = stock_raised(cell, lattice)
    return [k for k in (lattice if lattice is not None else stock_lattice()) if k not in ran and k not in raised]


def stock_raised(cell, lattice: tuple[str, ...] | None = None) -> dict[str, str]:
    """The lattice's rows that ran and raised, each with the first line of its error: stock PyTorch that
    cannot run at this size sets no bar, so such a row is not "not run", and the table names it apart
    (12-08, H100: Qwen3-30B-A3B under max-autotune with coordinate descent raised in Inductor's CUDA-graph
    trees after 459 s of warm-up, where max-autotune alone ran)."""
    lattice = lattice if lattice is not None else stock_lattice()
    ok = {r["key"] for r in cell["rows"] if r.get("status") == "ok"}
    return {r["key"]: (r.get("reason") or "").split("\n")[0] for r in cell["rows"]
            if r.get("group") == "stock" and r.get("status") == "error" and r["key"] in lattice
            and r["key"] not in ok}


def misses(cell, lattice: tuple[str, ...] | None = None) -> list[str]:
    """What issue 21's musts find missing in a cell: hoid (compiled, gate passed) no slower than best stock at
    decode, time to first token no worse, warm optimization within 5 minutes, and best stock taken over the
    whole lattice (`stock_not_run`). Empty: all met."""
    hoid, best = _row(cell, "hoid-compile"), cell.get("best_stock") or best_of(cell["rows"])
    if hoid is None or hoid.get("failed"):
        return ["no hoid-compile row that passed the gate"]
    out = []
    if missing := stock_not_run(cell, lattice):
        out.append(f"stock rows not run: {', '.join(missing)}")
    if "tokens_per_s" in best and hoid["tokens_per_s"] < best["tokens_per_s"]["value"]:
        out.append("decode slower than best stock")
    if "ttft_s" in best and hoid.get("ttft_s") is not None and hoid["ttft_s"] > best["ttft_s"]["value"]:
        out.append("TTFT worse than best stock")
    warm = ((hoid.get("optimize") or {}).get("warm") or {}).get("seconds")
    if warm is not None and warm > WARM_OPTIMIZE_S:
        out.append(f"warm optimize {warm:.0f} s > {WARM_OPTIMIZE_S} s")
    return out


def _fmt(value, scale=1.0, digits=0, suffix=""):
    return "-" if value is None else f"{value * scale:.{digits}f}{suffix}"


def markdown(cells: list[dict], lattice: tuple[str, ...] | None = None) -> str:
    head = ("| model | prompt | batch | best stock tok/s | hoid tok/s | hoid / best | export tok/s "
            "| backend tok/s | roofline (hoid) | TTFT ms stock / hoid | peak GiB stock / hoid "
            "| optimize s cold / warm | gate | musts |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    lattice = lattice if lattice is not None else stock_lattice()
    for cell in cells:
        best = cell.get("best_stock") or best_of(cell["rows"])
        hoid, export, back = (_row(cell, k) for k in ("hoid-compile", "hoid-export", "hoid-backend"))
        stock_tps = best.get("tokens_per_s", {})
        ratio = (hoid["tokens_per_s"] / stock_tps["value"]) if hoid and stock_tps else None
        roof = cell.get("roofline_tokens_per_s")
        opt = (hoid or {}).get("optimize") or {}
        gates = [r for r in (hoid, export, back) if r and "gate" in r]
        gate = "-" if not gates else ("pass" if not any(r.get("failed") for r in gates) else
                                      "FAILED: " + ", ".join(r["key"] for r in gates if r.get("failed")))
        shape = cell["shape"]
        raised = stock_raised(cell, lattice)
        ran = len(lattice) - len(stock_not_run(cell, lattice)) - len(raised)
        lines.append(" | ".join([
            f"| {cell['model']}" + (" (legacy)" if cell.get("legacy") else ""), str(shape["prompt"]),
            str(shape["batch"]),
            f"{_fmt(stock_tps.get('value'))} ({stock_tps.get('key', '-')}"
            + (f"; {ran} of {len(lattice)} rows" + (f", raised: {', '.join(raised)}" if raised else "") + ")"
               if not cell.get("legacy") else ")"),
            _fmt(hoid and hoid["tokens_per_s"]), _fmt(ratio, digits=2, suffix="x"),
            _fmt(export and export["tokens_per_s"]), _fmt(back and back["tokens_per_s"]),
            _fmt(hoid["tokens_per_s"] / roof if hoid and roof else None, 100, 0, "%"),
            f"{_fmt(best.get('ttft_s', {}).get('value'), 1e3, 1)} / {_fmt(hoid and hoid.get('ttft_s'), 1e3, 1)}",
            f"{_fmt(best.get('peak_bytes', {}).get('value'), 2**-30, 1)} / "
            f"{_fmt(hoid and hoid.get('peak_bytes'), 2**-30, 1)}",
            f"{_fmt((opt.get('cold') or {}).get('seconds'))} / "
            + ("not run" if opt.get("warm_skipped") else _fmt((opt.get("warm") or {}).get("seconds"))),
            gate, "; ".join(misses(cell, lattice)) or "met"]) + " |")
    return "\n".join(lines)


def plot(cells: list[dict], path: Path) -> Path:
    """Tokens/s of every configuration that ran, one panel per (prompt, batch), models side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = sorted({(c["shape"]["prompt"] or 0, c["shape"]["batch"]) for c in cells})
    fig, axes = plt.subplots(len(shapes), 1, figsize=(12, 3.6 * max(1, len(shapes))), squeeze=False)
    for ax, (prompt, batch) in zip(axes[:, 0], shapes):
        chosen = [c for c in cells if ((c["shape"]["prompt"] or 0), c["shape"]["batch"]) == (prompt, batch)]
        keys = list(dict.fromkeys(r["key"] for c in chosen for r in c["rows"] if r.get("status") == "ok"))
        width = 0.8 / max(1, len(keys))
        for i, key in enumerate(keys):
            values = [(_row(c, key) or {}).get("tokens_per_s") or 0 for c in chosen]
            ax.bar([j + i * width for j in range(len(chosen))], values, width, label=key,
                   hatch="//" if key.startswith("hoid") else None)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(chosen))], [c["model"] for c in chosen])
        ax.set_ylabel("tokens/s")
        ax.set_title(f"decode, prompt {prompt or 'none (legacy)'}, batch {batch}")
        ax.legend(fontsize=7, ncol=3)  # each panel its own: its rows differ (a legacy panel has others)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="the decode benchmark's README table and plot")
    ap.add_argument("folder", nargs="?", type=Path, default=RESULTS / "decode")
    ap.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    ap.add_argument("--no-legacy", action="store_true", help="leave out benchmarks/results/decode.json")
    args = ap.parse_args(argv)
    cells = load(args.folder, legacy=None if args.no_legacy else RESULTS / "decode.json")
    print(markdown(cells))
    if args.plot:
        print(f"wrote {plot(cells, args.plot)}")


if __name__ == "__main__":
    main()
