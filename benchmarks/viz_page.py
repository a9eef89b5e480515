"""The 28-layer Qwen3-1.7B decode step's `hoid show --html` page in headless Chromium: its size and how long
it takes to be drawn, whole (every node) and collapsed (repeated layers once).

"Drawn": from the start of navigation to the first frame painted after the load event (hoid.viz.browser);
each figure is the median of `--repeat` loads. The graph is built on the meta device (no weights), its times
modelled (analytic roofline): the page's size and draw time do not depend on them.

    python benchmarks/viz_page.py [--repeat 5] [--out benchmarks/results]

Needs Chromium, chromedriver and selenium (apt-get install chromium chromium-driver; pip install -e
'.[browser]'). No GPU. Targets (issue 23): under 5 MB and drawn in under 3 s.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

MAX_BYTES, MAX_DRAW_S = 5e6, 3.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    from hoid.measure.devices import get_device
    from hoid.measure.profile import profile_graph
    from hoid.models import build_model, decode_step_graph
    from hoid.viz import build_view, render_html
    from hoid.viz.browser import Browser

    graph = decode_step_graph(build_model("qwen3-1.7b", device="meta"), 512)
    profile = profile_graph(graph, mode="analytic", device=get_device("h200"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Browser() as browser:
        for collapse in (False, True):
            t0 = time.perf_counter()
            view = build_view(graph, profile, collapse=collapse)
            page = Path(tmp) / f"page_{collapse}.html"
            page.write_text(render_html(view, "Qwen3-1.7B decode step"))
            render_s = time.perf_counter() - t0
            draws, errors = [], []
            for _ in range(args.repeat):
                errors += browser.open(page)
                draws.append(browser.drawn_ms() / 1e3)
            drawn = browser.js("return document.querySelectorAll('g.node.op, g.node.kernel').length")
            rows.append({"page": "collapsed" if collapse else "whole", "graph_nodes": len(graph.nodes),
                         "drawn_nodes": drawn, "bytes": page.stat().st_size, "render_s": render_s,
                         "draw_s": statistics.median(draws), "draw_s_all": draws, "errors": errors,
                         "ok": page.stat().st_size < MAX_BYTES and statistics.median(draws) < MAX_DRAW_S
                         and not errors})
    print(f"{'page':10} {'nodes':>11} {'MB':>6} {'html s':>7} {'drawn s':>8}  target (<5 MB, <3 s)")
    for r in rows:
        print(f"{r['page']:10} {r['drawn_nodes']:>5}/{r['graph_nodes']:<5} {r['bytes'] / 1e6:6.2f} "
              f"{r['render_s']:7.2f} {r['draw_s']:8.2f}  {'met' if r['ok'] else 'MISSED'}"
              + (f" ({len(r['errors'])} script errors)" if r["errors"] else ""))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "viz_page.json").write_text(json.dumps({
        "date": datetime.now(UTC).isoformat(), "machine": platform.node(), "cpu": platform.processor(),
        "browser": browser.version, "model": "qwen3-1.7b decode step, cache 512", "repeat": args.repeat,
        "rows": rows}, indent=1))
    print(f"wrote {out / 'viz_page.json'}")


if __name__ == "__main__":
    main()
