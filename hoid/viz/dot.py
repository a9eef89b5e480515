"""The graph as Graphviz DOT text, and an SVG drawn by Graphviz's `dot` where it is installed.

Graphviz is an optional, outside dependency (a binary, not a Python package): where `dot` is missing,
`render_svg` raises `GraphvizMissing`, whose message says how to install it; `hoid show --svg` then writes
the DOT text instead, which any Graphviz (or an online viewer) renders later.
"""

from __future__ import annotations

import shutil
import subprocess

from ..measure.timing import format_seconds
from .html import KERNEL_STROKE, REPLACED_STROKE, node_title, share_colour
from .model import GraphView

INSTALL = ("Graphviz's dot is not installed: install it (Debian/Ubuntu: sudo apt-get install graphviz; macOS: "
           "brew install graphviz; conda: conda install graphviz) or use --html, which needs nothing")


class GraphvizMissing(RuntimeError):
    """Graphviz's `dot` is not on PATH; the message says how to install it (or to use --html)."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(view: GraphView) -> str:
    """DOT text: one statement per drawn node (its op or kernel, types, time), one per edge."""
    top = max((n.share or 0.0 for n in view.op_nodes), default=0.0)
    lines = [f"digraph {_quote(view.name)} {{", '  node [shape=box, style="rounded,filled", fontname="monospace", '
             'fontsize=10, fillcolor="#ffffff"];', "  edge [color=\"#99aaaa\"];"]
    for n in view.nodes:
        label = node_title(n) + "\n" + ", ".join(n.types)
        if n.seconds is not None and n.kind in ("op", "kernel"):
            label += f"\n{format_seconds(n.seconds)} ({n.share:.1%})"
        attrs = {"label": label, "tooltip": n.line, "class": n.kind}
        if n.kind in ("op", "kernel"):
            attrs["fillcolor"] = share_colour(n.share, top) if n.share is not None else (
                "#dbe6ff" if n.kind == "kernel" else "#ffffff")
        else:
            attrs.update(shape="oval", fillcolor="#eeeeee")
        if n.kind == "kernel":
            attrs.update(color=KERNEL_STROKE, penwidth="3")
        if n.replaced:
            attrs.update(style="rounded,filled,dashed", color=REPLACED_STROKE)
        body = ", ".join(f"{k}={_quote(v)}" for k, v in attrs.items())
        lines.append(f"  {_quote(n.id)} [{body}];")
    lines += [f"  {_quote(a)} -> {_quote(b)};" for a, b in view.edges]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot_text: str, *, dot: str | None = None) -> str:
    """The SVG Graphviz draws for `dot_text`; `GraphvizMissing` (saying how to install it) without `dot`."""
    exe = dot or shutil.which("dot")
    if exe is None or shutil.which(exe) is None:
        raise GraphvizMissing(INSTALL)
    done = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.strip()}")
    return done.stdout
