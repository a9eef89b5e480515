"""Pictures of hoid's graphs and numbers: the graph as an HTML page (or DOT / Graphviz SVG / PNG), a
profile as a Perfetto trace, and the optimization report's plots and HTML page.

    build_view(graph, profile)   what a picture draws (hoid.viz.model)
    render_html(view)            one self-contained page, hover for line, source, time vs floor
    to_dot(view), render_svg()   Graphviz (optional: without `dot`, the DOT text and how to install it)
    render_png(view, path)       a matplotlib preview from the HTML's own layout
    profile_trace(graph, prof)   a Chrome/Perfetto trace of a profile
    write_report_html(...)       `hoid report`'s HTML page with its plots (hoid.viz.report_html)
"""

from .dot import GraphvizMissing, render_svg, to_dot
from .html import render_html
from .model import GraphView, ViewNode, build_view
from .png import render_png
from .trace import profile_trace, write_trace

__all__ = ["GraphView", "GraphvizMissing", "ViewNode", "build_view", "profile_trace", "render_html", "render_png",
           "render_svg", "to_dot", "write_trace"]
