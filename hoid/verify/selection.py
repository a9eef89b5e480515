"""Index outputs of a selection (`topk`): judged by what they select, not compared position by position.

Which of two equal scores `topk` returns first is not defined: the CPU orders ties arbitrarily (measured on a
[8000, 128] tensor of ties, 12-06: 7286 rows differ from index order), a GPU kernel may take the lowest index,
and a kernel that computes the scores in another precision (a router's softmax in float32 over bfloat16
logits) ranks two nearly equal ones either way. Compared exactly, an honest kernel would fail at random.

So an output that holds a sorted `topk`'s indices (the node's second output, or that reshaped) is accepted,
where it differs from the reference's, when in every row its indices are in range and distinct, and each
selects a score within the scores' tolerance of the one the reference's index selects at that slot (or the
very same score in the inputs' own dtypes, where torch itself sees a tie, or the score torch's own topk selects
at that slot in those dtypes). Any index the candidate is free to pick under rounding passes; an index that
selects a lower score, out of order beyond rounding, or twice does not. The values the indices go with are
compared as usual, and the scores (topk's input) come from the reference graph itself, in float64 and in the
inputs' dtypes, only when an index differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..ir import Graph
from ..ir.dtypes import to_torch
from .compare import resolution
from .region import graph_reference
from .tolerance import Tolerance
from .verdict import Failure

# Ops between topk and an output that keep every element and its order: the indices are only reshaped.
_ORDER_KEEPING = ("reshape", "contiguous")


@dataclass(frozen=True)
class Selection:
    """Output `output` of a graph holds the indices of a `topk` over `dim` of scores of `dtype` (the topk's
    indices are `shape`); `scores(*inputs)` runs the graph up to the topk's input."""

    output: int
    shape: tuple[int, ...]
    dim: int
    largest: bool
    sorted: bool
    dtype: str
    scores: Callable[..., tuple[torch.Tensor, ...]]


def selections(graph: Graph) -> dict[int, Selection]:
    """{output position: its `Selection`} for the outputs of `graph` that are a topk's indices, directly or
    reshaped."""
    producers = graph.producers()
    found: dict[int, Selection] = {}
    for k, value in enumerate(graph.outputs):
        node = producers.get(value.name)
        while node is not None and node.op in _ORDER_KEEPING:
            value = node.inputs[0]
            node = producers.get(value.name)
        if node is None or node.op != "topk" or value.name != node.outputs[1].name:
            continue
        scores = node.inputs[0]
        rank = len(scores.type.shape)
        found[k] = Selection(
            output=k, shape=tuple(node.outputs[1].type.shape), dim=node.attrs["dim"] % max(rank, 1),
            largest=node.attrs["largest"], sorted=node.attrs["sorted"], dtype=scores.type.dtype,
            scores=graph_reference(dataclasses.replace(graph, outputs=[scores], state_updates={})))
    return found


def compare_selection(k: int, cand: torch.Tensor, ref: torch.Tensor, sel: Selection, scores: torch.Tensor,
                      native: torch.Tensor | None, tol: Tolerance) -> Failure | None:
    """None when the candidate's indices (output `k`) select what the reference's do, up to ties within
    `tol` of the scores (float64 `scores`, and `native` ones: the scores in the inputs' own dtypes)."""
    if not sel.shape:  # a topk of a 0-d tensor selects its one element: nothing to choose
        return None
    where = scores.device
    c = cand.detach().to(where, torch.int64).reshape(sel.shape).movedim(sel.dim, -1)
    r = ref.detach().to(where, torch.int64).reshape(sel.shape).movedim(sel.dim, -1)
    s = scores.detach().double().movedim(sel.dim, -1)
    n = s.shape[-1]
    outside = (c < 0) | (c >= n)
    if bool(outside.any()):
        first = int(torch.nonzero(outside.flatten())[0])
        return Failure("mismatch", f"output {k}: {c.flatten()[first].item()} is no index of the {n} scores it "
                                   "selects from", {"violations": int(outside.sum())})
    ordered = c.sort(dim=-1).values
    twice = ordered[..., 1:] == ordered[..., :-1]
    if bool(twice.any()):
        row = int(torch.nonzero(twice.any(dim=-1).flatten())[0])
        got, want = (t.reshape(-1, t.shape[-1])[row].tolist() for t in (c, r))
        return Failure("mismatch", f"output {k}: a row selects the same index twice: {got} (the reference: {want})",
                       {"violations": int(twice.sum())})
    got, want = s.gather(-1, c), s.gather(-1, r)
    if not sel.sorted:  # the slots' order is not part of the result: compare what each row selects, in order
        got, want = got.sort(dim=-1, descending=sel.largest).values, want.sort(dim=-1, descending=sel.largest).values
    dtype = to_torch(sel.dtype)
    scale = float(want.square().mean().sqrt()) if want.numel() else 0.0
    allowed = tol.atol * (scale if scale > 0 else 1.0) + tol.rtol * want.abs() + resolution(want, dtype)
    fine = ((got - want).abs() <= allowed) | (got == want)  # equal infinities too (masked scores: -inf)
    if native is not None:
        nat = native.detach().to(where, torch.float64).movedim(sel.dim, -1)
        if sel.sorted:  # a tie in the inputs' own dtypes is one torch itself may break either way
            fine |= nat.gather(-1, c) == nat.gather(-1, r)
        # what torch itself selects in those dtypes, slot by slot: logits of 1e6 rounded to bfloat16 tie where
        # float64's do not, so torch's softmax gives two experts 0.5 each where float64 gives one 1 and the next
        # slot an expert of 0 (a router's check on the H100, 12-07: a kernel selected as torch did, and failed)
        mine = nat.gather(-1, c)
        torchs = nat.topk(c.shape[-1], dim=-1, largest=sel.largest, sorted=True).values
        if not sel.sorted:
            mine = mine.sort(dim=-1, descending=sel.largest).values
        fine |= mine == torchs
    if bool(fine.all()):
        return None
    bad = (~fine).movedim(-1, sel.dim)  # reported where topk's indices have it (before any reshape)
    first = int(torch.nonzero(bad.flatten())[0])
    c, r, got, want = (t.movedim(-1, sel.dim).flatten()[first].item() for t in (c, r, got, want))
    return Failure(
        "mismatch",
        f"output {k}: {int(bad.sum())} of {bad.numel()} selected indices are not the reference's, even up to ties "
        f"(topk's order among equal scores is free); first at [{', '.join(map(str, _at(first, sel.shape)))}] of "
        f"the topk's indices, {c} selects the score {got:.8g} where the reference's index {r} selects {want:.8g} "
        f"(tolerance of the scores: {tol})",
        {"violations": int(bad.sum())})


def _at(flat: int, shape) -> list[int]:
    return [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))]
