"""Extraction: choose one e-node per needed e-class so the whole program is cheapest, sharing counted once.

The main extractor is an integer program over the serialized e-graph, solved by scipy's HiGHS under a
time limit: one 0/1 variable per e-node; a root class needs a chosen node; at most one node per class;
the chosen nodes of a class that use a child class need a chosen node there; and a class whose every
alternative needs some class (within a few steps) needs it too, which keeps the relaxation tight
enough to solve a 28-layer model at the root node. It sees what a greedy extractor cannot: a merged
Q/K/V projection pays off only when all three consumers use it, while each consumer alone looks cheaper
unmerged. The ILP may pick a cycle (a view of a view of itself costs nothing); a chosen cycle is cut
with a constraint and the program re-solved. When the solver fails, or its time limit leaves a worse
answer than greedy's, a greedy DAG extractor answers instead, and the result says so.

Top-k: the best extraction, then one re-extraction per hottest chosen e-class with its chosen e-node
banned, so a whole-graph measurement can decide between close candidates; and, for each named group of
e-nodes the best uses (a kernel's every e-node: `SearchSpace.extract(without_kernels=...)`), the best
extraction without any of the group, so that the measurement also decides what prices alone cannot.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

EPSILON = 1e-9  # seconds added per e-node: among equal costs, prefer fewer nodes (and no redundant ones)
SCALE = 1e6  # the ILP works in microseconds: costs in seconds sit below HiGHS's tolerances


@dataclass(frozen=True)
class Problem:
    """What extraction needs: e-nodes of each class, children classes per e-node, costs, root classes."""

    classes: dict[str, list[str]]  # class -> e-node ids
    children: dict[str, tuple[str, ...]]  # e-node id -> child classes
    eclass: dict[str, str]  # e-node id -> its class
    costs: dict[str, float]
    roots: tuple[str, ...]
    folded: dict[str, tuple[str, str]] = field(default_factory=dict)  # e-node -> (class, e-node) it stands for
    # classes computed from weights alone: free whichever e-node computes them (folded when weights are
    # bound), so the ILP leaves them out and `free_choice` picks their e-nodes
    free: frozenset[str] = frozenset()

    def without(self, banned: set[str]) -> Problem:
        classes = {c: [n for n in ns if n not in banned] for c, ns in self.classes.items()}
        return Problem(classes, self.children, self.eclass, self.costs, self.roots, self.folded, self.free)

    def unfold(self, choice: dict[str, str]) -> dict[str, str]:
        """The choice with the e-nodes that folded ones stand for chosen in their own classes."""
        extra = dict(self.folded[n] for n in choice.values() if n in self.folded)
        return {**choice, **extra}

    def reachable(self) -> Problem:
        """Only the classes reachable from the roots, and no e-node that uses its own class."""
        seen, stack = set(), list(self.roots)
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            for n in self.classes.get(c, ()):
                stack.extend(k for k in self.children[n] if k not in seen)
        # in the snapshot's order, not the set's: the same e-graph always gives the same program
        classes = {c: self._undominated([n for n in nodes if c not in self.children[n]])
                   for c, nodes in self.classes.items() if c in seen}
        classes.update({c: [] for c in seen if c not in classes})  # classes without e-nodes
        return Problem(classes, self.children, self.eclass, self.costs, self.roots, self.folded, self.free & seen)

    def _undominated(self, nodes: list[str]) -> list[str]:
        """Without the e-nodes that another one of the class dominates: no dearer, and needing only some of
        the same children. Swapping in the dominating node never costs more and adds no dependency (so
        no cycle); this drops, for one, a kernel that ties with the op it implements, which would only
        give the ILP symmetric choices to branch on."""
        kept: list[tuple[str, frozenset]] = []
        for n in sorted(nodes, key=lambda n: self.costs[n]):  # stable: on a tie the first listed wins
            children = frozenset(self.children[n])
            if not any(other <= children for _, other in kept):
                kept.append((n, children))
        return [n for n, _ in kept]


class Method(StrEnum):
    """How an extraction was found."""

    ILP = "ilp"  # the ILP's proven optimum
    ILP_TIME_LIMIT = "ilp (best found before its time limit, not proven optimal)"
    GREEDY_CHEAPER = "greedy (cheaper than the ILP's best before its time limit)"
    GREEDY_ILP_FAILED = "greedy (the ilp failed)"

    @property
    def fell_back(self) -> bool:
        """Whether greedy answered because the ILP could not (still a correct graph, maybe not the cheapest)."""
        return self is Method.GREEDY_ILP_FAILED


@dataclass
class Extraction:
    """A choice of e-node per needed class, its total cost (seconds), how it was found, and, where the ILP
    failed, why (`note`)."""

    choice: dict[str, str]
    cost: float
    method: Method
    banned: tuple[str, ...] = ()
    note: str = ""


def total_cost(problem: Problem, choice: dict[str, str]) -> float:
    return sum(problem.costs[n] for n in choice.values())


def walk(problem: Problem, picked: dict[str, str]) -> dict[str, str] | list[str]:
    """The choice restricted to what the roots need, or the e-nodes of a cycle among the picked ones.
    Iterative depth-first search: a 28-layer model is thousands of classes deep."""
    choice: dict[str, str] = {}
    on_path: dict[str, int] = {}  # class -> position on the current path
    path: list[str] = []
    for root in problem.roots:
        if root in choice:
            continue
        stack = [(root, iter(problem.children[picked[root]]))]
        on_path[root], path[:] = 0, [root]
        while stack:
            cls, kids = stack[-1]
            child = next(kids, None)
            if child is None:
                stack.pop()
                path.pop()
                del on_path[cls]
                choice[cls] = picked[cls]
            elif child in on_path:
                return [picked[c] for c in path[on_path[child]:]]
            elif child not in choice:
                on_path[child] = len(path)
                path.append(child)
                stack.append((child, iter(problem.children[picked[child]])))
    return choice


# --- greedy DAG ----------------------------------------------------------------------------------

def greedy(problem: Problem) -> dict[str, str]:
    """Bottom-up: each class takes the e-node whose sub-DAG (shared nodes counted once) is cheapest."""
    best: dict[str, tuple[float, frozenset]] = {}
    parents: dict[str, list[str]] = {}
    for _c, nodes in problem.classes.items():
        for n in nodes:
            for k in problem.children[n]:
                parents.setdefault(k, []).append(n)
    pending = [n for nodes in problem.classes.values() for n in nodes if not problem.children[n]]
    picked: dict[str, str] = {}
    while pending:
        next_round: dict[str, None] = {}  # ordered: the same e-graph always gives the same choice
        for n in pending:
            kids = problem.children[n]
            if any(k not in best for k in kids):
                continue
            # the sum over the largest child's members is that child's cost: only the others' new members are
            # added up (summing every member of every e-node took 2.3 s on SDXL's UNet, 18k e-nodes)
            base_cost, base = max((best[k] for k in kids), key=lambda cm: len(cm[1]), default=(0.0, frozenset()))
            members = base.union(*(best[k][1] for k in kids), (n,))
            cost = base_cost + sum(problem.costs[m] + EPSILON for m in members - base)
            cls = problem.eclass[n]
            if cls not in best or cost < best[cls][0] - 1e-15:
                best[cls] = (cost, members)
                picked[cls] = n
                next_round.update((p, None) for p in parents.get(cls, ()))
        pending = list(next_round)
    missing = [r for r in problem.roots if r not in picked]
    if missing:
        raise ValueError(f"no extractable term for e-class(es) {missing[:3]}: no finite program")
    return picked


# --- ILP -------------------------------------------------------------------------------------------

MUST_DEPTH = 8  # measured at 28 layers: depth 8 lifts the LP bound from 25% to 80% of the optimum


def implied_classes(problem: Problem, depth: int = MUST_DEPTH) -> list[tuple[str, str]]:
    """(class, needed class) pairs: every e-node of the class needs the other within `depth` steps,
    whatever is chosen on the way, and not as a direct child of all of them (already a constraint).

    These close most of the LP relaxation's gap: where a fused op and its decomposed form meet again
    upstream (rmsnorm(x) vs the eight nodes that compute it from x), the relaxation could take half of
    each and pay for only half of x's producer; stated outright, x's producer must be paid in full."""
    memo: dict[tuple[str, int], frozenset] = {}
    empty = frozenset()
    children, classes = problem.children, problem.classes

    def must(cls: str, d: int) -> frozenset:
        if d == 0:
            return empty
        key = (cls, d)
        found = memo.get(key)
        if found is None:
            memo[key] = empty  # a cycle back here implies nothing
            nodes = classes.get(cls, ())
            if len(nodes) == 1:  # most classes: what the node needs, without a copy to intersect
                kids = children[nodes[0]]
                found = frozenset(kids).union(*[must(k, d - 1) for k in kids])
            else:
                per_node = [set(children[n]).union(*[must(k, d - 1) for k in children[n]]) for n in nodes]
                found = frozenset(set.intersection(*per_node)) if per_node else empty
            memo[key] = found
        return found

    pairs = []
    for cls, members in problem.classes.items():
        if len(members) > 1:
            direct = set.intersection(*(set(problem.children[n]) for n in members))
            pairs.extend((cls, needed) for needed in sorted(must(cls, depth) - direct - {cls}))
    return pairs


def free_choice(problem: Problem) -> dict[str, str]:
    """An e-node for each free class (`Problem.free`) that free classes alone complete, the fewest e-nodes
    under it (greedy: they all cost nothing); a free class missing here is left to the ILP."""
    if not problem.free:
        return {}
    free = {c: ns for c, ns in problem.classes.items() if c in problem.free}
    return greedy(Problem(free, problem.children, problem.eclass, problem.costs, ()))


def ilp(problem: Problem, *, time_limit: float = 10.0, max_cuts: int = 20) -> tuple[dict[str, str], bool]:
    """The cheapest choice by integer programming, and whether it is proven optimal (False when the time
    limit stopped the solver); raises RuntimeError when HiGHS finds no solution at all. The free classes
    are not in the program (at 28 layers a sixth of its e-nodes, and 0.5 s of HiGHS's 1.2 s): any program
    may use them, at no cost, with the e-nodes `free_choice` picks."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    free = free_choice(problem)
    nodes = [n for c, ns in problem.classes.items() if c not in free for n in ns]
    index = {n: i for i, n in enumerate(nodes)}
    rows, cols, vals, lower = [], [], [], []

    def add_row(entries: list[tuple[int, float]], lo: float) -> None:
        r = len(lower)
        for col, v in entries:
            rows.append(r)
            cols.append(col)
            vals.append(v)
        lower.append(lo)

    for root in problem.roots:  # some node of each root class is chosen
        if root not in free:
            add_row([(index[n], 1.0) for n in problem.classes[root]], 1.0)
    for cls, members in problem.classes.items():
        if cls in free:
            continue
        # at most one node per class, so that this holds: the class's nodes that use a child class
        # need, together, a node chosen there. Summed per class rather than written per node, the
        # relaxation stays tight when equal-cost alternatives share a child (per node, two halves
        # would each ask the child for only half a node).
        add_row([(index[n], -1.0) for n in members], -1.0)
        users: dict[str, list[str]] = {}
        for n in members:
            for child in set(problem.children[n]):
                if child not in free:
                    users.setdefault(child, []).append(n)
        for child, parents in users.items():
            add_row([(index[m], 1.0) for m in problem.classes[child]] + [(index[n], -1.0) for n in parents], 0.0)
    for cls, needed in implied_classes(problem):  # choosing cls implies choosing needed
        if cls in free or needed in free:
            continue
        add_row([(index[m], 1.0) for m in problem.classes[needed]] + [(index[n], -1.0) for n in problem.classes[cls]],
                0.0)
    # two e-nodes a in A and b in B that each use the other's class are a cycle: an invertible pair (NCHW =
    # P(NHWC), NHWC = Q(NCHW)) makes one per value of a channels-last chain. Cut one solve at a time, SDXL's
    # UNet ran past 20 cuts; forbidden as `x_a + x_b <= 1`, the relaxation still took both at one half (each
    # class's need met by the other's half) and proved nothing in HiGHS's 10 s. Written as "a needs B
    # computed by another of its e-nodes than b" (and the other way), a half of a asks a half of real work.
    for a, b in two_cycles(problem, free):
        for node, other, cls in ((a, b, problem.eclass[b]), (b, a, problem.eclass[a])):
            add_row([(index[m], 1.0) for m in problem.classes[cls] if m != other] + [(index[node], -1.0)], 0.0)
    if not nodes:  # every class the roots need is free: nothing to decide
        walked = walk(problem, dict(free))
        if isinstance(walked, dict):
            return walked, True
        raise RuntimeError("the free classes' e-nodes form a cycle")
    cost = np.array([(problem.costs[n] + EPSILON) * SCALE for n in nodes])
    start = time.perf_counter()
    for _ in range(max_cuts + 1):
        matrix = coo_matrix((vals, (rows, cols)), shape=(len(lower), len(nodes))).tocsr()
        constraint = LinearConstraint(matrix, np.array(lower), np.full(len(lower), np.inf))
        remaining = max(time_limit - (time.perf_counter() - start), 0.1)
        # mip_rel_gap: stop within 0.1% of the optimum; closer than that, the model is not that exact
        result = milp(cost, constraints=constraint, integrality=np.ones(len(nodes)), bounds=Bounds(0, 1),
                      options={"time_limit": remaining, "mip_rel_gap": 1e-3})
        if result.x is None:
            raise RuntimeError(f"HiGHS found no solution: {result.message}")
        chosen = [n for n, x in zip(nodes, result.x, strict=True) if x > 0.5]
        picked: dict[str, str] = dict(free)
        for n in sorted(chosen, key=lambda n: problem.costs[n]):
            picked.setdefault(problem.eclass[n], n)
        walked = walk(problem, picked)
        if isinstance(walked, dict):
            return walked, result.status == 0
        # forbid this cycle: not all of its nodes at once
        add_row([(index[n], -1.0) for n in walked], 1.0 - len(walked))
    raise RuntimeError(f"the ILP kept choosing cycles after {max_cuts} cuts")


def two_cycles(problem: Problem, free) -> list[tuple[str, str]]:
    """Pairs of e-nodes (outside the free classes) of two classes, each using the other's class."""
    uses: dict[tuple[str, str], list[str]] = {}  # (class, child class) -> its e-nodes that use the child
    for cls, members in problem.classes.items():
        if cls in free:
            continue
        for n in members:
            for child in set(problem.children[n]):
                if child != cls and child not in free:
                    uses.setdefault((cls, child), []).append(n)
    return [(a, b) for (cls, child), ns in uses.items() if cls < child
            for a in ns for b in uses.get((child, cls), ())]


def _greedy_choice(problem: Problem) -> dict[str, str]:
    walked = walk(problem, greedy(problem))
    if not isinstance(walked, dict):
        raise ValueError("greedy extraction chose a cycle; the e-graph holds no acyclic program")
    return walked


def extract(problem: Problem, *, time_limit: float = 10.0) -> Extraction:
    """ILP extraction, with greedy as the fallback; `method` says which answered and why."""
    problem = problem.reachable()
    try:
        choice, optimal = ilp(problem, time_limit=time_limit)
        method, note = Method.ILP, ""
        if not optimal:  # the time limit ended the search: keep the better of its best and greedy's
            other = _greedy_choice(problem)
            if total_cost(problem, other) < total_cost(problem, choice):
                choice, method = other, Method.GREEDY_CHEAPER
            else:
                method = Method.ILP_TIME_LIMIT
    except RuntimeError as e:
        choice, method, note = _greedy_choice(problem), Method.GREEDY_ILP_FAILED, str(e)
    return Extraction(problem.unfold(choice), total_cost(problem, choice), method, note=note)


def top_k(problem: Problem, k: int, *, groups: dict[str, set[str]] | None = None,
          time_limit: float = 10.0) -> list[Extraction]:
    """The best extraction, then for each of the k hottest chosen classes (with an alternative) the best
    extraction with that class's chosen e-node banned, and for each of `groups` (name -> e-node ids) the best
    uses, the best extraction with the whole group banned (`banned`: the group's name); sorted by cost,
    duplicates removed."""
    best = extract(problem, time_limit=time_limit)
    results = [best]
    hot = sorted(best.choice.items(), key=lambda item: -problem.costs[item[1]])
    alternatives = [((node,), {node}) for c, node in hot if len(problem.classes.get(c, ())) > 1][:k]
    chosen = set(best.choice.values())
    for name, nodes in (groups or {}).items():
        # with the projections that stand for one of them (`Problem.folded`): banned, a kernel is banned whole
        nodes = set(nodes) | {n for n, (_, inner) in problem.folded.items() if inner in nodes}
        if chosen & nodes:
            alternatives.append(((name,), nodes))
    # the alternatives are independent programs, solved side by side: HiGHS runs without the GIL, and the
    # SDXL UNet's library batch (12-06, H100 machine) spent 215 s solving its 16 one after another
    def solve(nodes):
        try:
            return extract(problem.without(nodes), time_limit=time_limit)
        except ValueError:
            return None  # nothing else can compute one of these classes

    solved = []
    if alternatives:
        with ThreadPoolExecutor(min(len(alternatives), os.cpu_count() or 1), thread_name_prefix="hoid-extract") as pool:
            solved = list(pool.map(solve, [nodes for _, nodes in alternatives]))
    for (banned, _), other in zip(alternatives, solved, strict=True):
        if other is None:
            continue
        other.banned = banned
        if all(other.choice != r.choice for r in results):
            results.append(other)
    results.sort(key=lambda e: e.cost if math.isfinite(e.cost) else math.inf)
    return results
