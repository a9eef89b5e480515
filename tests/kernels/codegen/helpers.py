"""What the codegen tests share: checking a generated kernel with hoid.verify (in this process: the
source is ours, loaded once), and small graphs of the shapes the generator fuses."""

from __future__ import annotations

from hoid.ir import GraphBuilder
from hoid.kernels.loader import load_entry
from hoid.verify import check
from hoid.verify.check import region_inputs

from ..trusted import TIMING_RUNS


def verify(generated, trials: int = 4, seed: int = 0):
    """hoid.verify's verdict on a generated kernel against its region (the interpreter, in float64), with
    the timing runs of hoid's own kernels (`tests/kernels/trusted.py`)."""
    body = generated.body
    return check(load_entry(generated.source), body, region_inputs(body), trials=trials, destination_passing=True,
                 deterministic=True, seed=seed, isolate=False, timing_runs=TIMING_RUNS)


def assert_verified(generated, **kw) -> None:
    verdict = verify(generated, **kw)
    assert verdict.ok, f"{generated.spec.id}: {verdict.reason}\n{generated.source.text}"


def builder(name: str = "g") -> GraphBuilder:
    return GraphBuilder(name)
