"""The graph as one self-contained HTML page: an inline SVG drawing plus a few lines of script.

Nothing is fetched when the page opens (no fonts, scripts or styles from elsewhere), so it can be mailed,
committed or opened on a machine without a network. Every node is an SVG `<g class="node ...">` with
`data-id`; hovering one shows its document line, its kernel's source and its time against its roofline
floor, read from one JSON block in the page (each kernel's source once, however many nodes use it).
"""

from __future__ import annotations

import html
import json
import math

from ..measure.timing import format_seconds
from .layout import layout
from .model import GraphView, ViewNode

KERNEL_STROKE = "#1f4fd1"  # kernel nodes: a thick blue border, whatever their time colour
REPLACED_STROKE = "#1a9850"  # regions the loop replaced: a dashed green outline around the node

STYLE = f"""
body {{ font: 13px system-ui, sans-serif; margin: 0; color: #222; }}
header {{ padding: 8px 14px; border-bottom: 1px solid #ddd; background: #fafafa; position: fixed; top: 0;
         left: 0; right: 0; z-index: 5; }}  /* fixed, not sticky: a wide graph scrolls sideways too */
header b {{ font-size: 15px; }}
.legend span {{ display: inline-block; margin-right: 14px; }}
.swatch {{ display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin-right: 4px;
          border: 1px solid #888; }}
svg text {{ font: 11px ui-monospace, monospace; pointer-events: none; }}
.node rect.box {{ stroke: #777; stroke-width: 1; }}
.node.kernel rect.box {{ stroke: {KERNEL_STROKE}; stroke-width: 3; }}
.node.input rect.box, .node.state rect.box, .node.output rect.box {{ fill: #eee; rx: 18; }}
.node rect.replaced {{ fill: none; stroke: {REPLACED_STROKE}; stroke-width: 2; stroke-dasharray: 6 3; }}
.node:hover rect.box {{ stroke: #000; stroke-width: 2; }}
.edge {{ fill: none; stroke: #9aa; stroke-width: 1; }}
#tip {{ position: fixed; display: none; max-width: 720px; max-height: 70vh; overflow: auto; background: #fff;
       border: 1px solid #888; box-shadow: 0 2px 8px #0003; padding: 8px; z-index: 9; }}
#tip pre {{ margin: 4px 0; white-space: pre-wrap; font: 11px ui-monospace, monospace; }}
#tip pre.src {{ max-height: 40vh; overflow: auto; background: #f6f6f6; }}
"""

SCRIPT = """
const svg = document.querySelector('svg'), W = +svg.getAttribute('width'), H = +svg.getAttribute('height');
let zoom = 1;  // keys + and - (or the buttons) zoom; 0 fits the page's width: a 2,500-node graph is tall
function setZoom(z) { zoom = Math.max(0.05, Math.min(4, z)); svg.setAttribute('width', W * zoom);
                      svg.setAttribute('height', H * zoom); }
document.addEventListener('keydown', e => { if (e.key === '+' || e.key === '=') setZoom(zoom * 1.25);
  if (e.key === '-') setZoom(zoom / 1.25); if (e.key === '0') setZoom(window.innerWidth / W); });
document.querySelectorAll('button[data-zoom]').forEach(b => b.addEventListener('click', () =>
  setZoom(b.dataset.zoom === 'fit' ? window.innerWidth / W : zoom * +b.dataset.zoom)));
const data = JSON.parse(document.getElementById('hoid-data').textContent);
const tip = document.getElementById('tip');
function esc(s) { return s.replace(/[&<>]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'})[c]); }
document.querySelectorAll('g.node').forEach(g => {
  g.addEventListener('mouseenter', ev => {
    const n = data.nodes[g.dataset.id];
    let h = '<pre class="line">' + esc(n.line) + '</pre>';
    if (n.time) h += '<div class="time">' + esc(n.time) + '</div>';
    if (n.weights.length) h += '<div>weights: ' + esc(n.weights.join(', ')) + '</div>';
    if (n.source) h += '<div>kernel source:</div><pre class="src">' + esc(data.sources[n.source]) + '</pre>';
    tip.innerHTML = h; tip.style.display = 'block';
    tip.style.left = Math.min(ev.clientX + 16, window.innerWidth - 740) + 'px';
    tip.style.top = Math.min(ev.clientY + 12, window.innerHeight * 0.3) + 'px';
  });
  g.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
});
"""


def share_colour(share: float | None, top: float) -> str:
    """White to red by the node's share of the time, relative to the largest (sqrt: small shares show)."""
    if share is None or top <= 0:
        return "#ffffff"
    t = math.sqrt(max(0.0, min(1.0, share / top)))
    r, g, b = (round(255 + (c - 255) * t) for c in (239, 101, 72))
    return f"#{r:02x}{g:02x}{b:02x}"


def time_text(n: ViewNode, evidence: str | None) -> str:
    if n.seconds is None:
        return ""
    what = "modelled" if evidence == "analytic" else evidence or ""
    text = f"{format_seconds(n.seconds)} ({what}), {n.share:.1%} of the graph"
    if n.count > 1:
        text += f", summed over {n.count} layers"
    if n.floor:
        floor = n.floor * n.count
        text += f"; roofline floor {format_seconds(floor)} ({n.seconds / floor:.1f}x the floor)"
    return text


def node_title(n: ViewNode) -> str:
    """The op or kernel, the weight it reads (its module path's last part) and the layer count."""
    title = n.label
    if n.weights:
        title += " " + ".".join(n.weights[0].split(".")[-2:-1] or n.weights[0].split(".")[-1:])
    return title + (f" x{n.count}" if n.count > 1 else "")


def _node_svg(n: ViewNode, box, fill: str) -> str:
    classes = " ".join(["node", n.kind] + (["replaced"] if n.replaced else []))
    title = node_title(n)
    second = ", ".join(n.types)
    if n.seconds is not None and n.kind in ("op", "kernel"):
        second = f"{format_seconds(n.seconds)} · {n.share:.0%} · {second}"
    parts = [f'<g class="{classes}" data-id="{html.escape(n.id)}">']
    if n.replaced:
        parts.append(f'<rect class="replaced" x="{box.x - 4}" y="{box.y - 4}" width="{box.w + 8}" '
                     f'height="{box.h + 8}" rx="6"/>')
    parts.append(f'<rect class="box" x="{box.x}" y="{box.y}" width="{box.w}" height="{box.h}" rx="4" '
                 f'fill="{fill}"/>')
    for k, text in enumerate((title, second)):
        short = text if len(text) <= 27 else text[:26] + "…"
        parts.append(f'<text x="{box.x + 6}" y="{box.y + 18 + 16 * k}">{html.escape(short)}</text>')
    parts.append("</g>")
    return "".join(parts)


def render_html(view: GraphView, title: str | None = None) -> str:
    """The page (a string) for `view`."""
    boxes, width, height = layout(view)
    top = max((n.share or 0.0 for n in view.op_nodes), default=0.0)
    edges = []
    for a, b in view.edges:
        (x1, y1), (x2, y2) = boxes[a].bottom, boxes[b].top
        mid = (y1 + y2) / 2
        edges.append(f'<path class="edge" d="M{x1:.0f},{y1:.0f} C{x1:.0f},{mid:.0f} {x2:.0f},{mid:.0f} '
                     f'{x2:.0f},{y2:.0f}"/>')
    nodes, data, sources = [], {}, {}
    for n in view.nodes:
        fill = share_colour(n.share, top) if n.kind in ("op", "kernel") else "#eeeeee"
        if n.kind == "kernel" and n.share is None:
            fill = "#dbe6ff"
        nodes.append(_node_svg(n, boxes[n.id], fill))
        key = None
        if n.source:
            key = n.label if n.label not in sources or sources[n.label] == n.source else n.id
            sources[key] = n.source
        data[n.id] = {"line": n.line, "time": time_text(n, view.evidence), "weights": n.weights, "source": key}
    blob = json.dumps({"nodes": data, "sources": sources}).replace("</", "<\\/")  # no early </script>
    summary = f"{view.graph_nodes} nodes"
    if view.collapsed:
        summary += "; " + "; ".join(f"layers {a}-{b} ({c}) drawn once as layer {a}" for a, b, c in view.collapsed)
    if view.total is not None:
        label = "modelled: analytic roofline, not measured" if view.evidence == "analytic" else view.evidence
        summary += f"; {format_seconds(view.total)} on {view.device} ({label})"
    legend = ('<div class="legend"><span><i class="swatch" style="background:#fff;border:3px solid '
              f'{KERNEL_STROKE}"></i>kernel</span><span><i class="swatch" style="border:2px dashed '
              f'{REPLACED_STROKE}"></i>replaced by the loop</span>'
              + ('<span><i class="swatch" style="background:linear-gradient(90deg,#fff,#ef6548)"></i>share of '
                 'time</span>' if view.total is not None else "") + "<span>hover a node for its line, source "
              "and time</span><button data-zoom='0.8'>−</button><button data-zoom='1.25'>+</button>"
              '<button data-zoom="fit">fit</button></div>')
    name = html.escape(title or view.name)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{name}</title><style>{STYLE}</style>'
            f'</head><body><header><b>{name}</b> · {html.escape(summary)}{legend}</header>'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">'
            f'<g class="edges">{"".join(edges)}</g><g class="nodes">{"".join(nodes)}</g></svg>'
            f'<div id="tip"></div><script type="application/json" id="hoid-data">{blob}</script>'
            f"<script>{SCRIPT}</script></body></html>")
