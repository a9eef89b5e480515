"""The `hoid` commands of the file boundary through which an outside agent (or a person) drives hoid:

    hoid show FILE                         the document, summarised (inputs, ops, outputs; --full prints it)
    hoid regions FILE                      hot regions ranked by share of time; --show N prints one as a document,
                                           --cut t1,t2,... cuts any convex set of nodes as one (--out writes it)
    hoid propose FILE --region R --kernel k.py
                                           check the kernel against the region (R: a .hoid body document, or a
                                           rank or key of `hoid regions`), then measure it against the region's
                                           current time and its floor. Exit 0: passed; 3: rejected (the
                                           counterexample is printed); 2: a mistake in what was given
    hoid report JOURNAL                    a run's report as markdown, a PNG of the best latency over attempts, and
                                           an HTML page with the plots (regions before/after, roofline, attempts)

`hoid.cli.main` adds them (`add_commands`); errors follow its rule (one line, exit 2 or 1, `--debug`).
`hoid optimize`'s executor options (`--workers N`, `--ray ADDRESS`) and their progress lines live here too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .cli_input import UsageError, read_graph

REJECTED = 3  # propose's exit when the kernel fails its check: not an error of the user's nor of hoid's


def add_commands(sub, common) -> None:
    sh = sub.add_parser("show", parents=[common], help="a .hoid document, summarised")
    sh.add_argument("file")
    sh.add_argument("--full", action="store_true", help="print the whole document after the summary")
    from .viz.cli import add_picture_options  # --html, --svg, --png, --profile, --collapse (hoid/viz/cli.py)

    add_picture_options(sh)
    sh.set_defaults(func=show)
    rg = sub.add_parser("regions", parents=[common], help="hot regions of a document, ranked by share of time")
    rg.add_argument("file")
    rg.add_argument("--device", default=None, help="h200, b200 or cpu (default: this GPU, else an H200 plan)")
    rg.add_argument("--show", type=int, default=None, metavar="N", help="print region N as a .hoid document")
    rg.add_argument("--cut", default=None, metavar="VALUES", help="comma-separated values whose nodes make a region")
    rg.add_argument("--out", default=None, help="write the region (--show or --cut) as a .hoid document here")
    rg.set_defaults(func=regions)
    pr = sub.add_parser("propose", parents=[common], help="check and measure a kernel file for a region")
    pr.add_argument("file")
    pr.add_argument("--region", required=True, help="a .hoid region document, or a rank or key from hoid regions")
    pr.add_argument("--kernel", required=True, help="the kernel source (.py; entry `launch`, PARAMS declared)")
    pr.add_argument("--entry", default=None, help="the launch function's name (default: the one a .json beside "
                                                 "--region names, else launch)")
    pr.add_argument("--device", default=None, help="h200, b200 or cpu (default: this GPU, else an H200 plan)")
    pr.add_argument("--trials", type=int, default=None, help="numerical-check trials (default: hoid.verify's)")
    pr.add_argument("--no-sweep", action="store_true", help="measure the kernel's default params only, not the "
                    "sweep (meta.json's, else the defaults' neighbours): a check, and one build to time")
    pr.set_defaults(func=propose)
    rp = sub.add_parser("report", parents=[common], help="a journal's run as markdown and a PNG plot")
    rp.add_argument("journal")
    rp.add_argument("--run", type=int, default=None, help="the run id (default: the journal's last)")
    rp.add_argument("--out", default=None, help="the markdown file (default: JOURNAL's name with .md); the PNG "
                    "goes beside it")
    rp.set_defaults(func=report)


def _status(what: str):
    """rich's spinner on stderr for long work (saturating, checking, timing), or nothing without rich."""
    import contextlib

    try:
        from rich.console import Console
    except ImportError:
        return contextlib.nullcontext()
    return Console(stderr=True).status(what)


def show(args: argparse.Namespace) -> int:
    from . import dumps
    from .viz.cli import show_picture, wants_picture

    if wants_picture(args):
        return show_picture(args, read_graph)
    graph = read_graph(args.file)
    kinds = {}
    for gi in graph.inputs:
        kinds.setdefault(gi.kind, []).append(gi.value)
    print(f"{args.file}: graph {graph.name!r}: {len(graph.inputs)} inputs, {len(graph.nodes)} nodes, "
          f"{len(graph.outputs)} outputs")
    for kind, values in kinds.items():
        shown = ", ".join(f"%{v.name} {v.type}" for v in values[:6]) + (" ..." if len(values) > 6 else "")
        print(f"  {kind} ({len(values)}): {shown}")
    print("  ops: " + ", ".join(f"{op} x{n}" for op, n in sorted(graph.op_counts().items())))
    print("  outputs: " + ", ".join(f"%{v.name} {v.type}" for v in graph.outputs))
    if graph.state_updates:
        print("  state updates: " + ", ".join(f"%{s} <- %{v}" for s, v in graph.state_updates.items()))
    if args.full:
        print()
        print(dumps(graph))
    return 0


def _discover(graph, device, extra=()):
    from .agent.loop import resolve_device
    from .agent.regions import discover
    from .kernels.registry import library_kernels
    from .search.rules import default_rulesets
    from .search.space import SearchSpace

    device = resolve_device(device)
    with _status("saturating the rule sets and matching regions ..."):
        space = SearchSpace(graph, target=device.target())
        space.saturate(default_rulesets())
        found = discover(space, list(library_kernels().values()) + list(extra), device,
                         measured=device.name == _local_name())
    return device, found


def _local_name() -> str:
    from .measure.local import local_device

    return local_device().name


def regions(args: argparse.Namespace) -> int:
    from . import dumps, save
    from .ir import Region
    from .measure.roofline import region_floor
    from .measure.timing import format_seconds

    graph = read_graph(args.file)
    if args.cut:
        try:
            region = Region.of(graph, [v.strip() for v in args.cut.split(",") if v.strip()])
            region.check_convex()
        except Exception as e:  # a value that no node makes, a region that cannot be one kernel
            raise UsageError(f"--cut {args.cut}: {' '.join(str(e).split())}") from None
        body = region.body()
    else:
        device, found = _discover(graph, args.device)
        if args.show is None:
            print(f"{args.file}: {len(found)} regions on {device.name}, hottest first (share of the graph's time)")
            for i, r in enumerate(found, 1):
                floor = region_floor(r.body, device)
                print(f"{i:3d}. {r.share:6.1%}  {r.matches:3d} x {format_seconds(r.seconds):>10} ({r.evidence}, "
                      f"floor {format_seconds(floor)})  {r.key}")
            print("print one as a document with --show N (--out FILE to write it); cut your own with --cut t1,t2,...")
            return 0
        if not 1 <= args.show <= len(found):
            raise UsageError(f"--show {args.show}: there are regions 1 to {len(found)}; run hoid regions {args.file}")
        body = found[args.show - 1].body
    if args.out:
        save(body, args.out)
        print(f"wrote {args.out}: {len(body.inputs)} inputs, {len(body.nodes)} nodes, {len(body.outputs)} outputs")
    else:
        print(dumps(body), end="")
    return 0


def propose(args: argparse.Namespace) -> int:
    from .agent.dir_proposer import region_overrides, region_spec
    from .agent.executor import LocalExecutor
    from .kernels.loader import KernelSource
    from .measure.profile import profile_graph
    from .measure.roofline import region_floor
    from .measure.timing import format_seconds

    graph = read_graph(args.file)
    # a region's own launch (regions/LABEL.json beside regions/LABEL.hoid: another model's eps, or the entry
    # that takes its inputs) unless --entry names one
    entry, fixed = region_overrides(Path(args.region).with_suffix(".json")) if Path(args.region).is_file() \
        else (None, {})
    source = KernelSource.from_file(args.kernel, args.entry or entry or "launch")
    kernel_path = Path(args.kernel)  # a folder's kernel.py is named after its folder, as the directory proposer does
    kernel_id = f"dir.{kernel_path.resolve().parent.name if kernel_path.stem == 'kernel' else kernel_path.stem}"
    if Path(args.region).suffix == ".hoid" or Path(args.region).is_file():
        body = read_graph(args.region)
    else:  # a rank or a key of `hoid regions`
        _, found = _discover(graph, args.device)
        pick = [r for i, r in enumerate(found, 1) if args.region in (str(i), r.key)]
        if not pick:
            raise UsageError(f"--region {args.region}: not a file, nor a rank or key of hoid regions {args.file}")
        body = pick[0].body
    spec = region_spec(source, body, kernel_id, fixed=fixed)
    device, found = _discover(graph, args.device, [spec])
    region = next((r for r in found if r.pattern == spec.pattern.name), None)
    if region is None:
        raise UsageError(f"--region {args.region}: the region does not occur in {args.file} (cut it from this "
                          f"document: hoid regions {args.file} --cut ... --out region.hoid)")
    executor = LocalExecutor(device, trials=args.trials)
    params = spec.default_params()
    with _status(f"checking {kernel_id} against the region (isolated) ..."):
        verdict = executor.check(spec, region, params)
    if not verdict.ok:
        print(f"rejected: {kernel_id} for {region.key}\n{verdict.reason}")
        return REJECTED
    print(f"passed: {kernel_id} for {region.key}\n{verdict.reason}")
    from .agent.dir_proposer import DirKernel

    # each param set of a sweep is a build of its own: a one-launch half's sweep took most of the ~50 s a
    # propose of it took on the H200 (12-05), and the GPU tests check the kernel, not its tuning
    sweep = (params,) if args.no_sweep else DirKernel(kernel_id, source, body, {}).sweep(spec)
    with _status(f"measuring {kernel_id} over {len(sweep)} param sets ..."):
        chosen, kernel = executor.measure_kernel(spec, region, sweep)
    mode = "measured" if executor.on_device else "analytic"
    now = profile_graph(region.body, mode=mode, device=device).total
    floor = region_floor(region.body, device)
    gain = now / kernel.seconds if kernel.seconds > 0 else float("inf")
    print(f"kernel {format_seconds(kernel.seconds)} ({kernel.evidence}: {kernel.method}) with {chosen}")
    print(f"region now {format_seconds(now)} ({region.evidence}), floor {format_seconds(floor)} on {device.name}: "
          f"{gain:.2f}x the region's current time, {floor / kernel.seconds if kernel.seconds else 0:.0%} of the floor")
    print("the whole graph decides: hoid optimize FILE --agent dir:FOLDER (a folder holding kernel.py and region.hoid)")
    return 0


def report(args: argparse.Namespace) -> int:
    from .agent.journal import Journal
    from .agent.report import plot_best, report_from_journal

    path = Path(args.journal)
    if not path.is_file():
        raise UsageError(f"{path}: no such journal; give the journal file of a run (hoid optimize --journal)")
    with Journal(path) as journal:
        try:
            rep = report_from_journal(journal, args.run)
        except LookupError as e:
            raise UsageError(f"{path}: {e}") from None
    out = Path(args.out) if args.out else path.with_suffix(".md")
    png = out.with_suffix(".png")
    try:
        plot_best(rep, png)
    except ImportError:
        raise UsageError("the plot needs matplotlib: pip install 'hoid[report]' (or pip install matplotlib)") from None
    out.write_text(f"{rep}\n\n![best latency over attempts]({png.name})\n")
    from .viz.report_html import write_report_html  # the page with its plots, beside the markdown

    with Journal(path) as journal:
        write_report_html(rep, journal, out.with_suffix(".html"), str(png))
    print(f"wrote {out}, {out.with_suffix('.html')} and {png}: {rep.headline()}")
    return 0


# --- hoid optimize: where candidates are checked and measured ------------------------------------------

def add_executor_options(parser) -> None:
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="check and measure candidates on N worker processes: one per GPU of this machine "
                        "(each pinned to its GPU), or N CPU processes without a GPU (with --ray: N actors)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="check and measure on a Ray cluster's GPUs (ADDRESS as ray.init takes it: auto, "
                        "ray://head:10001); needs pip install 'hoid[ray]'")
    parser.add_argument("--worker-timeout", type=float, default=900.0, metavar="SECONDS",
                        help="a worker that does not answer a task in this time is killed and its task retried "
                        "once on another (default 900)")


def executor_from_args(args):
    """The pool `--workers` / `--ray` ask for, or None (this process)."""
    import importlib.util


    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: give at least 1")
    if args.workers is not None and args.ray is None:
        import torch

        if torch.cuda.is_available() and args.workers > torch.cuda.device_count():
            raise UsageError(f"--workers {args.workers}: this machine has {torch.cuda.device_count()} GPU(s), a "
                              "worker runs on one of its own; ask for fewer, or use --ray for a cluster")
    if args.ray is not None:
        if importlib.util.find_spec("ray") is None:
            raise UsageError("--ray needs Ray: pip install 'hoid[ray]' (or pip install ray)")
        from .agent.ray_executor import RayPool

        return RayPool(args.ray, workers=args.workers, timeout_s=args.worker_timeout)
    if args.workers is not None:
        from .agent.pool import WorkerPool

        return WorkerPool(args.workers, timeout_s=args.worker_timeout)
    return None


class WorkerStatus:
    """The workers and their queue, for `hoid optimize`'s progress: `update(event)` gives a line to print
    (a worker lost or left out) or None; `suffix()` the state to append to an attempt's line."""

    def __init__(self):
        self.state: dict | None = None

    def update(self, event: dict) -> str | None:
        kind = event["kind"]
        if kind == "workers":
            first = self.state is None
            self.state = event
            return f"workers: {event['alive']} on {event['device']}" if first else None
        if kind == "worker lost":
            then = "its task goes to another worker" if event["retry"] else "its task is not retried again"
            return f"lost {event['worker']}: {event['why']} ({event['task']}; {then})"
        if kind == "worker left out":
            return f"left out {event['worker']}: {event['why']}"
        return None

    def suffix(self) -> str:
        s = self.state
        if s is None:
            return ""
        lost = f", {s['lost']} lost" if s["lost"] else ""
        return f"  [workers {s['alive']}{lost}: {s['busy']} busy, {s['queued']} queued]"
