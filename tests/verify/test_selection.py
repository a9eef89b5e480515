"""A topk's indices judged up to ties (selection.py): free where scores tie, strict everywhere else."""

import torch

from hoid.ir import GraphBuilder
from hoid.verify import Input, check
from hoid.verify.selection import compare_selection, selections
from hoid.verify.tolerance import tolerance_for


def _topk_graph(shape=(6, 12), k=3, dtype="f32", reshaped=False):
    b = GraphBuilder("topk")
    x = b.input("x", shape, dtype)
    values, ids = b.op("topk", x, k=k, dim=-1, largest=True, sorted=True)
    return b.build(values, b.reshape(ids, shape=(18,)) if reshaped else ids)


def _router_graph(tokens=2, hidden=32, experts=16, k=4, dtype="bf16"):
    """Qwen3-MoE's router as the import gives it: logits in the dtype, a float32 softmax, topk, renormalized."""
    b = GraphBuilder("router")
    x, w = b.input("x", (tokens, hidden), dtype), b.input("w", (experts, hidden), dtype)
    probs = b.softmax(b.cast(b.matmul(x, b.transpose(w, dim0=0, dim1=1)), dtype="f32"), dim=-1)
    values, ids = b.op("topk", probs, k=k, dim=-1, largest=True, sorted=True)
    weights = b.cast(b.div(values, b.sum(values, dim=[-1], keepdim=True)), dtype=dtype)
    return b.build(weights, ids)


def _lowest_index_first(x, k):
    """topk whose ties go to the lowest index (a stable sort), unlike the CPU's topk."""
    order = torch.sort(x, dim=-1, descending=True, stable=True).indices[..., :k]
    return x.gather(-1, order), order


def test_the_indices_outputs_are_found_through_a_reshape():
    found = selections(_topk_graph(reshaped=True))
    assert list(found) == [1] and found[1].shape == (6, 3) and found[1].dim == 1
    assert selections(_router_graph()).keys() == {1}
    b = GraphBuilder("not_a_selection")  # an integer output of another op is compared exactly, as before
    x = b.input("x", (4, 5), "f32")
    assert selections(b.build(b.argmax(x, dim=-1))) == {}


def test_ties_broken_another_way_pass():
    """Scores with many exact ties (relu's zeros, and k past the positive ones): the CPU's topk and a
    lowest-index-first topk choose differently among them, and both are right."""
    x = torch.randn(6, 12).relu()
    assert not torch.equal(_lowest_index_first(x, 8)[1], torch.topk(x, 8).indices)  # they do differ on ties

    def candidate(x):
        values, ids = _lowest_index_first(x.relu(), 8)
        return values, ids.reshape(-1)

    def reference(x):
        values, ids = torch.topk(x.relu(), 8)
        return values, ids.reshape(-1)

    verdict = check(candidate, reference, [((6, 12), "f32")], seed=3)
    assert not verdict  # a plain callable reference has no scores to break ties with: exact, as before
    b = GraphBuilder("relu_topk")
    values, ids = b.op("topk", b.relu(b.input("x", (6, 12), "f32")), k=8, dim=-1, largest=True, sorted=True)
    verdict = check(candidate, b.build(values, b.reshape(ids, shape=(48,))), [((6, 12), "f32")], seed=3)
    assert verdict, verdict.reason


def test_a_router_in_float32_over_bfloat16_logits_passes():
    """The fused router's precision: logits kept in float32 (not rounded to bfloat16 as the import does), ties
    to the lowest index. Its ids differ from the reference's where two probabilities are within rounding."""
    graph = _router_graph()

    def candidate(x, w):
        probs = torch.softmax(x.float() @ w.float().T, dim=-1)
        values, ids = _lowest_index_first(probs, 4)
        return (values / values.sum(-1, keepdim=True)).to(x.dtype), ids

    for seed in range(3):
        verdict = check(candidate, graph, [((2, 32), "bf16"), ((16, 32), "bf16")], seed=seed)
        assert verdict, verdict.reason


def test_a_lower_score_beyond_rounding_fails():
    """Taking the 2nd to 4th largest instead of the 1st to 3rd: the values are wrong too, but the indices alone
    must fail, so the values here are the right ones."""
    graph = _topk_graph()

    def candidate(x):
        values, ids = torch.topk(x, 4)
        return values[..., :3], ids[..., 1:]

    verdict = check(candidate, graph, [((6, 12), "f32")], seed=0)
    assert not verdict and "not the reference's, even up to ties" in verdict.reason


def test_an_index_selected_twice_fails():
    def candidate(x):
        values, ids = torch.topk(x, 3)
        return values, torch.cat([ids[..., :1], ids[..., :2]], dim=-1)  # the best twice, the third never

    verdict = check(candidate, _topk_graph(), [((6, 12), "f32")], seed=0)
    assert not verdict and "the same index twice" in verdict.reason


def test_an_index_out_of_range_fails():
    def candidate(x):
        values, ids = torch.topk(x, 3)
        return values, torch.where(ids == ids.max(), 12, ids)

    verdict = check(candidate, _topk_graph(), [((6, 12), "f32")], seed=0)
    assert not verdict and "is no index of the 12 scores" in verdict.reason


def test_swapped_slots_of_unequal_scores_fail():
    """Sorted topk: the order of the slots is part of the result, so the right set in the wrong order fails."""
    def candidate(x):
        values, ids = torch.topk(x, 3)
        return values, ids.flip(-1)

    verdict = check(candidate, _topk_graph(), [((6, 12), "f32")], seed=0)
    assert not verdict and "not the reference's" in verdict.reason


def test_masked_scores_tie_at_minus_infinity():
    """Scores masked to -inf (fewer real candidates than k in a row) tie there: any of them is right."""
    b = GraphBuilder("masked_topk")
    x, mask = b.input("x", (4, 10), "f32"), b.input("mask", (4, 10), "f32")
    values, ids = b.op("topk", b.add(x, mask), k=6, dim=-1, largest=True, sorted=True)
    graph = b.build(values, ids)

    def candidate(x, mask):
        return _lowest_index_first(x + mask, 6)

    def masks(earlier, sizes):  # -inf past the first 4 columns: 6 of 10 leave 2 slots to -inf ties
        return torch.where(torch.arange(10) < 4, 0.0, float("-inf")).expand(4, 10).clone()

    verdict = check(candidate, graph, [((4, 10), "f32"), Input((4, 10), "f32", derive=masks)], seed=1)
    assert verdict, verdict.reason


def test_what_torch_selects_in_the_inputs_dtypes_passes_where_float64_sees_no_tie():
    """Logits of 1e6 in bfloat16: two round to one value, and torch's float32 softmax gives each 0.5 where
    float64's gives the larger 1 and every other expert 0 (so its topk's next slot is index 0). A kernel that
    selects as torch does passes; one that drops the expert both rank first does not."""
    sel = selections(_router_graph(tokens=1, experts=4, k=2))[1]
    exact = torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    torchs = torch.tensor([[0.0, 0.5, 0.0, 0.5]])
    reference, tol = torch.tensor([[3, 0]]), tolerance_for("f32")
    assert compare_selection(1, torch.tensor([[1, 3]]), reference, sel, exact, torchs, tol) is None
    assert compare_selection(1, torch.tensor([[1, 3]]), reference, sel, exact, None, tol).kind == "mismatch"
    assert compare_selection(1, torch.tensor([[0, 1]]), reference, sel, exact, torchs, tol).kind == "mismatch"
