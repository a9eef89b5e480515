"""The regions of a graph the loop can replace, ranked by their share of time (Amdahl).

A region is a kernel pattern (`hoid.kernels.Pattern`) matched in the graph's e-graph after the rule sets
have run, at one input-type signature and attrs: the recognised RMSNorm of every layer at the same
shapes is one region (verified and measured once, injected at every match). Matching is the search's
own (`hoid.search.library`), so the loop sees exactly the signatures the search would inject at.

Each region's time is its body profiled on the run's device (`hoid.measure.profile_graph`: measured on
the device at hand, the roofline otherwise), times the places it matches (the matcher counts them: one per
e-class, however many equivalent e-nodes it holds), and its share that time over the graph's profiled
total. Ranked by one match's time, a run with a one-minute budget on the H200 spent it on the lm head and
the per-layer GEMVs and never reached the RMSNorms (57 matches, 396 us of a 2.25 ms step). Measured, the
times go through the run's measurement cache: a warm run re-times nothing (on the H200 the Qwen3-1.7B step's
profile and its 41 region bodies took 35-38 s of a 1-minute budget, cold and warm alike).
"""

from __future__ import annotations

from ..ir.graph import attr_key
from ..measure.profile import profile_graph
from .proposer import RegionInfo


def discover(space, specs, device, *, measured: bool, cache=None) -> list[RegionInfo]:
    """Regions of `space` (a `hoid.search.SearchSpace`) for the patterns of `specs`, hottest first; `cache`:
    a `hoid.measure.MeasureCache` for the measured profiles (the analytic ones never read it)."""
    from ..search.library import _nodes_by_op, _signatures  # the search's matcher: one owner of matching

    snapshot = space.snapshot()
    by_op = _nodes_by_op(snapshot)
    mode = "measured" if measured else "analytic"
    cache = cache if measured else None
    total = profile_graph(space.graph, mode=mode, device=device, cache=cache).total or 1.0
    seen: dict[str, RegionInfo] = {}
    # one representative spec per pattern: a name and its operands. The name alone is not enough: `sdpa`
    # with a mask (the decode attentions) and without one (`triton.sdpa_wide`, torch's) are two patterns,
    # and keyed by name the masked one, registered first, hid every unmasked attention (the SDXL VAE's
    # 4.5 ms one-head attention was never proposed, 12-06)
    patterns = {}
    for spec in specs:
        patterns.setdefault((spec.pattern.name, tuple(spec.pattern.operands)), spec)
    for name, operands in sorted(patterns):
        spec = patterns[name, operands]
        if spec.examples is None and not _is_op(name):
            continue
        counts: dict = {}
        for types, attrs in _signatures(snapshot, spec, by_op, counts=counts):
            key = RegionInfo.key_of(name, types, attrs)
            if key in seen:
                continue
            body = spec.pattern.graph(list(types), attrs)
            seconds = profile_graph(body, mode=mode, device=device, cache=cache).total
            matches = max(1, counts.get((tuple(types), attr_key(attrs)), 1))
            seen[key] = RegionInfo(key, name, tuple(types), dict(attrs), body, seconds,
                                   min(1.0, seconds * matches / total), mode if mode == "measured" else "modelled",
                                   matches)
    # hottest first (every match's time); the key breaks ties so the order never depends on dict or e-graph order
    return sorted(seen.values(), key=lambda r: (-r.total_seconds, r.key))


def _is_op(name: str) -> bool:
    from ..ir.registry import has_op

    return has_op(name)
