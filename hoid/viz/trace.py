"""A profile as a Chrome/Perfetto trace (JSON): open it at ui.perfetto.dev or chrome://tracing.

One complete event ("ph": "X") per node, laid end to end in the graph's order (the order the compiled
step runs them), so the timeline reads as one step; each event's args carry the op, the kernel, the share,
the roofline floor and how it was timed. Times are microseconds, as the format wants.
"""

from __future__ import annotations

import json

from ..ir import Graph


def profile_trace(graph: Graph, profile) -> dict:
    """The trace of `profile` (a `hoid.measure.profile.Profile` of `graph`) as a dict ready for json.dump."""
    rows = {r.node: r for r in profile.rows}
    label = "modelled (analytic roofline)" if profile.mode == "analytic" else profile.mode
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": f"{graph.name} on {profile.device}"}},
              {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": f"nodes, {label}"}}]
    t = 0.0
    for node in graph.nodes:
        row = rows.get(node.name)
        if row is None:
            continue
        us = row.seconds * 1e6
        events.append({"ph": "X", "pid": 1, "tid": 1, "ts": t, "dur": us,
                       "name": row.kernel or row.op, "cat": "kernel" if row.kernel else "op",
                       "args": {"node": node.name, "op": row.op, "kernel": row.kernel, "share": row.share,
                                "floor_us": row.floor * 1e6 if row.floor else None, "method": row.method,
                                "flops": row.flops, "bytes": row.bytes, "evidence": label}})
        t += us
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"graph": graph.name, "device": profile.device, "mode": profile.mode,
                          "total_us": profile.total * 1e6, "step_us": profile.step * 1e6 if profile.step else None}}


def write_trace(graph: Graph, profile, path) -> None:
    """Write `profile_trace(graph, profile)` to `path` as JSON (open it at ui.perfetto.dev)."""
    with open(path, "w") as f:
        json.dump(profile_trace(graph, profile), f)
