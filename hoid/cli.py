"""The `hoid` command.

    hoid example [NAME]       build a built-in example, print its document, run it, optimize it
    hoid optimize FILE        optimize a .hoid document (or example:NAME) with the agent loop; print the report
    hoid validate FILE.hoid   parse and validate a document; errors say line, column and what was expected
    hoid --version            hoid's version, and torch's

Every error a command meets is reported as one line (what, where, the fix) with a non-zero exit:
2 for the user's mistake (a missing, unreadable or malformed file), 1 for a bug in hoid; `--debug`
shows the traceback as well.

Later issues add the optimization loop's commands (profile, propose, check, measure, keep) so that any
coding agent can drive the loop through files.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from .cli_input import UsageError, read_document
from .errors import HoidError, ParseError


def _example(args: argparse.Namespace) -> int:
    from . import dumps, run
    from .models.examples import EXAMPLES

    graph = EXAMPLES[args.name]()
    print(f"# {args.name}: the document ({len(graph.nodes)} nodes)\n")
    print(dumps(graph))
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(v.type.shape, generator=gen).to(v.type.torch_dtype) for v in graph.runtime_inputs]
    start = time.perf_counter()
    outputs = run(graph, *inputs)
    elapsed = time.perf_counter() - start
    for value, out in zip(graph.outputs, outputs):
        print(f"# ran: %{value.name} = {tuple(out.shape)} {out.dtype}, mean {out.float().mean():.5f}, "
              f"std {out.float().std():.5f} ({elapsed * 1e3:.1f} ms in the reference interpreter)")
    if args.no_optimize:
        return 0
    from .search import rewrite

    start = time.perf_counter()
    try:
        optimized = rewrite(graph)
    except ImportError as e:  # the search needs egglog and scipy; say which is missing rather than hide it
        print(f"hoid: cannot optimize: {e}; install hoid with its dependencies (pip install -e .)", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - start
    print(f"\n# optimized by e-graph search in {elapsed:.2f} s: {len(graph.nodes)} -> {len(optimized.nodes)} nodes\n")
    print(dumps(optimized))
    new_outputs = run(optimized, *inputs)
    worst = max(float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))
                for a, b in zip(new_outputs, outputs))
    print(f"# optimized graph vs original: relative L2 error {worst:.2e}")
    return 0 if worst < 1e-5 else 1


def _optimize(args: argparse.Namespace) -> int:
    """The agent loop on a document or a built-in example, with a progress line per attempt."""
    from . import load, save
    from .agent import Budget, optimize
    from .models.examples import EXAMPLES

    if args.file.startswith("example:"):
        name = args.file.split(":", 1)[1]
        if name not in EXAMPLES:
            raise UsageError(f"{args.file}: no such example; built-in examples: {', '.join(sorted(EXAMPLES))}")
        graph = EXAMPLES[name]()
    else:
        graph = load(args.file)
    try:
        budget = Budget.parse(args.budget) if args.budget else None
    except ValueError as e:
        raise UsageError(f"--budget {args.budget}: {e}") from None
    agents = [a.strip() for a in args.agent.split(",") if a.strip()]
    from .cli_agent import executor_from_args

    opt = optimize(graph, agent=agents, budget=budget, device=args.device, journal=args.journal,
                   executor=executor_from_args(args), progress=_progress_printer())
    print(opt.report)
    if args.out:
        save(opt.graph, args.out)
        print(f"\nwrote {args.out}")
    return 0


def _progress_printer():
    """One line per event on stderr (rich's console when installed): attempts, verdicts, the best time."""
    try:
        from rich.console import Console
        from rich.markup import escape

        console = Console(stderr=True, highlight=False)
        say = console.print
    except ImportError:
        def say(text):
            print(text, file=sys.stderr, flush=True)

        def escape(text):
            return text
    from .cli_agent import WorkerStatus
    from .measure.timing import format_seconds

    count = [0]
    workers = WorkerStatus()  # a pool's workers and queue (--workers, --ray)

    def show(event: dict) -> None:
        kind = event["kind"]
        if (line := workers.update(event)) is not None:
            say(escape(line))
        if kind == "baseline":
            say(f"baseline {format_seconds(event['seconds'])} ({event['evidence']})")
        elif kind in ("attempt", "replayed"):
            count[0] += 1
            mark = "kept" if event["kept"] else event.get("verdict", "replayed")
            best = f"  best {format_seconds(event['best'])} ({event['evidence']})" if "best" in event else ""
            say(f"[{count[0]}] {event['kernel']} for {event['region'][:60]}: {mark}{best}{escape(workers.suffix())}")
        elif kind == "stale":
            say(f"checking again {event['kernel']}: {event['why']}")
        elif kind == "share":  # a proposer's turn ended at its share of the minutes (hoid/agent/loop.py)
            say(escape(f"{event['proposer']}: {event['why']}"))
        elif kind == "region skipped":  # a proposer left it without a proposal (a kernel whose region is absent)
            say(escape(f"skipped {event['region']}: {event['why']}"))
        elif kind == "llm":  # an LLM proposer's conversation (hoid/agent/openai_proposer.py): turns, tokens, verdicts
            where = f"turn {event['turn']}, {event['tokens']} tokens: " if event.get("turn") is not None else ""
            say(escape(f"  {event['proposer']}: {where}{event['what']}"))  # the model's words: no rich markup

    return show


def _validate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import load
    from .ir.text_parse import parse_document

    path = Path(args.file)
    document = parse_document(read_document(path))
    graph = document.graph.validate()
    weights = ""
    if document.weights_file is not None:
        if (path.parent / document.weights_file).is_file():
            graph = load(path)  # binds the weights and checks them against the graph's weight inputs
            weights = f"; weights checked against {document.weights_file}"
        else:
            weights = (f"; the structure only: its weights file {document.weights_file} is not beside it, so "
                       "the weights were not checked")
    counts = ", ".join(f"{op} x{n}" for op, n in sorted(graph.op_counts().items()))
    print(f"{args.file}: graph {graph.name!r} is valid: {len(graph.inputs)} inputs, {len(graph.nodes)} nodes "
          f"({counts}), {len(graph.outputs)} outputs{weights}")
    return 0


def _one_line(error: BaseException, args: argparse.Namespace) -> str:
    """The error as one line: where (the file and position), what, and the fix the message carries."""
    if isinstance(error, ParseError):
        first, *rest = str(error).split("\n")
        what = first.split(": ", 1)[1] if ": " in first else first
        where = f"{getattr(args, 'file', '')}, line {error.line}, column {error.column}".lstrip(", ")
        expected = f"; expected {error.expected}" if error.expected else ""
        return f"ParseError: {where}: {what}{expected}"
    text = " ".join(str(error).split())
    if isinstance(error, HoidError):
        return f"{type(error).__name__}: {text}"
    if isinstance(error, OSError):  # unreadable files and the like: the system's words name the path
        return f"{error.strerror or type(error).__name__}: {error.filename or text}"
    return text


def _add_profile(sub, common) -> None:
    """`hoid profile FILE`: the in-context profile of a compiled document (hoid.runtime.profile)."""
    def run(args: argparse.Namespace) -> int:
        from . import load
        from .runtime import compile
        from .runtime.profile import example_inputs, print_profile, profile

        compiled = compile(load(args.file))
        print_profile(profile(compiled, example_inputs(compiled)), limit=args.limit, launches=compiled.launches)
        return 0

    pr = sub.add_parser("profile", parents=[common],
                        help="compile a .hoid document and time each node in the compiled step")
    pr.add_argument("file")
    pr.add_argument("--limit", type=int, default=25, help="rows shown (slowest first)")
    pr.set_defaults(func=run)


def _add_trace(sub, common) -> None:
    """`hoid trace FILE --out T.json`: a document's profile as a Perfetto/Chrome trace (hoid.viz.trace)."""
    from .viz.cli import trace

    tr = sub.add_parser("trace", parents=[common], help="a document's per-node profile as a Perfetto trace (JSON)")
    tr.add_argument("file")
    tr.add_argument("--out", required=True, help="the trace file (open it at ui.perfetto.dev)")
    tr.add_argument("--device", default=None, help="h200, b200 or cpu (default: this GPU, else an H200 plan)")
    tr.set_defaults(func=trace)


def main(argv: list[str] | None = None) -> int:
    from . import __version__
    from .agent.agents import DEFAULT_AGENTS
    from .models.examples import EXAMPLES

    parser = argparse.ArgumentParser(prog="hoid", description="An e-graph optimizer for PyTorch models.")
    parser.add_argument("--version", action="version", version=f"hoid {__version__} (torch {torch.__version__})")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    # --debug after the command too; SUPPRESS keeps a subcommand from resetting one given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("example", parents=[common],
                        help="build a built-in example, print its document, run and optimize it")
    ex.add_argument("name", nargs="?", default="mlp_block", choices=sorted(EXAMPLES))
    ex.add_argument("--no-optimize", action="store_true", help="stop after running the reference interpreter")
    ex.set_defaults(func=_example)
    op = sub.add_parser("optimize", parents=[common], help="optimize a .hoid document (or example:NAME) with the "
                        "agent loop and print the report")
    op.add_argument("file", help="a .hoid document, or example:NAME for a built-in example")
    op.add_argument("--agent", default=",".join(DEFAULT_AGENTS),
                    help=f"proposer name(s), comma-separated (default: {','.join(DEFAULT_AGENTS)})")
    op.add_argument("--budget", default=None, help='e.g. 10m, "50 attempts", "10m,50 attempts" (default: none)')
    op.add_argument("--device", default=None, help="h200, b200 or cpu (default: this GPU, else an H200 plan)")
    op.add_argument("--journal", default=None, help="the journal file (default: HOID_JOURNAL or the user cache)")
    op.add_argument("--out", default=None, help="write the optimized graph as a .hoid document here")
    from .cli_agent import add_executor_options  # --workers, --ray (hoid/cli_agent.py)

    add_executor_options(op)
    op.set_defaults(func=_optimize)
    va = sub.add_parser("validate", parents=[common], help="parse and validate a .hoid document (and its weights "
                        "if the weights file is beside it)")
    va.add_argument("file")
    va.set_defaults(func=_validate)
    _add_profile(sub, common)
    _add_trace(sub, common)
    from .cli_agent import add_commands  # show, regions, propose, report: the file boundary (hoid/cli_agent.py)

    add_commands(sub, common)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (HoidError, UsageError, OSError) as e:  # a user's mistake: the message is the whole story
        if args.debug:
            raise
        print(f"hoid: {_one_line(e, args)}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug in hoid: still one line, and how to see and report it
        if args.debug:
            raise
        print(f"hoid: internal error: {type(e).__name__}: {_one_line(e, args)} (run again with --debug for the "
              "traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
