"""Hypothesis strategies that draw random valid graphs from the op registry.

Every op in `all_ops()` that has a sampler takes part, so an op registered tomorrow is covered
without touching this file. A graph is built node by node with `GraphBuilder` (so it is valid by
construction): each node is one of its op's own sampled calls (`OpDef.sample`), whose operands are
either values already in the graph (chains, fan-out, DAGs) or fresh inputs: activations, weights
(some bound to tensors, with module-path names) and state (updated by a graph output). Kernel nodes
wrap a random body (itself possibly holding kernel nodes); bodies are sometimes reused, and their
names come from a small pool so that different bodies share names. A few names need quoting.

    @given(graphs())
    def test_something(graph): ...

    @given(graph_cases())
    def test_runs(case):
        inputs, weights = case.inputs(seed=0)   # valid values: index operands stay in bounds
        hoid.run(case.graph, *inputs, weights=weights)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

import hoid
from hoid.errors import GraphError
from hoid.ir import Graph, GraphBuilder, TensorType, Value, all_ops, get_op
from hoid.ir.registry import infer_node

BODY_NAMES = ("body", "region", "fused")  # few names, so that different bodies collide
PARAMS = {"BLOCK": 64, "num_warps": 4, "scale": 0.125, "swizzle": True, "layout": "row", "split": None}


def sampled_ops() -> list[str]:
    """The ops a random graph draws from: every registered op with a sampler (sorted, for seeds)."""
    return sorted(name for name, op in all_ops().items() if op.sample is not None)


def random_tensor(t: TensorType, gen: torch.Generator, bound: int | None = None) -> torch.Tensor:
    """Contiguous random contents of type `t`: floats normal, bools fair, integers in [0, bound) for
    index operands, else in [1, 5] (integer division by zero raises in torch)."""
    if t.dtype == "bool":
        return torch.rand(t.shape, generator=gen) < 0.5
    if t.dtype in ("f64", "f32", "f16", "bf16"):
        return torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.torch_dtype)
    low, high = (0, bound) if bound is not None else (1, 6)
    return torch.randint(low, high, t.shape, generator=gen).to(t.torch_dtype)


@dataclass
class GraphCase:
    """A random graph and what it takes to feed it valid inputs."""

    graph: Graph
    index_bounds: dict[str, int] = field(default_factory=dict)  # input name -> exclusive bound

    def inputs(self, seed: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        """Seeded random runtime inputs, and tensors for the weights the graph does not bind."""
        gen = torch.Generator().manual_seed(seed)
        bounds = self.index_bounds
        inputs = [random_tensor(v.type, gen, bounds.get(v.name)) for v in self.graph.runtime_inputs]
        weights = {v.name: random_tensor(v.type, gen, bounds.get(v.name))
                   for v in self.graph.weight_inputs if v.name not in self.graph.weights}
        return inputs, weights

    def outcome(self, graph: Graph, seed: int = 0) -> tuple[torch.Tensor, ...] | str:
        """What running `graph` (this case's graph, or a copy of it) on seeded inputs gives: the
        outputs, or the error it raises. Some valid graphs fail at run time (integer division by a
        computed zero; a bug in an op's reference, which tests/ir/test_ops.py tracks): a copy must
        then fail the same way."""
        inputs, weights = self.inputs(seed)
        weights.update(self.graph.weights)  # a copy may have no weights bound: give it the same ones
        try:
            return hoid.run(graph, *inputs, weights=weights)
        except Exception as e:  # compared by the caller, not swallowed
            return f"{type(e).__name__}: {e}"


def assert_same_outcome(got, want) -> None:
    """Two `GraphCase.outcome`s are the same: the same error, or bit-exact outputs (NaN == NaN)."""
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


class RandomGraph:
    """Builds one random graph from a `random.Random`; `kinds` are the input kinds it may declare.

    `bodies` (shared with nested builders) lists the kernel bodies made so far, with the index bounds
    of their inputs, so that a later kernel node can reuse one.
    """

    def __init__(self, rng: random.Random, name: str, kinds: tuple[str, ...], depth: int,
                 bodies: list[GraphCase]):
        self.rng, self.kinds, self.depth, self.bodies = rng, kinds, depth, bodies
        self.b = GraphBuilder(name)
        self.values: list[Value] = []  # every value so far: the candidates for operands
        self.kind: dict[str, str] = {}  # input name -> input, weight or state
        self.used: set[str] = set()
        self.bounds: dict[str, int] = {}
        self.gen = torch.Generator().manual_seed(rng.getrandbits(32))
        self.count = 0

    def build(self, n_nodes: int) -> GraphCase:
        """Add `n_nodes` random nodes (after any added already), choose outputs and state updates."""
        for _ in range(n_nodes):
            if self.depth > 0 and self.rng.random() < 0.2:
                self.kernel_node()
            else:
                self.op_node()
        sinks = [v for v in self.values if v.name not in self.used and v.name not in self.kind]
        states = [v for v in self.values if self.kind.get(v.name) == "state"]
        updates = {state: self._update_of(state) for state in states}
        return GraphCase(self.b.build(*(sinks or self.values[-1:]), updates=updates), self.bounds)

    # --- operands ----------------------------------------------------------------------------------
    def _fresh(self, t: TensorType, bound: int | None = None) -> Value:
        """A new (contiguous) input of type `t`; an index operand is always a plain input."""
        kind = "input" if bound is not None else self.rng.choice(self.kinds)
        self.count += 1
        name = {"input": f"x{self.count}", "weight": f"model.layers.{self.count}.weight",
                "state": f"cache{self.count}"}[kind]
        if self.rng.random() < 0.1:
            name += f" in-{self.count}"  # spaces and dashes: the name prints JSON-quoted
        if kind == "weight":
            tensor = random_tensor(t, self.gen) if self.rng.random() < 0.7 else None  # some stay unbound
            value = self.b.weight(name, t.shape, t.dtype, tensor)
        else:
            value = getattr(self.b, kind)(name, t.shape, t.dtype)
        self.kind[name] = kind
        if bound is not None:
            self.bounds[name] = bound
        self.values.append(value)
        return value

    def _same_type(self, t: TensorType) -> Value | None:
        same = [v for v in self.values if v.type.same_data_type(t)]
        return self.rng.choice(same) if same and self.rng.random() < 0.8 else None

    def _reuse(self, types: list[TensorType], i: int, op: str, attrs: dict) -> Value | None:
        """An existing value for operand `i`: one of the same type, else one of the same dtype and rank
        that inference accepts there (so chains form even where sampled shapes differ). The rank is
        kept: a rank-0 value where an op samples rank >= 1 crashes some ops (split's inference and the
        indexing ops' index_bounds raise IndexError), which is their bug, not this strategy's concern."""
        same = self._same_type(types[i])
        if same is not None:
            return same
        loose = [v for v in self.values if v.type.dtype == types[i].dtype and v.type.rank == types[i].rank]
        for v in self.rng.sample(loose, min(2, len(loose))):
            try:
                infer_node(op, [*types[:i], v.type, *types[i + 1:]], attrs)
                return v
            except GraphError:
                continue
        return None

    def op_node(self, name: str | None = None) -> None:
        """A node of op `name` (a random one by default), one of the op's own sampled calls."""
        op = get_op(name or self.rng.choice(sampled_ops()))
        types, attrs = op.sample(self.rng)
        index = set(op.index_bounds(types, infer_node(op.name, types, attrs)[1]) if op.index_bounds else ())
        operands: list[Value | None] = []
        for i in range(len(types)):
            value = None if i in index else self._reuse(types, i, op.name, attrs) or self._fresh(types[i])
            if value is not None:
                types[i] = value.type
            operands.append(value)
        if index:  # the bounds depend on the final types of the other operands
            bounds = op.index_bounds(types, infer_node(op.name, types, attrs)[1])
            if any(bounds[i] == 0 and types[i].numel > 0 for i in index):
                return  # an index into an empty dim (a reused value sliced to nothing): no valid value to feed
            operands = [self._fresh(types[i], bounds[i]) if v is None else v for i, v in enumerate(operands)]
        self._add(op.name, operands, attrs)

    def kernel_node(self) -> None:
        """A kernel node around a new random body (nested `depth - 1` deep), or a reused one."""
        if self.bodies and self.rng.random() < 0.3:
            body = self.rng.choice(self.bodies)
        else:
            name, n_nodes = self.rng.choice(BODY_NAMES), self.rng.randint(1, 3)
            body = RandomGraph(self.rng, name, ("input",), self.depth - 1, self.bodies).build(n_nodes)
            if not body.graph.inputs:  # only constants (arange, full): a kernel needs an operand
                return self.op_node()
            self.bodies.append(body)
        operands = []
        for v in body.graph.runtime_inputs:
            bound = body.index_bounds.get(v.name)
            reused = self._same_type(v.type) if bound is None else None
            operands.append(reused or self._fresh(v.type, bound))
        params = {k: v for k, v in PARAMS.items() if self.rng.random() < 0.4}
        self._add("kernel", operands, {"body": body.graph, "kernel": f"test.{body.graph.name}",
                                       "version": self.rng.choice(("", "3fa2c1")), "params": params})

    def _add(self, op: str, operands: list[Value], attrs: dict) -> None:
        self.count += 1
        name = self.rng.choice([None] * 7 + [f"h.{self.count}", f"out {self.count}"])
        out = self.b.op(op, *operands, name=name, **attrs)
        self.used.update(v.name for v in operands)
        self.values.extend(out if isinstance(out, tuple) else (out,))

    def _update_of(self, state: Value) -> Value:
        """A node output of the state's type, else a `cast` of the state to its own dtype."""
        same = [v for v in self.values if v.name not in self.kind and v.type.same_data_type(state.type)]
        return self.rng.choice(same) if same else self.b.op("cast", state, dtype=state.type.dtype)


@st.composite
def graph_cases(draw, max_nodes: int = 6, max_depth: int = 2) -> GraphCase:
    """A random valid `GraphCase`: 1 to `max_nodes` nodes, kernel bodies nested up to `max_depth`."""
    rng = draw(st.randoms(use_true_random=False))
    n_nodes = draw(st.integers(1, max_nodes))
    name = draw(st.sampled_from(("main", "decode step", "body")))  # "body" collides with body names
    kinds = ("input", "input", "input", "weight", "state")
    return RandomGraph(rng, name, kinds, max_depth, []).build(n_nodes)


def graphs(max_nodes: int = 6, max_depth: int = 2) -> st.SearchStrategy[Graph]:
    """Random valid graphs (see `graph_cases` for their inputs)."""
    return graph_cases(max_nodes, max_depth).map(lambda case: case.graph)
