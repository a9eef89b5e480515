"""`hoid report`'s HTML page: the markdown report's content with its plots, in one self-contained file.

Plots (matplotlib, embedded as base64 PNGs so nothing is fetched): the best whole-graph latency over
attempts (`hoid.agent.report.plot_best`, the PNG beside the markdown); each replaced region's time before
(the region's roofline-modelled time) and after (the kernel's time, with its evidence); a roofline chart
of each kept kernel's achieved FLOP/s against the device's bandwidth and compute ceilings. Then every
attempt with its verdict and reason. Each figure says whether it was measured or modelled.
"""

from __future__ import annotations

import base64
import html
import io
import json

from ..measure.timing import format_seconds


def device_named(name: str):
    """The device a journal names: a row of the table, or this machine (a CPU's name says its model)."""
    from ..measure.devices import get_device
    from ..measure.local import local_device

    try:
        return get_device(name)
    except KeyError:
        local = local_device()
        return local if local.name == name else get_device("cpu")


def kept_regions(report, journal) -> list[dict]:
    """One dict per kernel node of the run's best graph: kernel, region key, before/after seconds and
    evidence, flops, bytes. `before` is the region's analytic time (modelled); `after` the attempt's."""
    from ..ir.text import loads
    from ..measure.profile import profile_graph
    from ..measure.roofline import region_work

    best = journal.best_graph(report.run)
    if best is None:
        return []
    device = device_named(report.device)
    attempts = {a["kernel"]: a for a in report.attempts if a["kept"]}
    out = []
    for node in loads(best[0]).nodes:
        if node.op != "kernel":
            continue
        body = node.attrs["body"]
        a = attempts.get(node.attrs["kernel"], {})
        flops, nbytes = region_work(body)
        out.append({"kernel": node.attrs["kernel"], "region": a.get("region", node.name),
                    "before_s": profile_graph(body, mode="analytic", device=device).total,
                    "after_s": a.get("kernel_s"), "after_evidence": a.get("kernel_evidence") or "?",
                    "flops": flops, "bytes": nbytes})
    return out


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def plot_regions(regions: list[dict]):
    """Before/after bars per replaced region (a figure), or None when the run replaced none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in regions if r["after_s"]]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(rows) + 1.6), dpi=100)
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [r["before_s"] * 1e6 for r in rows], 0.4, label="region before (modelled)",
            color="#bbbbbb")
    ax.barh([y - 0.2 for y in ys], [r["after_s"] * 1e6 for r in rows], 0.4, color="tab:blue",
            label=f"kernel after ({', '.join(sorted({r['after_evidence'] for r in rows}))})")
    ax.set_yticks(list(ys), [r["kernel"] for r in rows], fontsize=8)
    ax.set_xlabel("µs per run")
    ax.set_title("replaced regions: time before and after")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def plot_roofline(points: list[dict], device, title: str):
    """Each point (name, flops, bytes, seconds, evidence) against the device's ceilings, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [p for p in points if p["seconds"] and p["bytes"]]
    if not points:
        return None
    peak, bw = max(device.peak_flops.values()), device.copy_bandwidth
    xs = [max(p["flops"], 1) / p["bytes"] for p in points]
    lo, hi = min(xs + [0.01]) / 3, max(xs + [peak / bw]) * 30
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, bw * x) for x in grid], color="black", lw=1,
            label=f"ceiling: {bw / 1e12:.2f} TB/s, {peak / 1e12:.0f} TFLOP/s")
    for p, x in zip(points, xs):
        achieved = max(p["flops"], 1) / p["seconds"]
        ax.scatter([x], [achieved], color="tab:blue" if p["evidence"] == "measured" else "tab:orange", s=18)
        ax.annotate(p["name"], (x, achieved), fontsize=6, xytext=(3, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(title, fontsize=10)
    ax.scatter([], [], color="tab:blue", s=18, label="measured")
    ax.scatter([], [], color="tab:orange", s=18, label="modelled")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def write_report_html(report, journal, path, best_png: str | None = None) -> dict:
    """The page at `path`; returns what it drew ({"plots": [...], "attempts": n}) for the caller and tests."""
    regions = kept_regions(report, journal)
    device = device_named(report.device)
    figures = []
    if best_png:
        with open(best_png, "rb") as f:
            figures.append(("best whole-graph latency over attempts", base64.b64encode(f.read()).decode()))
    fig = plot_regions(regions)
    if fig is not None:
        figures.append(("replaced regions, before and after", _png(fig)))
    fig = plot_roofline([{"name": r["kernel"], "flops": r["flops"], "bytes": r["bytes"], "seconds": r["after_s"],
                          "evidence": r["after_evidence"]} for r in regions], device,
                        f"kept kernels on the {device.name} roofline")
    if fig is not None:
        figures.append(("kept kernels against the roofline", _png(fig)))
    rows = []
    for a in report.attempts + report.skipped:
        state = "kept" if a["kept"] else ("discarded" if a["verdict"] == "passed" else a["verdict"] or "?")
        t = f"{format_seconds(a['kernel_s'])} ({a['kernel_evidence']})" if a["kernel_s"] else ""
        rows.append(f'<tr class="{html.escape(state)}"><td>{html.escape(state)}</td><td>{html.escape(a["kernel"])}'
                    f'</td><td>{html.escape(a["region"])}</td><td>{t}</td><td>{html.escape(a["why"] or "")}</td></tr>')
    imgs = "".join(f'<figure><img alt="{html.escape(t)}" src="data:image/png;base64,{b}"><figcaption>'
                   f"{html.escape(t)}</figcaption></figure>" for t, b in figures)
    blob = json.dumps(regions).replace("</", "<\\/")  # no early </script>
    page = (f'<!doctype html><html><head><meta charset="utf-8"><title>hoid report: {html.escape(report.graph)}'
            "</title><style>body{font:14px system-ui,sans-serif;max-width:1000px;margin:20px auto;color:#222}"
            "table{border-collapse:collapse;font-size:12px}td{border-top:1px solid #ddd;padding:3px 6px;"
            "vertical-align:top}tr.kept td:first-child{color:#1a9850;font-weight:bold}tr.rejected td:first-child"
            "{color:#b2182b}figure{display:inline-block;margin:8px}</style></head><body>"
            f"<h1>hoid optimize: {html.escape(report.graph)} on {html.escape(report.device)}</h1>"
            f"<p><b>{html.escape(report.headline())}</b><br>stopped: {html.escape(report.stop_reason)}; journal "
            f"{html.escape(report.journal)} (run {report.run})</p>{imgs}"
            f"<h2>attempts: {len(report.attempts)}, kept {sum(1 for a in report.attempts if a['kept'])}, skipped "
            f"{len(report.skipped)}</h2><p>kept: in the best graph; discarded: passed its check, but the whole graph "
            "was not faster; rejected: failed its check (the reason says how); skipped: not proposed, nothing "
            "checked (the reason says why).</p><table><tr><th>outcome</th><th>kernel</th>"
            f"<th>region</th><th>kernel time</th><th>why</th></tr>{''.join(rows)}</table>"
            f'<script type="application/json" id="hoid-regions">{blob}</script></body></html>')
    with open(path, "w") as f:
        f.write(page)
    return {"plots": [t for t, _ in figures], "attempts": len(report.attempts), "skipped": len(report.skipped),
            "regions": regions}
