"""The picture options of `hoid show` and the body of `hoid trace` (kept here so hoid/cli*.py stay small).

    hoid show FILE --html OUT.html [--profile] [--collapse]   one self-contained page (no Graphviz needed)
    hoid show FILE --svg OUT.svg                              Graphviz's drawing; without `dot`, OUT.dot and how
                                                              to install Graphviz
    hoid show FILE --png OUT.png                              a matplotlib preview of the HTML's layout
    hoid show JOURNAL.sqlite --html OUT.html                  the run's best graph, its kernels outlined

`--profile` colours every node by its share of the time: measured on a GPU, the analytic roofline (labelled
modelled) on the CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..cli_input import UsageError, read_graph

SQLITE = b"SQLite format 3\0"


def add_picture_options(parser) -> None:
    parser.add_argument("--html", default=None, metavar="OUT", help="write the graph as a self-contained HTML page")
    parser.add_argument("--svg", default=None, metavar="OUT", help="write Graphviz's SVG (the DOT text without dot)")
    parser.add_argument("--dot", default=None, metavar="OUT", help="write the graph as Graphviz DOT text")
    parser.add_argument("--png", default=None, metavar="OUT", help="write a PNG preview (matplotlib)")
    parser.add_argument("--profile", action="store_true", help="colour nodes by their share of the time")
    parser.add_argument("--collapse", action="store_true", help="draw repeated decoder layers once, with a count")
    parser.add_argument("--device", default=None, help="h200, b200 or cpu for --profile (default: this GPU, else "
                        "an H200 plan)")
    parser.add_argument("--run", type=int, default=None, help="a journal's run (default: its last)")


def wants_picture(args) -> bool:
    return any(getattr(args, k, None) for k in ("html", "svg", "dot", "png"))


def _from_journal(path: Path, run: int | None):
    """A journal's best graph of `run`, the ids of its kernel nodes (outlined) and the attempts' sources."""
    from ..agent.journal import Journal
    from ..ir.text import loads

    with Journal(path) as journal:
        if run is None:
            run = journal.db.execute("select max(id) from runs").fetchone()[0]
        best = journal.best_graph(run) if run is not None else None
        if best is None:
            raise UsageError(f"{path}: run {run} kept no graph; draw the document itself (hoid show FILE.hoid)")
        sources = {a["kernel"]: a["source"] for a in journal.attempts(run)
                   if a["kept"] and a["source"] and not a["source"].startswith("library:")}
    graph = loads(best[0])
    return graph, {n.name for n in graph.nodes if n.op == "kernel"}, sources


def show_picture(args, load_graph) -> int:
    from ..agent.loop import resolve_device
    from . import GraphvizMissing, build_view, render_html, render_png, render_svg, to_dot

    path = Path(args.file)
    replaced, sources = None, None
    if path.is_file() and path.read_bytes()[:16] == SQLITE:
        graph, replaced, sources = _from_journal(path, args.run)
    else:
        graph = load_graph(args.file)
    profile, device = None, resolve_device(args.device)
    if args.profile or replaced is not None:
        from ..measure.local import local_device
        from ..measure.profile import profile_graph

        mode = "measured" if device.name == local_device().name and device.arch != "cpu" else "analytic"
        profile = profile_graph(graph, mode=mode, device=device)
    view = build_view(graph, profile, collapse=args.collapse, replaced=replaced, sources=sources, device=device)
    wrote = []
    if args.html:
        Path(args.html).write_text(render_html(view, f"{graph.name} ({path.name})"))
        wrote.append(args.html)
    if args.png:
        render_png(view, args.png)
        wrote.append(args.png)
    dot_text = to_dot(view)
    if args.dot:
        Path(args.dot).write_text(dot_text)
        wrote.append(args.dot)
    if args.svg:
        try:
            Path(args.svg).write_text(render_svg(dot_text))
            wrote.append(args.svg)
        except GraphvizMissing as e:
            dot_path = Path(args.svg).with_suffix(".dot")
            dot_path.write_text(dot_text)
            print(f"hoid: no SVG: {e}; wrote the DOT text to {dot_path} (dot -Tsvg {dot_path} -o {args.svg} draws "
                  "it once Graphviz is installed)", file=sys.stderr)
            wrote.append(str(dot_path))
    drawn = f"{len(view.op_nodes)} of {view.graph_nodes} nodes drawn" if view.collapsed else \
        f"{view.graph_nodes} nodes"
    timed = f", times {profile.mode if profile.mode != 'analytic' else 'modelled'} on {profile.device}" \
        if profile is not None else ""
    print(f"wrote {', '.join(wrote)}: graph {graph.name!r}, {drawn}{timed}")
    return 0


def trace(args) -> int:
    """`hoid trace FILE --out T.json`: the profile as a Perfetto/Chrome trace."""
    from ..agent.loop import resolve_device
    from ..measure.local import local_device
    from ..measure.profile import profile_graph
    from .trace import write_trace

    graph = read_graph(args.file)
    device = resolve_device(args.device)
    mode = "measured" if device.name == local_device().name and device.arch != "cpu" else "analytic"
    profile = profile_graph(graph, mode=mode, device=device)
    write_trace(graph, profile, args.out)
    print(f"wrote {args.out}: {len(graph.nodes)} events, {profile.total * 1e6:.2f} us "
          f"({'modelled' if mode == 'analytic' else mode}) on {device.name}; open it at https://ui.perfetto.dev")
    return 0
