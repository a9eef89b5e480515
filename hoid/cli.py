"""The `hoid` command.

    hoid example [NAME]       build a built-in example, print its document, run it, optimize it
    hoid validate FILE.hoid   parse and validate a document; errors say line, column and what was expected

Later issues add the optimization loop's commands (profile, propose, check, measure, keep) so that any
coding agent can drive the loop through files.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from .errors import HoidError


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


def _validate(args: argparse.Namespace) -> int:
    from . import load

    graph = load(args.file)
    graph.validate()
    counts = ", ".join(f"{op} x{n}" for op, n in sorted(graph.op_counts().items()))
    print(f"{args.file}: graph {graph.name!r} is valid: {len(graph.inputs)} inputs, {len(graph.nodes)} nodes "
          f"({counts}), {len(graph.outputs)} outputs")
    return 0


def _add_profile(sub) -> None:
    """`hoid profile FILE`: the in-context profile of a compiled document (hoid.runtime.profile)."""
    def run(args: argparse.Namespace) -> int:
        from . import load
        from .runtime import compile
        from .runtime.profile import example_inputs, print_profile, profile

        compiled = compile(load(args.file))
        print_profile(profile(compiled, example_inputs(compiled)), limit=args.limit)
        return 0

    pr = sub.add_parser("profile", help="compile a .hoid document and time each node in the compiled step")
    pr.add_argument("file")
    pr.add_argument("--limit", type=int, default=25, help="rows shown (slowest first)")
    pr.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    from .models.examples import EXAMPLES

    parser = argparse.ArgumentParser(prog="hoid", description="An e-graph optimizer for PyTorch models.")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("example", help="build a built-in example, print its document, run and optimize it")
    ex.add_argument("name", nargs="?", default="mlp_block", choices=sorted(EXAMPLES))
    ex.add_argument("--no-optimize", action="store_true", help="stop after running the reference interpreter")
    ex.set_defaults(func=_example)
    va = sub.add_parser("validate", help="parse and validate a .hoid document")
    va.add_argument("file")
    va.set_defaults(func=_validate)
    _add_profile(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except HoidError as e:  # a user's mistake: the message is the whole story, no traceback
        print(f"hoid: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
