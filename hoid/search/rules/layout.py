"""Layout: merge linear projections that share their input (Q/K/V; gate/up), and split the result; and a
split's pieces as views of its input.

`x @ w1^T` and `x @ w2^T` are `x @ concat(w1, w2)^T` sliced along the last dim: one launch reading the
same bytes instead of two. The merged weight is computed from weights alone, so it is folded once when
weights are bound (the cost models price it at zero).

A naive "two matmuls share an input" rule explodes (every subset, in every order, of every projection:
notes/egglog-at-scale.md). This one is canonical and contiguous: the right part is a single weight input
whose `weight-id` (2-d weights numbered in graph order) is the next one after the left part's, and the
merged weight takes the id of its last part; so Q/K/V yields {q,k}, {k,v} and {q,k,v} once each, never a
permutation, and n consecutive projections of one input make its n(n-1)/2 runs, not every subset. Why contiguous: an
SDXL UNet's cross-attention K/V projections all read the same text states (140 of them at full size);
with any subset allowed, even the tiny UNet's search ran to its time limit (114k e-nodes in 97 s) where
without the layout rules it saturates in 2 s. The subsets skipped ({q,v}; K of one block with V of
another) are never one launch.
"""

from __future__ import annotations

from ...ir import GraphBuilder
from . import Rule, RuleSet


def _projections(count: int, dtype: str = "f32"):
    def example():
        b = GraphBuilder("example")
        x = b.input("x", (1, 2, 8), dtype)
        ws = [b.weight(f"w{i}", (4 + 2 * i, 8), dtype) for i in range(count)]
        outs = [b.matmul(x, b.transpose(w, dim0=0, dim1=1)) for w in ws]
        return b.build(*outs)
    return example


def _geglu():
    """GEGLU as diffusers writes it: one projection cut in two halves, the second (through a GELU) gating the first."""
    b = GraphBuilder("example")
    x = b.input("x", (1, 2, 8), "f32")
    h = b.matmul(x, b.transpose(b.weight("proj", (12, 8), "f32"), dim0=0, dim1=1))
    hidden, gate = b.split(h, sizes=(6, 6), dim=-1)
    return b.build(b.mul(hidden, b.gelu(gate)))


def _qkv_chunk():
    """Three pieces of unequal sizes along the middle dim (a fused Q/K/V of grouped heads, cut by rows)."""
    b = GraphBuilder("example")
    x = b.input("x", (2, 9, 4), "f32")
    q, k, v = b.split(x, sizes=(4, 3, 2), dim=1)
    return b.build(b.relu(q), b.neg(k), b.exp(v))


def _gate_up():
    b = GraphBuilder("example")
    x = b.input("x", (1, 2, 8), "f32")
    gate, up = (b.matmul(x, b.transpose(b.weight(n, (6, 8), "f32"), dim0=0, dim1=1)) for n in ("gate", "up"))
    return b.build(b.mul(b.silu(gate), up))


RULES = (
    Rule("merge-projections",
         """(rule ((= m1 (Matmul x (Transpose w1 (Int 0) (Int 1))))
                   (= m2 (Matmul x (Transpose w2 (Int 0) (Int 1))))
                   (= w2 (Input name2)) (= j (weight-id w2)) (= i (weight-id w1)) (= j (+ i 1))
                   (= s1 (shape w1)) (= s2 (shape w2)) (= (vec-length s1) 2) (= (vec-length s2) 2)
                   (= k (vec-get s1 1)) (= k (vec-get s2 1)) (= d (dtype w1)) (= d (dtype w2))
                   (= sm (shape m1)) (= r (vec-length sm)) (>= r 2) (= dm (dtype m1))
                   (= n1 (vec-get s1 0)) (= n2 (vec-get s2 0)))
                  ((let w (Concat (TCons w1 (TCons w2 (TNil))) (Int 0)))
                   (set (shape w) (vec-of (+ n1 n2) k)) (set (dtype w) d) (set (weight-id w) j)
                   (let t (Transpose w (Int 0) (Int 1)))
                   (set (shape t) (vec-of k (+ n1 n2))) (set (dtype t) d)
                   (let m (Matmul x t))
                   (set (shape m) (vec-set sm (- r 1) (+ n1 n2))) (set (dtype m) dm)
                   (union m1 (Slice m (Int -1) (Int 0) (Int n1) (Int 1)))
                   (union m2 (Slice m (Int -1) (Int n1) (Int (+ n1 n2)) (Int 1)))))""",
         "x @ w1^T, x @ w2^T = slices of x @ concat(w1, w2)^T, for 2-d weights of one dtype and width, w2 the next",
         _projections(3)),
    # two slices that tile the last dim are the two outputs of one split (values equal; the library's
    # merged SwiGLU kernel is written against split)
    Rule("slices-to-split",
         """(rule ((= a (Slice m (Int -1) (Int 0) (Int n1) (Int 1)))
                   (= b (Slice m (Int -1) (Int n1) (Int n) (Int 1)))
                   (= s (shape m)) (= n (vec-get s (- (vec-length s) 1))) (< 0 n1) (< n1 n))
                  ((let p (Split m (Ints (vec-of n1 (- n n1))) (Int -1)))
                   (union a (Out p 0)) (union b (Out p 1))))""",
         "slice(m, 0, n1), slice(m, n1, n) along the last dim = split(m, [n1, n - n1])",
         _gate_up, needs=("merge-projections",)),
    # a split's pieces are slices of its input: torch returns views, but the IR's split makes each piece
    # a contiguous copy, so a chunk read only by elementwise ops (SDXL's 70 GEGLUs: 4.5 ms of a 44 ms
    # UNet step on the H100, 12-06) copies its input whole for nothing; with both in the e-class, the
    # cost models price the views at zero and the copy where a kernel needs contiguous pieces (two or three
    # pieces, one rule each: a rule matches the sizes' vector by its length; a longer split stays a copy)
    Rule("split2-as-slices",
         """(rule ((= p (Split m (Ints v) (Int d))) (= (vec-length v) 2)
                   (= n1 (vec-get v 0)) (= n2 (vec-get v 1)))
                  ((union (Out p 0) (Slice m (Int d) (Int 0) (Int n1) (Int 1)))
                   (union (Out p 1) (Slice m (Int d) (Int n1) (Int (+ n1 n2)) (Int 1)))))""",
         "the two pieces of split(m, [n1, n2], d) = slice(m, d, 0, n1), slice(m, d, n1, n1 + n2)",
         _geglu),
    Rule("split3-as-slices",
         """(rule ((= p (Split m (Ints v) (Int d))) (= (vec-length v) 3)
                   (= n1 (vec-get v 0)) (= n2 (vec-get v 1)) (= n3 (vec-get v 2)))
                  ((union (Out p 0) (Slice m (Int d) (Int 0) (Int n1) (Int 1)))
                   (union (Out p 1) (Slice m (Int d) (Int n1) (Int (+ n1 n2)) (Int 1)))
                   (union (Out p 2) (Slice m (Int d) (Int (+ n1 n2)) (Int (+ (+ n1 n2) n3)) (Int 1)))))""",
         "the three pieces of split(m, [n1, n2, n3], d) = slices of m at 0, n1 and n1 + n2 along d",
         _qkv_chunk),
)

LAYOUT = RuleSet("layout", RULES, __doc__ or "")
