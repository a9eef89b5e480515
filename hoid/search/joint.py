"""Matching a fused pattern none of whose outputs reaches every input: all its outputs at once.

The attention prelude (`triton.qk_norm_rope_cache`) has three outputs: q rotated (from q, its norm weight,
cos, sin), k appended to its cache and v appended to its cache. Matched from one output, a match binds
some inputs only. Matched output by output, by types alone, the q of one layer pairs with the caches of
every layer, as cos, sin and the positions are shared by all of them; but such a region is not convex:
the attention of layer i feeds layer j's k, so a kernel computing both would feed its own input. A joint
match therefore takes, for each output in turn, a class its structure matches, and keeps a combination
only where
- no input of the match depends on one of its outputs (the region is convex: no cycle through it), and
- distinct computed values of the pattern are distinct classes (so the k rotation is not taken for q's).
That leaves one match per layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..ir import Graph
from .snapshot import Snapshot


def reaches_all(graph: Graph, out) -> bool:
    """Whether every input of `graph` is an ancestor of its output `out`."""
    producers, seen, todo = graph.producers(), set(), [out]
    while todo:
        value = todo.pop()
        if value.name in seen:
            continue
        seen.add(value.name)
        if value.name in producers:
            todo.extend(producers[value.name].inputs)
    return all(v.name in seen for v in graph.inputs_of_kind("input"))


def joint_matches(snapshot: Snapshot, example: Graph, by_op: dict[str, list],
                  match: Callable) -> Iterator[tuple[dict[int, str], dict]]:
    """({output index: class}, bind) for every convex joint structural match of all `example`'s outputs."""
    producers = example.producers()
    inputs = {v.name for v in example.inputs_of_kind("input")}
    candidates = [list(dict.fromkeys(n.eclass for n in by_op.get(producers[out.name].op, ())))
                  for out in example.outputs]
    anchors = list(dict.fromkeys(c for cs in candidates for c in cs))
    depends = dependencies(snapshot, anchors)
    bit = {c: 1 << i for i, c in enumerate(anchors)}

    def extend(index: int, bind: dict, roots: dict[int, str]):
        if index == len(example.outputs):
            yield dict(roots), bind
            return
        chosen = sum(bit[c] for c in roots.values())
        bound = [trial_cls for name, trial_cls in bind.items() if name in inputs]
        for cls in candidates[index]:
            # before matching: an output computed from a chosen output, or feeding a bound input, is another
            # layer's (this is what keeps the search linear in layers)
            if cls in roots.values() or depends[cls] & chosen or any(depends.get(c, 0) & bit[cls] for c in bound):
                continue
            trial = dict(bind)
            if not match(snapshot, example, example.outputs[index], cls, trial, exact=False):
                continue
            computed = [c for k, c in trial.items() if isinstance(k, str) and k not in inputs]
            if len(set(computed)) < len(computed):
                continue
            outputs = sum(bit[c] for c in {**roots, index: cls}.values())
            if any(depends.get(trial[name], 0) & outputs for name in inputs if name in trial):
                continue
            yield from extend(index + 1, trial, {**roots, index: cls})

    yield from extend(0, {}, {})


def dependencies(snapshot: Snapshot, anchors: list[str]) -> dict[str, int]:
    """For each class, the anchors it can be computed from (bit i: `anchors[i]`), through any e-node: a
    fixpoint over the e-graph (which may hold cycles), swept children first so it converges in few sweeps."""
    bit = {c: 1 << i for i, c in enumerate(anchors)}
    kids = {c: {k for n in snapshot.enodes(c) for k in n.children if k != c} for c in snapshot.classes}
    order, state = [], {}
    for root in kids:  # iterative post-order: children before parents where there is no cycle
        if root in state:
            continue
        stack = [(root, iter(kids[root]))]
        state[root] = 1
        while stack:
            cls, it = stack[-1]
            kid = next((k for k in it if k in kids and k not in state), None)
            if kid is None:
                stack.pop()
                order.append(cls)
            else:
                state[kid] = 1
                stack.append((kid, iter(kids[kid])))
    depends = dict.fromkeys(kids, 0)
    changed = True
    while changed:
        changed = False
        for cls in order:
            mask = depends[cls]
            for kid in kids[cls]:
                mask |= depends.get(kid, 0) | bit.get(kid, 0)
            if mask != depends[cls]:
                depends[cls], changed = mask, True
    return depends
