"""Compiled graphs against the interpreter: bitwise without kernel nodes, within tolerance with them;
weights folded once; state owned, updated in place, recognised by pointer; unavailable kernels' bodies."""

import warnings

import pytest
import torch

import hoid
from hoid.ir import Node
from hoid.runtime import KernelFallbackWarning, compile
from hoid.verify.compare import compare_output
from hoid.verify.tolerance import tolerance_for

from .conftest import CACHE
from .frees import assert_frees_as_it_goes


def _inputs(graph, position=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, graph.runtime_inputs[0].type.shape and 200, (1, 1), generator=g)
    states = [torch.randn(v.type.shape, generator=g) for v in graph.inputs_of_kind("state")]
    return [ids, torch.tensor([position]), *states]


@pytest.mark.parametrize("which", ["tiny_step", "wide_step"])
def test_bitwise_equal_to_the_interpreter_without_kernels(which, request):
    graph = request.getfixturevalue(which)
    assert "kernel" not in graph.op_counts()
    compiled = compile(graph, device="cpu")
    args = _inputs(graph)
    ref = hoid.run(graph, *args)
    out = compiled(*args)
    assert len(out) == len(ref)
    for k, (a, b) in enumerate(zip(out, ref)):
        assert torch.equal(a, b), f"output {k} differs"


def test_within_tolerance_with_kernel_nodes(tiny_rewritten):
    assert "kernel" in tiny_rewritten.op_counts()
    compiled = compile(tiny_rewritten, device="cpu")
    assert not compiled.fallbacks and "k_" in compiled.source  # kernels launched, not their bodies
    args = _inputs(tiny_rewritten)
    ref = hoid.run(tiny_rewritten, *args)
    for k, (a, b) in enumerate(zip(compiled(*args), ref)):
        assert compare_output(k, a, b, tolerance_for(b.dtype)) is None


def test_state_is_owned_updated_in_place_and_recognised_by_pointer(tiny_rewritten):
    compiled = compile(tiny_rewritten, device="cpu")
    assert compiled.copies == []  # every cache append writes into the cache itself
    assert "state updated in place" in compiled.source or "written in place" in compiled.source
    pointers = [t.data_ptr() for t in compiled.state]
    args = _inputs(tiny_rewritten)
    logits, *cache = compiled(*args)
    assert compiled.stats.state_copies == len(cache)  # the caller's tensors were not ours: copied in once
    for step in range(3):
        logits, *cache = compiled(args[0], torch.tensor([6 + step]), *cache)
    assert compiled.stats.state_copies == len(cache)  # ours passed back: never copied again
    assert [t.data_ptr() for t in cache] == pointers == [t.data_ptr() for t in compiled.state]


def test_the_captured_call_is_recorded_over_inputs_of_its_own(tiny_step, monkeypatch):
    # capture itself needs CUDA (tests/runtime/test_gpu.py); here a stand-in records what it was given
    from hoid.runtime import compiled as compiled_module

    class Replay:
        def replay(self):
            pass

    recorded = []

    def capture(fn, args):
        recorded.append(args)
        return Replay(), fn(*args), None

    monkeypatch.setattr(compiled_module, "capture", capture)
    step = compile(tiny_step, device="cpu")
    step.use_cuda_graph, step.cuda_graph_reason = True, None  # as on a GPU
    first = _inputs(tiny_step)
    step(*first)
    (args,) = recorded
    ids, position, *state = args
    # the caller's ids and position are the caller's to overwrite or free: the graph records copies
    assert ids.data_ptr() != first[0].data_ptr() and position.data_ptr() != first[1].data_ptr()
    assert torch.equal(ids, first[0]) and torch.equal(position, first[1])
    assert [t.data_ptr() for t in state] == [t.data_ptr() for t in step.state]  # the state is its own already
    step(torch.tensor([[9]]), torch.tensor([6]), *step.state)
    assert first[0].item() != 9 and ids.item() == 9 and position.item() == 6  # later calls fill the copies
    assert [t.data_ptr() for t in step.input_buffers] == [t.data_ptr() for t in args]  # what to pass back
    copies = step.stats.input_copies
    step(*step.input_buffers)
    assert step.stats.input_copies == copies  # passed back: nothing copied in


def test_calls_reuse_their_buffers(tiny_rewritten):
    compiled = compile(tiny_rewritten, device="cpu")
    args = _inputs(tiny_rewritten)
    producers = tiny_rewritten.producers()
    planned = [i for i, v in enumerate(tiny_rewritten.outputs) if producers[v.name].op == "kernel"]
    assert planned  # the updated caches at least (written in place by the attention prelude kernel)
    first = [t.data_ptr() for t in compiled(*args)]
    again = [t.data_ptr() for t in compiled(*args)]
    assert [again[i] for i in planned] == [first[i] for i in planned]  # the same planned buffers
    # liveness lets buffers be shared: fewer slots than kernel outputs
    outputs = sum(len(n.outputs) for n in compiled.plan.steps if n.op == "kernel")
    assert 0 < len(compiled.plan.slots) < outputs


def test_weight_only_values_are_folded_once(tiny_rewritten):
    from hoid.ir.analysis import weight_only_values

    compiled = compile(tiny_rewritten, device="cpu")
    folded = weight_only_values(tiny_rewritten) - {v.name for v in tiny_rewritten.weight_inputs}
    assert folded, "the rewrite merges Q/K/V and gate/up weights"
    ran = {v.name for n in compiled.plan.steps for v in n.outputs}
    assert not folded & ran  # none of them is computed per call
    bound = {value for kind, value in compiled.program.tensors.values() if kind == "value"}
    # a weight merged into another is not kept beside the merge (memory does not double)
    merged_parts = {v.name for n in tiny_rewritten.nodes if n.outputs[0].name in folded for v in n.inputs}
    assert merged_parts - bound


def _with_version(graph, version):
    nodes, changed = [], None
    for node in graph.nodes:
        if node.op == "kernel" and changed is None:
            node = Node("kernel", node.inputs, {**node.attrs, "version": version}, node.outputs)
            changed = node
        nodes.append(node)
    return type(graph)(graph.name, graph.inputs, nodes, graph.outputs, graph.state_updates, graph.weights), changed


def test_a_kernel_of_another_version_runs_its_body_with_a_warning(tiny_rewritten):
    graph, changed = _with_version(tiny_rewritten, "0123456789ab")
    with pytest.warns(KernelFallbackWarning, match=changed.name.replace("%", "%")) as caught:
        compiled = compile(graph, device="cpu")
    assert changed.attrs["kernel"] in str(caught[0].message) and "version" in str(caught[0].message)
    assert list(compiled.fallbacks) == [changed.name]
    args = _inputs(graph)
    ref = hoid.run(tiny_rewritten, *args)
    for k, (a, b) in enumerate(zip(compiled(*args), ref)):
        assert compare_output(k, a, b, tolerance_for(b.dtype)) is None


def test_reading_the_old_state_after_its_update_forces_a_reported_copy():
    b = hoid.GraphBuilder("step")
    cache = b.state("cache", (4, 3), "f32")
    pos, x = b.input("pos", (1,), "i64"), b.input("x", (1, 3), "f32")
    new = b.index_copy(cache, pos, x, dim=0)
    old_sum = b.sum(cache, dim=(0,))  # scheduled after the update, reads the old cache
    graph = b.build(b.add(b.sum(new, dim=(0,)), old_sum), updates={cache: new})
    with pytest.warns(UserWarning, match="old value"):
        compiled = compile(graph, device="cpu")
    assert len(compiled.copies) == 1 and ".copy_(" in compiled.source
    args = [torch.randn(4, 3), torch.tensor([2]), torch.randn(1, 3)]
    ref = hoid.run(graph, *args)
    out = compiled(*args)
    assert all(torch.equal(a, r) for a, r in zip(out, ref))
    assert out[1].data_ptr() == compiled.state[0].data_ptr()


def test_source_is_readable_python_that_names_every_node(tiny_step):
    compiled = compile(tiny_step, device="cpu")
    assert compiled.source.startswith("def step(input_ids, position, cache_0_k")
    compile_ok = compile_source = compiled.source
    assert "op_matmul(" in compile_ok and "op_index_copy_(" in compile_source
    assert not compiled.use_cuda_graph and compiled.cuda_graph_reason == "the device is not a GPU"


@pytest.mark.parametrize("which", ["tiny_step", "tiny_rewritten"])
def test_every_intermediate_is_deleted_after_its_last_reader(which, request):
    compiled = compile(request.getfixturevalue(which), device="cpu")
    assert_frees_as_it_goes(compiled.source, "step")


def test_wrong_inputs_are_refused_with_names(tiny_step):
    compiled = compile(tiny_step, device="cpu")
    with pytest.raises(hoid.InputError, match="takes 6 inputs"):
        compiled(torch.zeros(1, 1, dtype=torch.long))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hoid.compile is compile


def test_compile_given_a_module_says_how_to_get_a_graph():
    import torch

    import hoid

    with pytest.raises(hoid.NotAGraphError, match="from_torch"):
        hoid.compile(torch.nn.Linear(2, 2))


def test_two_executables_of_the_same_weights_share_their_folded_values(tiny_rewritten):
    # a step and its prefill fold the same merges: held once (on the H200 the Qwen3-1.7B row bound 1.9 GB twice)
    import gc
    import weakref

    from hoid.ir.analysis import weight_only_values

    def with_weights(weights):
        g = tiny_rewritten
        return type(g)(g.name, g.inputs, g.nodes, g.outputs, g.state_updates, weights)

    # weights of its own: no executable of another test binds them
    graph = with_weights({n: t.clone() for n, t in tiny_rewritten.weights.items()})
    merges = weight_only_values(graph) - {v.name for v in graph.weight_inputs}
    first = compile(graph, device="cpu")
    second = compile(graph, device="cpu")
    bound = {v: first.namespace[k] for k, (kind, v) in first.program.tensors.items() if kind == "value" and v in merges}
    again = {v: second.namespace[k] for k, (kind, v) in second.program.tensors.items() if v in bound}
    assert bound, "the rewrite merges Q/K/V and gate/up weights"
    assert all(again[n] is bound[n] for n in bound)
    # (values of no weight, the positions' constants, are shared by any two binds: first's `shared`)
    merged_bytes = sum(t.numel() * t.element_size() for t in bound.values())
    assert first.memory.shared + merged_bytes <= second.memory.shared <= second.memory.weights

    # another tensor of equal values is other weights: its merge is folded again; the rest is still shared
    name = next(n for n in graph.weights if any(n in {v.name for v in node.inputs} for node in graph.nodes
                                                 if node.outputs[0].name in merges))
    third = compile(with_weights({**graph.weights, name: graph.weights[name].clone()}), device="cpu")
    assert 0 < third.memory.shared < second.memory.shared
    args = _inputs(graph)
    for a, b in zip(first(*args), third(*args)):
        assert torch.equal(a, b)

    # a weight written in place is a new version: a later bind folds it again, and computes with the new values
    with torch.no_grad():
        graph.weights[name].mul_(2)
    fourth = compile(graph, device="cpu")
    for a, b in zip(fourth(*args), hoid.run(graph, *args)):
        torch.testing.assert_close(a, b)
    assert fourth.memory.shared < second.memory.shared

    # the table keeps nothing alive: once the executables are gone, so are their folded values
    refs = [weakref.ref(t) for t in bound.values()]
    del first, second, third, fourth, bound, again
    gc.collect()
    assert all(r() is None for r in refs)


def test_a_prefill_holds_the_weights_its_step_already_bound(tiny_lm):
    # the use the table is for: a decoder's step and prefill, two graphs of the same weights
    from hoid.kernels import KernelSet
    from hoid.models import decode_step_graph, prefill_graph

    kernels = KernelSet.default()
    step = compile(hoid.search.rewrite(decode_step_graph(tiny_lm, CACHE), device="h200", kernels=kernels),
                   device="cpu")
    prefill = compile(hoid.search.rewrite(prefill_graph(tiny_lm, 8, CACHE), device="h200", kernels=kernels),
                      device="cpu", state=step.state)
    assert prefill.memory.shared >= 0.99 * prefill.memory.weights > 0


def test_the_folded_table_drops_dead_entries_as_it_grows():
    from hoid.runtime import folded

    source = torch.ones(2)
    kept = source * 2
    folded.remember(("test", "kept"), kept, (source,))
    for i in range(300):
        w = torch.ones(2)
        folded.remember(("test", i), w * 2, (w,))  # each value dies at once: nothing holds it
    assert sum(1 for key in folded._TABLE if key[0] == "test") < 300  # pruned on the way, not grown to 301
    assert folded.lookup(("test", 5)) is None
    assert folded.lookup(("test", "kept")) is kept  # a live entry survives the pruning


def test_a_bert_layers_attention_is_not_copied_where_eager_copies_nothing():
    """Attention over heads transposed out of [B, T, H, D] returns that memory order; the layer transposes
    it back and reshapes it to [B, T, H * D], a view then. The step made the attention's output contiguous
    and the reshape copied it back: two copies a layer that eager never makes (BGE-M3, Whisper's encoder)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from tests.ir.blocks import attention_block

    class Copies(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten.clone.default, torch.ops.aten.copy_.default, torch.ops.aten._to_copy.default):
                self.count += 1
            return func(*args, **(kwargs or {}))

    for own_contiguous in (False, True):  # BERT reshapes the transposed output; Whisper makes it contiguous first
        graph, _, _ = attention_block(own_contiguous=own_contiguous)
        compiled = compile(graph, device="cpu")
        x = torch.randn(2, 8, 32)
        compiled(x)  # binds
        with Copies() as copies:
            (got,) = compiled(x)
        assert copies.count == 0, compiled.source
        (want,) = hoid.run(graph, x)
        assert torch.equal(got, want)
