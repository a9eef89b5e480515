"""Shrinking a failing trial to a small one with hypothesis, so the counterexample is easy to read.

A failure is found by the checker's own sweep (which walks every value distribution deliberately);
this module then asks hypothesis for the smallest trial that still fails: every symbolic dim between its
lower bound and the failing size, every input's distribution either plain "normal" or the failing one,
the failing seed kept. Hypothesis generates from that space (its first example is the simplest one:
every dim at its lower bound, every input normal) and shrinks what fails. The search is seeded from
the check's seed, so a check replayed with the same seed prints the same counterexample.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .inputs import Dim, TrialSpec
from .verdict import Failure

# Trials one shrink may run: each costs two candidate calls and a reference.
SHRINK_TRIALS = 40


def shrink(
    failing: TrialSpec,
    dims: dict[str, Dim],
    fails: Callable[[TrialSpec], Failure | None],
    seed: int,
    budget: int = SHRINK_TRIALS,
) -> tuple[TrialSpec, Failure | None]:
    """The smallest spec found for which `fails(spec)` is a failure, with that failure (so the caller need
    not run it again); `(failing, None)` when no failing spec was found."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis import strategies as st
    from hypothesis.errors import NoSuchExample

    sizes = st.tuples(
        *(st.tuples(st.just(name), st.integers(dims[name].low, size)) for name, size in failing.sizes)
    )
    dists = st.tuples(
        *(st.sampled_from(("normal", d)) if d not in ("-", "normal") else st.just(d) for d in failing.dists)
    )
    space = st.builds(TrialSpec, sizes, dists, st.just(failing.seed))
    seen: dict[TrialSpec, Failure | None] = {}

    def still_fails(spec: TrialSpec) -> bool:
        # Past the budget, new specs count as passing, so hypothesis settles on the smallest failure found;
        # specs already run answer as before (hypothesis replays its result and refuses flaky answers).
        if spec not in seen:
            seen[spec] = fails(spec) if len(seen) < budget else None
        return seen[spec] is not None

    config = settings(
        max_examples=budget,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    try:
        smallest = find(space, still_fails, settings=config, random=random.Random(seed))
    except NoSuchExample:
        return failing, None
    return smallest, seen[smallest]
