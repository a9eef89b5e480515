"""Algebra: identities, cast/transpose/reshape/slice chains, constant arithmetic on slice bounds.

No blanket commutativity or associativity: on a residual stream they multiply the e-graph by the number
of ways to bracket a sum (millions of rows in a few iterations, notes/egglog-at-scale.md). Patterns
that need an operand order spell the orders they accept instead.
"""

from __future__ import annotations

from ...ir import GraphBuilder
from . import Rule, RuleSet


def _unary_example(dtype, build):
    def example():
        b = GraphBuilder("example")
        x = b.input("x", (2, 3, 4), dtype)
        return b.build(build(b, x))
    return example


def _residual_example():
    b = GraphBuilder("example")
    residual, x = b.input("residual", (1, 1, 8), "f32"), b.input("x", (1, 2, 4), "f32")
    return b.build(b.add(residual, b.matmul(x, b.transpose(b.weight("w", (8, 4), "f32"), dim0=0, dim1=1))))


def _zero_range_example(scalar: bool, arange_first: bool):
    """A position plus `arange(0, 1)`, as transformers' decoders compute `cache_position` and the mask's
    row (position [1], or the scalar picked out of it), feeding an op so the sum is not an output."""
    def example():
        b = GraphBuilder("example")
        x = b.input("x", () if scalar else (1,), "i64")
        zero = b.arange(start=0, end=1, step=1, dtype="i64")
        total = b.add(zero, x) if arange_first else b.add(x, zero)
        return b.build(b.mul(total, 3))
    return example


def _outer_product_example():
    """RoPE's frequencies as transformers computes them, inv_freq [1, F, 1] @ positions [.., 1, T], batched."""
    b = GraphBuilder("example")
    freq, pos = b.input("freq", (1, 4, 1), "f32"), b.input("pos", (2, 1, 3), "f32")
    return b.build(b.exp(b.matmul(freq, pos)))


RULES = (
    # cast to the dtype a tensor already has is the tensor (torch returns it unchanged)
    Rule("cast-identity", "(rewrite (Cast x (Str d)) x :when ((= (dtype x) d)))",
         "cast(x, dtype(x)) = x",
         _unary_example("f32", lambda b, x: b.cast(b.exp(x), dtype="f32"))),
    # widening then narrowing rounds once: the wide dtype holds the narrow one's values exactly
    Rule("cast-through-wider",
         """(rewrite (Cast (Cast x (Str wide)) (Str out)) (Cast x (Str out))
                     :when ((= (dtype x) d) (lossless d wide)))""",
         "cast(cast(x, wider), out) = cast(x, out) when the first cast is exact",
         _unary_example("bf16", lambda b, x: b.cast(b.cast(x, dtype="f32"), dtype="f16"))),
    # swapping the same two dims twice is the identity (in either order of dim0/dim1)
    Rule("transpose-transpose",
         "(rewrite (Transpose (Transpose x (Int a) (Int b)) (Int a) (Int b)) x)",
         "transpose(transpose(x, a, b), a, b) = x",
         _unary_example("f32", lambda b, x: b.exp(b.transpose(b.transpose(x, dim0=0, dim1=2),
                                                                  dim0=0, dim1=2)))),
    Rule("transpose-transpose-swapped",
         "(rewrite (Transpose (Transpose x (Int a) (Int b)) (Int b) (Int a)) x)",
         "transpose(transpose(x, a, b), b, a) = x",
         _unary_example("f32", lambda b, x: b.exp(b.transpose(b.transpose(x, dim0=1, dim1=2),
                                                                  dim0=2, dim1=1)))),
    # the e-graph holds values, not layouts (the decoder copies where a kernel's spec needs contiguous):
    # so transformers' `.transpose(1, 2).contiguous()` after a prompt's attention, as an import on meta
    # weights keeps it, is the same class as the import on the GPU, where the SDPA's result is already laid
    # out so and the importer drops the no-op contiguous (and the fused patterns over it match both)
    Rule("contiguous-is-its-input", "(rewrite (Contiguous x) x)", "contiguous(x) = x (the same values)",
         _unary_example("f32", lambda b, x: b.exp(b.contiguous(b.transpose(x, dim0=0, dim1=1))))),
    # reshape reads elements in row-major order whatever the intermediate shape
    Rule("reshape-reshape", "(rewrite (Reshape (Reshape x s1) s2) (Reshape x s2))",
         "reshape(reshape(x, s1), s2) = reshape(x, s2)",
         _unary_example("f32", lambda b, x: b.exp(b.reshape(b.reshape(x, shape=(6, 4)), shape=(4, 6))))),
    Rule("reshape-identity", "(rewrite (Reshape x (Ints s)) x :when ((= (shape x) s)))",
         "reshape(x, shape(x)) = x",
         _unary_example("f32", lambda b, x: b.exp(b.reshape(b.exp(x), shape=(2, 3, 4))))),
    # constant arithmetic on slice bounds: a slice of a slice along the same dim is one slice, when
    # both are in bounds (start <= end, non-negative) and step 1, so Python's clamping never applies
    Rule("slice-slice",
         """(rule ((= e (Slice (Slice x (Int d) (Int a) (Int b) (Int 1)) (Int d) (Int c) (Int f) (Int 1)))
                   (>= a 0) (<= a b) (>= c 0) (<= c f) (<= f (- b a)))
                  ((union e (Slice x (Int d) (Int (+ a c)) (Int (+ a f)) (Int 1)))))""",
         "slice(slice(x, d, a, b), d, c, f) = slice(x, d, a + c, a + f) in bounds",
         _unary_example("f32", lambda b, x: b.exp(b.slice(b.slice(x, dim=-1, start=1, end=4), dim=-1, start=1,
                                                              end=3)))),
    # r + x @ w is x @ w + r: the library's linear + residual kernels are written matmul first, models add
    # the projection to the residual stream. Guarded on the structure (a tensor sum, the right operand a
    # matmul), not blanket commutativity; elementwise add is commutative with broadcasting and dtype
    # promotion alike, so it needs no type guard (the example broadcasts, so the sides differ in types)
    Rule("add-matmul-first", "(rewrite (Add r (Matmul x w) (NoAttr)) (Add (Matmul x w) r (NoAttr)))",
         "r + x @ w = x @ w + r",
         _residual_example),
    # -(-x) = x exactly, in every dtype
    Rule("neg-neg", "(rewrite (Neg (Neg x)) x)", "-(-x) = x",
         _unary_example("f32", lambda b, x: b.exp(b.neg(b.neg(x))))),
    # x * 1 and x + 0 leave a float tensor unchanged (an int tensor times 1.0 would become float)
    Rule("mul-one", "(rewrite (Mul x (Absent) (Float 1.0)) x :when ((= (dtype x) d) (is-float d)))",
         "x * 1.0 = x for float x",
         _unary_example("f32", lambda b, x: b.exp(b.mul(x, 1.0)))),
    # diffusers divides every residual sum and attention output by a scale factor that SDXL sets to 1.0:
    # 157 launches of an exact no-op in a UNet step (0.8 ms of 44 on the H100, 12-06)
    Rule("div-one", "(rewrite (Div x (Absent) (Float 1.0)) x :when ((= (dtype x) d) (is-float d)))",
         "x / 1.0 = x for float x",
         _unary_example("f32", lambda b, x: b.exp(b.div(x, 1.0)))),
    Rule("add-zero", "(rewrite (Add x (Absent) (Float 0.0)) x :when ((= (dtype x) d) (is-float d)))",
         "x + 0.0 = x for float x",
         _unary_example("f32", lambda b, x: b.exp(b.add(x, 0.0)))),
    # x + arange(0, 1) is x + [0]: the value x, broadcast to [1] where x is a scalar (a reshape, which launches
    # nothing); the same dtype on both sides, so no promotion. Llama's decode step computes its position twice
    # this way (two 1.2 us launches a token on the H200, 12-04's profile)
    Rule("add-zero-range",
         """(rule ((= e (Add x (Arange (Int 0) (Int 1) (Int 1) (Str d)) (NoAttr))) (= (dtype x) d) (= (shape e) s))
                  ((union e (Reshape x (Ints s)))))""",
         "x + arange(0, 1) = reshape(x, shape of the sum)",
         _zero_range_example(scalar=False, arange_first=False)),
    Rule("zero-range-add",
         """(rule ((= e (Add (Arange (Int 0) (Int 1) (Int 1) (Str d)) x (NoAttr))) (= (dtype x) d) (= (shape e) s))
                  ((union e (Reshape x (Ints s)))))""",
         "arange(0, 1) + x = reshape(x, shape of the sum)",
         _zero_range_example(scalar=True, arange_first=True)),
    # a matmul whose contracted dim has size 1 sums one product per element: an outer product, the broadcast
    # product of its operands, exactly (one rounding either way). Llama's and Qwen3's RoPE frequencies come so
    # (inv_freq [1, 32, 1] @ position [1, 1, 1]), and the H200 timed that cuBLAS call at 2.9 us a token
    Rule("matmul-k1-is-mul",
         """(rule ((= e (Matmul a b)) (= (shape a) sa) (= (shape b) sb) (= (dtype a) d) (= (dtype b) d)
                   (>= (vec-length sa) 2) (>= (vec-length sb) 2)
                   (= (vec-get sa (- (vec-length sa) 1)) 1) (= (vec-get sb (- (vec-length sb) 2)) 1))
                  ((union e (Mul a b (NoAttr)))))""",
         "a @ b = a * b (broadcast) when the contracted dim has size 1",
         _outer_product_example),
)

ALGEBRA = RuleSet("algebra", RULES, __doc__ or "")
