"""A PNG preview of a `GraphView`, drawn with matplotlib from the same layout as the HTML page.

For documentation screenshots and for looking at a picture where no browser is at hand; the HTML is the
interactive one. Large graphs are drawn in full but at a size capped so the file stays small.
"""

from __future__ import annotations

from .html import KERNEL_STROKE, REPLACED_STROKE, node_title, share_colour
from .layout import layout
from .model import GraphView

MAX_INCHES = 60  # a 300-rank graph at 100 dpi: 6,000 pixels tall, still a few hundred KB


def render_png(view: GraphView, path, *, dpi: int = 100) -> None:
    """Write `view` as a PNG at `path`: the HTML page's layout and colours, drawn by matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    boxes, width, height = layout(view)
    scale = min(1.0, MAX_INCHES * 100 / max(width, height))
    fig = plt.figure(figsize=(width / 100 * scale, height / 100 * scale), dpi=dpi)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    top = max((n.share or 0.0 for n in view.op_nodes), default=0.0)
    for a, b in view.edges:
        (x1, y1), (x2, y2) = boxes[a].bottom, boxes[b].top
        ax.plot([x1, x2], [y1, y2], color="#99aaaa", lw=0.6 * scale + 0.2, zorder=1)
    font = max(3.0, 7.5 * scale)
    for n in view.nodes:
        box = boxes[n.id]
        fill = share_colour(n.share, top) if n.kind in ("op", "kernel") else "#eeeeee"
        if n.kind == "kernel" and n.share is None:
            fill = "#dbe6ff"
        edge, lw = (KERNEL_STROKE, 2.5) if n.kind == "kernel" else ("#777777", 0.8)
        ax.add_patch(FancyBboxPatch((box.x, box.y), box.w, box.h, boxstyle="round,pad=0,rounding_size=4",
                                    facecolor=fill, edgecolor=edge, lw=lw * scale, zorder=2))
        if n.replaced:
            ax.add_patch(FancyBboxPatch((box.x - 5, box.y - 5), box.w + 10, box.h + 10, fill=False,
                                        boxstyle="round,pad=0,rounding_size=6", edgecolor=REPLACED_STROKE,
                                        lw=1.5 * scale, ls="--", zorder=3))
        title = node_title(n)
        second = ", ".join(n.types)
        if n.share is not None and n.kind in ("op", "kernel"):
            second = f"{n.share:.0%} · {second}"
        for k, text in enumerate((title, second)):
            ax.text(box.x + 6, box.y + 17 + 16 * k, text if len(text) <= 27 else text[:26] + "…",
                    fontsize=font, family="monospace", zorder=4, clip_on=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
