"""Extraction: any cost model gives a graph that computes what the input graph computes; the ILP picks
merged projections that greedy does not; top-k finalists; cycles in the e-graph are cut."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import hoid
from hoid.search.cost import AnalyticCost
from hoid.search.extract import Method, Problem, extract, free_choice, greedy, ilp, top_k, walk
from hoid.search.rules import default_rulesets
from hoid.search.rules.algebra import ALGEBRA
from hoid.search.soundness import compare_graphs
from hoid.search.space import SearchSpace

from .graphs import block


@pytest.fixture(scope="module")
def saturated():
    space = SearchSpace(block(layers=2))
    space.saturate(default_rulesets())
    return space


OPS = sorted({"matmul", "rmsnorm", "silu", "mul", "add", "cast", "slice", "split", "concat", "transpose", "pow",
              "mean", "rsqrt", "sigmoid"})


@settings(max_examples=12)
@given(weights=st.dictionaries(st.sampled_from(OPS), st.floats(1e-7, 1e-3), min_size=3))
def test_any_cost_model_extracts_an_equivalent_graph(saturated, weights):
    cost = lambda call: weights.get(call.op, 1e-6) * (1 + len(call.inputs))
    graph = saturated.extract(cost).graph
    assert compare_graphs(saturated.graph, graph) is None


def test_default_extraction_recognizes_and_merges(saturated):
    graph = saturated.extract().graph
    counts = graph.op_counts()
    assert counts.get("rmsnorm") == 2 and counts.get("silu") == 2
    assert counts.get("matmul") == 4  # gate/up merged in each layer, down kept
    assert len(graph.nodes) < len(saturated.graph.nodes)
    assert compare_graphs(saturated.graph, graph) is None


def test_ilp_merges_projections_where_greedy_does_not(saturated):
    problem = saturated.problem(saturated.snapshot(), AnalyticCost()).reachable()
    (by_ilp, optimal), by_greedy = ilp(problem), walk(problem, greedy(problem))
    assert optimal
    cost = lambda choice: sum(problem.costs[n] for n in choice.values())
    assert cost(by_ilp) < cost(by_greedy)
    ops = lambda choice: [saturated.snapshot().nodes[n].op for n in choice.values()]
    assert ops(by_ilp).count("matmul") < ops(by_greedy).count("matmul")


def test_top_k_bans_the_hottest_choices(saturated):
    problem = saturated.problem(saturated.snapshot(), AnalyticCost())
    finalists = top_k(problem, 3)
    assert len(finalists) >= 2
    assert [f.cost for f in finalists] == sorted(f.cost for f in finalists)
    for f in finalists[1:]:
        assert f.banned and f.banned[0] not in f.choice.values()
    result = saturated.extract(k=3)
    assert len(result.finalists) == len(finalists) and result.graph is result.finalists[0].graph
    for finalist in result.finalists:  # every finalist is a different program computing the same
        assert compare_graphs(saturated.graph, finalist.graph) is None
    assert len({f.graph.structure_key() for f in result.finalists}) == len(result.finalists)


def test_top_k_solves_its_alternatives_side_by_side_and_agrees_with_one_at_a_time(saturated, monkeypatch):
    import threading
    import time

    import hoid.search.extract as extraction

    problem = saturated.problem(saturated.snapshot(), AnalyticCost())
    monkeypatch.setattr(extraction.os, "cpu_count", lambda: 1)
    alone = top_k(problem, 3)
    threads, solve = set(), extraction.extract

    def recording(p, **kw):
        threads.add(threading.current_thread().name)
        time.sleep(0.05)  # each solve holds its thread: the pool starts another for the next, not this one again
        return solve(p, **kw)

    monkeypatch.setattr(extraction.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(extraction, "extract", recording)
    together = top_k(problem, 3)
    assert [(f.choice, f.banned) for f in together] == [(f.choice, f.banned) for f in alone]
    assert len({t for t in threads if t.startswith("hoid-extract")}) > 1, threads


def test_a_chosen_cycle_is_cut():
    # a = leaf (10 s) or f(b); b = g(a); f and g are free: the cheapest "choice" is the cycle f, g, which
    # computes nothing (two e-nodes: forbidden up front; a longer cycle is cut and re-solved)
    problem = Problem(classes={"a": ["leaf", "f"], "b": ["g"]}, children={"leaf": (), "f": ("b",), "g": ("a",)},
                      eclass={"leaf": "a", "f": "a", "g": "b"}, costs={"leaf": 10.0, "f": 0.0, "g": 0.0},
                      roots=("a",))
    result = extract(problem)
    assert result.method == "ilp" and result.choice == {"a": "leaf"} and result.cost == 10.0
    three = Problem(classes={"a": ["leaf", "f"], "b": ["g"], "c": ["h"]},
                    children={"leaf": (), "f": ("b",), "g": ("c",), "h": ("a",)},
                    eclass={"leaf": "a", "f": "a", "g": "b", "h": "c"},
                    costs={"leaf": 10.0, "f": 0.0, "g": 0.0, "h": 0.0}, roots=("a",))
    assert extract(three).choice == {"a": "leaf"}


def test_an_invertible_pair_s_relaxation_pays_for_real_work(monkeypatch):
    """NCHW a = conv (10) or P(b) (1); NHWC b = conv_nhwc (6) or Q(a) (1): the best program is P(conv_nhwc),
    7. The relaxation of `x_P + x_Q <= 1` took P and Q at one half each, each class's need met by the other's
    half, and a half conv: 7 is reached only by branching (SDXL's UNet: no proof in 10 s). Asking that P's
    b be computed by another e-node than Q, and Q's a by another than P, makes the relaxation's bound the
    optimum itself."""
    import scipy.optimize

    problem = Problem(classes={"a": ["conv", "p"], "b": ["conv_nhwc", "q"]},
                      children={"conv": (), "p": ("b",), "conv_nhwc": (), "q": ("a",)},
                      eclass={"conv": "a", "p": "a", "conv_nhwc": "b", "q": "b"},
                      costs={"conv": 10.0, "p": 1.0, "conv_nhwc": 6.0, "q": 1.0}, roots=("a",))
    bounds, milp = [], scipy.optimize.milp

    def relaxed_too(cost, **kw):
        bounds.append(milp(cost, **{**kw, "integrality": 0 * kw["integrality"]}).fun)
        return milp(cost, **kw)

    monkeypatch.setattr(scipy.optimize, "milp", relaxed_too)
    choice, optimal = ilp(problem)
    assert choice == {"a": "p", "b": "conv_nhwc"} and optimal
    assert bounds[0] == pytest.approx(7.0 * 1e6, rel=1e-6)


def test_zero_cost_cycles_through_a_value_itself_extract_a_program():
    # transpose(transpose(x)) = x puts x's class in a cycle whose nodes cost nothing
    b = hoid.GraphBuilder("cycle")
    x = b.input("x", (2, 3), "f32")
    g = b.build(b.exp(b.transpose(b.transpose(x, dim0=0, dim1=1), dim0=0, dim1=1)))
    space = SearchSpace(g)
    space.saturate([ALGEBRA])
    out = space.extract(lambda call: 0.0 if call.op == "transpose" else 1.0).graph
    assert out.op_counts() == {"exp": 1}
    t = torch.randn(2, 3)
    torch.testing.assert_close(hoid.run(out, t)[0], torch.exp(t))


def test_unsolvable_problem_is_refused():
    problem = Problem(classes={"a": ["n"]}, children={"n": ("b",)}, eclass={"n": "a"}, costs={"n": 1.0},
                      roots=("a",))
    with pytest.raises(ValueError, match="no extractable term|no finite program"):
        extract(problem)


def test_time_limited_ilp_is_compared_with_greedy(saturated, monkeypatch):
    import hoid.search.extract as extraction

    snapshot = saturated.snapshot()
    problem = saturated.problem(snapshot, AnalyticCost())
    greedy_cost = sum(problem.costs[n] for n in walk(problem.reachable(), greedy(problem.reachable())).values())
    # an incumbent that recognizes nothing: what a solver stopped early might hold
    decomposed = lambda call: 1.0 if call.op in ("rmsnorm", "silu", "concat") else 1e-6
    poor = extraction.extract(saturated.problem(snapshot, decomposed)).choice
    monkeypatch.setattr(extraction, "ilp", lambda p, time_limit: (dict(poor), False))
    result = extraction.extract(problem)
    assert result.method is Method.GREEDY_CHEAPER
    assert result.cost == pytest.approx(greedy_cost)


def test_fused_and_decomposed_forms_imply_their_common_input(saturated):
    from hoid.search.extract import implied_classes

    snapshot = saturated.snapshot()
    problem = saturated.problem(snapshot, AnalyticCost()).reachable()
    implied = set(implied_classes(problem))
    norms = [n for n in snapshot.nodes.values() if n.op == "rmsnorm" and len(snapshot.operands(n)) == 2]
    assert norms
    for norm in norms:  # rmsnorm(x, w) or mul(w, cast(...(x))): either way x is computed
        assert (norm.eclass, norm.children[0]) in implied


def test_weight_only_classes_are_free_and_left_out_of_the_ilp():
    b = hoid.GraphBuilder("weights")
    w = b.weight("w", (4, 8), "f32")
    x = b.input("x", (2, 4), "f32")
    only_weights = b.build(b.transpose(w, dim0=0, dim1=1))  # nothing for the ILP to decide
    out = SearchSpace(only_weights).extract()
    assert out.best.method is Method.ILP and out.cost == 0.0
    assert out.graph.op_counts() == {"transpose": 1}
    b = hoid.GraphBuilder("mixed")
    w, x = b.weight("w", (4, 8), "f32"), b.input("x", (2, 4), "f32")
    mixed = b.build(b.transpose(w, dim0=0, dim1=1), b.matmul(x, w))
    space = SearchSpace(mixed)
    problem = space.problem(space.snapshot(), AnalyticCost()).reachable()
    assert problem.free and all(c in problem.free for c in free_choice(problem))
    out = space.extract()
    assert out.cost > 0 and compare_graphs(mixed, out.graph, exact=True) is None


def test_top_k_leaves_a_group_out_whole_with_the_projections_that_stand_for_it():
    # two classes, each computed by the kernel "k" (through a folded projection in "b") or by a dearer op;
    # banning one class's choice keeps "k" in the other, leaving the group out takes it out of both
    problem = Problem(classes={"a": ["k1", "op1"], "b": ["out2", "op2"], "t": ["k2"], "x": ["leaf"]},
                      children={"k1": ("x",), "op1": ("x",), "out2": ("a",), "op2": ("a",), "k2": ("a",),
                                "leaf": ()},
                      eclass={"k1": "a", "op1": "a", "out2": "b", "op2": "b", "k2": "t", "leaf": "x"},
                      costs={"k1": 1.0, "op1": 2.0, "out2": 1.0, "op2": 2.0, "k2": 1.0, "leaf": 0.0},
                      roots=("b",), folded={"out2": ("t", "k2")})
    [best, without] = top_k(problem, 0, groups={"k": {"k1", "k2"}, "unused": {"op1"}})
    assert {"k1", "out2", "k2"} <= set(best.choice.values()) and best.cost == 2.0
    assert without.banned == ("k",) and without.cost == 4.0
    assert not {"k1", "out2", "k2"} & set(without.choice.values())
    assert len(top_k(problem, 0, groups={"unused": {"op1"}})) == 1  # a group the best does not run: no finalist
