"""Cost models: the roofline scaled by efficiency; measured costs with a visible fallback; what is free."""

import pytest

from hoid.ir import TensorType
from hoid.measure.devices import H200
from hoid.search.cost import AnalyticCost, MeasuredCost, OpCall
from hoid.search.space import SearchSpace

from .graphs import block

X = TensorType((4096, 4096), "bf16")
MATMUL = OpCall("matmul", (X, X), (X,), {})


def test_analytic_cost_is_the_roofline_divided_by_efficiency():
    ideal = AnalyticCost(H200)(MATMUL)
    assert ideal == pytest.approx(2 * 4096**3 / H200.peak_flops["bf16"] + H200.graph_launch_overhead, rel=0.05)
    half = AnalyticCost(H200, efficiency={"matmul": 0.5})(MATMUL)
    assert half - H200.graph_launch_overhead == pytest.approx(2 * (ideal - H200.graph_launch_overhead))


def test_analytic_cost_reads_efficiency_from_a_cache_like_object():
    from hoid.kernels import get

    asked, matmul = [], (H200.name, "torch.matmul", get("torch.matmul").version)

    class Cache:  # a plain matmul is measured as the library's torch.matmul, which runs the same call
        def efficiency(self, device, kernel, version):
            asked.append(kernel)
            return 0.25 if (device, kernel, version) == matmul else None

    launch = H200.graph_launch_overhead
    cost = AnalyticCost(H200, efficiency=Cache())
    quarter = cost(MATMUL)
    assert quarter - launch == pytest.approx(4 * (AnalyticCost(H200)(MATMUL) - launch))
    assert cost(MATMUL) == quarter and asked == ["torch.matmul"]  # asked once per kernel and version


def test_measured_cost_from_cache_finds_plain_ops_where_measure_kernel_puts_them(tmp_path):
    from hoid.kernels import get
    from hoid.measure.cache import MeasureCache, MeasureKey
    from hoid.measure.timing import Timing

    spec = get("torch.matmul")
    with MeasureCache(tmp_path / "cache.sqlite") as cache:
        key = MeasureKey.of(H200.name, spec.id, spec.version, spec.check_params({}), MATMUL.inputs, MATMUL.attrs)
        cache.put(key, Timing.of(3e-4, runs=3))
        measured = MeasuredCost.from_cache(cache, H200.name)
        assert measured(MATMUL) == pytest.approx(3e-4)


def test_measured_cost_from_cache_does_not_use_a_measurement_under_another_torch_and_says_so(tmp_path):
    from hoid.kernels import get
    from hoid.measure.cache import MeasureCache, MeasureKey
    from hoid.measure.timing import Timing

    spec = get("torch.matmul")
    with MeasureCache(tmp_path / "cache.sqlite") as cache:
        cache.put(MeasureKey.of(H200.name, spec.id, spec.version, spec.check_params({}), MATMUL.inputs,
                                MATMUL.attrs, torch="1.0.0"), Timing.of(3e-4, runs=3))
        with pytest.raises(KeyError, match=r"was measured under torch 1\.0\.0 \(now"):
            MeasuredCost.from_cache(cache, H200.name)(MATMUL)
        estimated = MeasuredCost.from_cache(cache, H200.name, fallback=AnalyticCost())
        assert estimated(MATMUL) == AnalyticCost()(MATMUL) and MATMUL.key() in estimated.unmeasured
        assert "torch 1.0.0" in estimated.stale[MATMUL.key()]


def test_measured_cost_records_what_it_estimated():
    measured = MeasuredCost.from_table({MATMUL.key(): 7e-3}, fallback=AnalyticCost())
    assert measured(MATMUL) == 7e-3 and not measured.unmeasured
    other = OpCall("exp", (X,), (X,), {})
    assert measured(other) == AnalyticCost()(other)
    assert measured.unmeasured == {other.key()}


def test_measured_cost_without_fallback_names_the_missing_call():
    with pytest.raises(KeyError, match="no measurement for exp"):
        MeasuredCost.from_table({})(OpCall("exp", (X,), (X,), {}))


def test_weight_only_nodes_and_projections_are_free():
    space = SearchSpace(block(layers=1))
    snapshot = space.snapshot()
    problem = space.problem(snapshot, lambda call: 1.0)
    for node_id, node in snapshot.nodes.items():
        if node.op == "transpose":  # of a weight: folded when weights are bound
            assert problem.costs[node_id] == 0.0
        if node.op == "matmul":
            assert problem.costs[node_id] == 1.0


def test_a_term_without_type_facts_is_reported_as_a_rule_bug():
    import hoid
    from hoid.errors import GraphError
    from hoid.search.rules import Rule, RuleSet

    b = hoid.GraphBuilder("g")
    x = b.input("x", (3,), "f32")
    space = SearchSpace(b.build(b.exp(x)))
    careless = Rule("careless", "(rule ((= e (Exp x))) ((union e (Exp (Neg (Neg x))))))", "sound, but sets no facts")
    space.saturate([RuleSet("careless", (careless,))])
    with pytest.raises(GraphError, match="no shape or dtype fact"):
        space.extract()


def test_a_weight_with_an_absent_optional_operand_is_folded():
    import hoid

    b = hoid.GraphBuilder("g")
    x = b.input("x", (4, 8), "f32")
    w = b.weight("w", (8, 8), "f32")
    space = SearchSpace(b.build(b.matmul(x, b.add(w, 1.0))))
    snapshot = space.snapshot()
    problem = space.problem(snapshot, lambda call: 1.0)
    (add,) = [n for n, node in snapshot.nodes.items() if node.op == "add"]
    assert problem.costs[add] == 0.0


def _kernel_call(spec_id, types, attrs=None):
    from hoid.ir.ops.kernel import KernelImpl
    from hoid.kernels import get

    spec = get(spec_id)
    attrs = {**{a.name: a.default for a in spec.pattern.attrs}, **(attrs or {})}
    body = spec.pattern.graph(list(types), attrs)
    impl = KernelImpl(spec.id, spec.version, spec.default_params(), body, attrs)
    return OpCall("kernel", tuple(types), tuple(v.type for v in body.outputs), impl.node_attrs())


def test_a_gather_kernel_is_priced_by_the_rows_it_reads_not_its_table():
    # issue 11 (e): triton.embedding was priced as reading the whole 622 MB table
    table, ids = TensorType((151936, 2048), "bf16"), TensorType((1, 1), "i64")
    kernel = AnalyticCost(H200)(_kernel_call("triton.embedding", (table, ids)))
    op = AnalyticCost(H200)(OpCall("embedding", (table, ids), (TensorType((1, 1, 2048), "bf16"),), {}))
    assert kernel == pytest.approx(op) and kernel < 2 * H200.graph_launch_overhead


def test_a_cache_append_kernel_is_priced_by_the_rows_it_writes_not_the_cache():
    q, kv = TensorType((1, 1, 16, 128), "bf16"), TensorType((1, 1, 8, 128), "bf16")
    w, table, cache = TensorType((128,), "bf16"), TensorType((1, 1, 128), "bf16"), TensorType((1, 8, 4096, 128), "bf16")
    types = (q, kv, kv, w, w, table, table, cache, cache, TensorType((1,), "i64"))
    call = _kernel_call("triton.qk_norm_rope_cache", types, {"eps": 1e-6})
    assert AnalyticCost(H200)(call) < H200.graph_launch_overhead + 2 * cache.nbytes / H200.copy_bandwidth / 100


def _transposed_then_reshaped(tokens: int, contiguous: bool):
    from hoid.ir import GraphBuilder

    b = GraphBuilder("heads")
    x = b.input("x", (1, 4, tokens, 8), "f32")  # [B, H, P, D], as an attention's result
    heads = b.transpose(x, dim0=1, dim1=2)
    return b.build(b.reshape(b.contiguous(heads) if contiguous else heads, shape=(1, tokens, 32)))


@pytest.mark.parametrize("tokens, copies", [(16, True), (1, False)])
@pytest.mark.parametrize("contiguous", [False, True])
def test_a_reshape_that_no_view_can_express_after_a_transpose_is_priced_as_its_copy(tokens, copies, contiguous):
    # the e-graph's types carry no layout: the reshape reads its operand with the layout the transpose gives
    # (`operand_type`), and where torch's reshape would copy (heads merged after a prompt's attention) the
    # copy is priced; one token's heads (decode) merge as a view, free. transformers' `.contiguous()` between
    # them is its input's class after the rules (`contiguous(x) = x`): the copy is the reshape's still
    from hoid.search.cost import node_costs
    from hoid.search.rules import default_rulesets

    space = SearchSpace(_transposed_then_reshaped(tokens, contiguous))
    space.saturate(default_rulesets())
    snapshot = space.snapshot()
    costs = node_costs(snapshot, space.encoding.kernels, AnalyticCost(H200), set())
    [reshape] = [n for n in snapshot.nodes if snapshot.nodes[n].op == "reshape"]
    [transpose] = [n for n in snapshot.nodes if snapshot.nodes[n].op == "transpose"]
    assert costs[transpose] == 0.0
    assert (costs[reshape] > 0) == copies
