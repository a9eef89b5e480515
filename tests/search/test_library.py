"""The library hook: kernels join the e-classes their patterns match, where their constraints hold."""

import pytest

from hoid.kernels import Constraint, KernelSpec, op_pattern
from hoid.search.library import LibraryReport, apply_library
from hoid.search.rules import default_rulesets
from hoid.search.space import SearchSpace

from .graphs import block


def _spec(kernel_id, pattern, constraints=()):
    return KernelSpec(kernel_id, pattern, "torch", launch=lambda *a, **k: None, constraints=constraints)


def test_op_kernel_joins_every_matching_op():
    space = SearchSpace(block(layers=2))
    space.saturate(default_rulesets())
    report = apply_library(space, [_spec("test.rmsnorm", op_pattern("rmsnorm", 2))])
    assert report.injected == {"test.rmsnorm": 2}
    out = space.extract(lambda call: 1e-9 if call.op == "kernel" else 1e-6).graph
    assert sum(n.op == "kernel" for n in out.nodes) >= 2


def test_kernel_whose_constraints_fail_is_skipped_with_the_reason():
    space = SearchSpace(block(layers=1))
    space.saturate(default_rulesets())
    never = Constraint("hidden size a multiple of 1024", lambda types, attrs: types[0].shape[-1] % 1024 == 0)
    report = apply_library(space, [_spec("test.big", op_pattern("rmsnorm", 2), (never,))])
    assert report.injected == {} and report.skipped == {"test.big": "hidden size a multiple of 1024"}


def test_fused_library_pattern_matches_after_the_rules():
    from hoid.kernels.library.patterns import SILU_MUL

    def examples(rng):
        from hoid.ir import TensorType

        t = TensorType((1, 2, 12), "f32")
        return [t, t], {}

    spec = KernelSpec("test.silu_mul", SILU_MUL, "torch", launch=lambda *a, **k: None, examples=examples)
    space = SearchSpace(block(layers=2))
    space.saturate(default_rulesets())  # silu is recognized from x * sigmoid(x) first
    assert apply_library(space, [spec]).injected == {"test.silu_mul": 2}


def _add_rmsnorm_space(eps):
    import hoid

    b = hoid.GraphBuilder("g")
    x, r = b.input("x", (1, 2, 8), "f32"), b.input("r", (1, 2, 8), "f32")
    summed = b.add(x, r)
    return SearchSpace(b.build(summed, b.rmsnorm(summed, b.weight("w", (8,), "f32"), eps=eps)))


def _add_rmsnorm_spec():
    from hoid.ir import TensorType
    from hoid.kernels.library.triton_add_rmsnorm import ADD_RMSNORM

    def examples(rng):
        t = TensorType((1, 2, 8), "f32")
        return [t, t, TensorType((8,), "f32")], {"eps": 1e-6}

    return KernelSpec("test.add_rmsnorm", ADD_RMSNORM, "torch", launch=lambda *a, **k: None, examples=examples)


def test_fused_pattern_takes_its_attrs_from_the_match():
    for eps in (1e-6, 1e-5):  # the pattern's default, and Llama's
        space = _add_rmsnorm_space(eps)
        report = apply_library(space, [_add_rmsnorm_spec()])
        assert report.injected == {"test.add_rmsnorm": 1}, eps
        out = space.extract(lambda call: 1e-9 if call.op == "kernel" else 1e-6).graph
        assert [n.attrs["attrs"] for n in out.nodes if n.op == "kernel"] == [{"eps": eps}]


def test_no_kernels_is_no_work():
    class Untouchable:
        def snapshot(self):
            raise AssertionError("snapshotted for no kernels")

    assert apply_library(Untouchable(), []) == LibraryReport()


def test_a_structural_match_that_fails_exactly_is_reported():
    from hoid.ir import TensorType
    from hoid.ir.registry import Attr
    from hoid.kernels import Pattern

    def build(b, ins, attrs):  # the attr lands transformed: it cannot be read off the match
        x, r, w = ins
        summed = b.add(x, r)
        return summed, b.rmsnorm(summed, w, eps=attrs.get("eps", 1e-6) / 2)

    def examples(rng):
        t = TensorType((1, 2, 8), "f32")
        return [t, t, TensorType((8,), "f32")], {"eps": 1e-6}

    pattern = Pattern("halved_add_rmsnorm", ("x", "residual", "weight"), build, attrs=(Attr("eps", "float", 1e-6),))
    spec = KernelSpec("test.halved", pattern, "torch", launch=lambda *a, **k: None, examples=examples)
    report = apply_library(_add_rmsnorm_space(1e-5), [spec])
    assert report.injected == {} and "structurally" in report.skipped["test.halved"]


def _rmsnorm_types(space):
    """The (x, weight) types at the graph's rmsnorm e-nodes."""
    from hoid.search.library import _signatures

    spec = _spec("probe", op_pattern("rmsnorm", 2))
    return [types for types, _ in _signatures(space.snapshot(), spec)]


def test_an_accepted_kernel_is_injected_only_at_the_signature_it_was_verified_at():
    from hoid.ir import TensorType
    from hoid.kernels import KernelSet

    space = SearchSpace(block(layers=2))
    space.saturate(default_rulesets())
    (x, w), = _rmsnorm_types(space)
    spec = _spec("test.accepted_rmsnorm", op_pattern("rmsnorm", 2))
    elsewhere = KernelSet.empty().accept(spec, [TensorType((7,) + x.shape[1:], x.dtype), w], {"eps": 1e-6})
    report = apply_library(space, elsewhere)
    assert report.injected == {} and "verified at other input types" in report.skipped["test.accepted_rmsnorm"]
    here = KernelSet.empty().accept(spec, [x, w], {"eps": 1e-6})
    assert apply_library(space, here).injected == {"test.accepted_rmsnorm": 2}


def test_a_kernel_set_without_a_kernel_never_yields_it_whatever_the_registry_holds():
    from hoid.kernels import KernelSet, register
    from hoid.kernels.registry import _KERNELS

    spec = _spec("test.registered_only", op_pattern("rmsnorm", 2))
    register(spec)
    try:
        space = SearchSpace(block(layers=1))
        space.saturate(default_rulesets())
        assert "test.registered_only" not in apply_library(space, KernelSet.default()).injected
        assert "test.registered_only" not in apply_library(space).injected  # the default set: the library alone
        assert "test.registered_only" not in KernelSet.default()
    finally:
        del _KERNELS["test.registered_only"]


def test_library_kernel_nodes_hold_concrete_params_resolved_for_the_target():
    from hoid.kernels import KernelSet, get

    spec = get("triton.rmsnorm")
    space = SearchSpace(block(layers=1))
    space.saturate(default_rulesets())
    assert apply_library(space, KernelSet([spec])).injected == {spec.id: 1}
    impls = [i for i in space.encoding.kernels.values() if i.kernel == spec.id]
    assert impls and all(v != "auto" for i in impls for v in i.params.values())


def test_a_kernel_the_target_arch_lacks_is_skipped_and_the_others_stay():
    from hoid.kernels import Target

    def only_hopper(kernel_id):
        return KernelSpec(kernel_id, op_pattern("rmsnorm", 2), "cute", launch=lambda *a, **k: None, archs=("sm_90",))

    for target, injected in ((Target.H200, {"test.hopper": 1, "test.any": 1}), (Target.B200, {"test.any": 1})):
        space = SearchSpace(block(layers=1), target=target)
        space.saturate(default_rulesets())
        report = apply_library(space, [only_hopper("test.hopper"), _spec("test.any", op_pattern("rmsnorm", 2))])
        assert report.injected == injected
    assert report.skipped == {"test.hopper": "builds for sm_90, not the target's sm_100"}


def test_a_fused_pattern_is_matched_over_every_equivalent_e_node_not_the_first_alone():
    # a prompt's attention: transformers' sdpa over the expanded heads, and the rules' equivalent over the
    # caches as stored (grouped); the merged-heads kernel is injected at both signatures, and the search
    # takes the grouped one (no expansion copied)
    from hoid.kernels import get
    from hoid.models.configs import build_model
    from hoid.models.llm import prefill_graph
    from hoid.search.library import _signatures

    space = SearchSpace(prefill_graph(build_model("qwen3-1.7b-tiny"), 32, 40))
    space.saturate(default_rulesets())
    spec = get("triton.prefill_attention_merged")
    signatures = _signatures(space.snapshot(), spec)
    grouped = {attrs["enable_gqa"]: types[1].shape[1] for types, attrs in signatures}
    assert set(grouped) == {False, True} and grouped[True] < grouped[False]


@pytest.mark.parametrize("copied", [False, True])
def test_the_merged_heads_attention_matches_with_or_without_transformers_contiguous(copied):
    # an import on the GPU drops `.contiguous()` after the SDPA (its result is laid out so already); one on
    # meta weights (benchmarks/decode_prices.py's) keeps it: `contiguous(x) = x` makes both one class
    from hoid.ir import GraphBuilder
    from hoid.kernels import get

    b = GraphBuilder("heads")
    q, mask = b.input("q", (1, 4, 8, 16), "f32"), b.input("mask", (1, 1, 8, 12), "bool")
    k, v = b.input("k", (1, 2, 12, 16), "f32"), b.input("v", (1, 2, 12, 16), "f32")
    heads = b.transpose(b.op("sdpa", q, k, v, mask, enable_gqa=True, scale=None, is_causal=False), dim0=1, dim1=2)
    graph = b.build(b.reshape(b.contiguous(heads) if copied else heads, shape=(1, 8, 64)))
    space = SearchSpace(graph)
    space.saturate(default_rulesets())
    report = apply_library(space, [get("triton.prefill_attention_merged")])
    assert report.injected == {"triton.prefill_attention_merged": 1}, report


def test_an_attr_the_types_constrain_is_still_found_in_the_pattern():
    """A group count must divide the channels: the first other value tried (2 * 8 + 1) does not build at 16
    channels, so the next ones are tried until one does; without the site, no group norm matched."""
    from hoid.ir import TensorType
    from hoid.kernels.library.triton_group_norm import GROUP_NORM_SILU
    from hoid.search.library import attr_sites

    types = [TensorType((2, 16, 4, 4), "f32"), TensorType((16,), "f32"), TensorType((16,), "f32")]
    sites = attr_sites(GROUP_NORM_SILU, types, {"num_groups": 8, "eps": 1e-6})
    assert sites == {"num_groups": [(0, "num_groups")], "eps": [(0, "eps")]}
