"""Patterns: recognize built-in ops in the decomposed forms that `torch.export` and transformers produce.

Each rule matches one decomposition and joins its result with the op of docs/ops.md that computes the
same (rmsnorm, softmax, silu, gelu exact and tanh, rope, sdpa, layer_norm), so the library and agents' kernels for
those ops apply. Operand orders are spelled out (no commutativity: see algebra), and every rule guards
on the dtypes and ranks its equivalence depends on. SiLU gating needs no rule of its own: once `silu`
is recognized, `mul(silu(gate), up)` is the library's `silu_mul` pattern, and its merged form (after
the layout rules) the `swiglu_merged` pattern, which the library phase (`hoid/search/library.py`) maps to kernels.
"""

from __future__ import annotations

from ...ir import GraphBuilder
from . import Rule, RuleSet

LAST = "(Ints (vec-of -1))"
FLOAT = "(= (dtype {x}) d) (is-float d)"


def _graph(inputs, build):
    """An example graph: `inputs` is [(name, shape, dtype, kind)], build(b, *values) -> output."""
    def example():
        b = GraphBuilder("example")
        values = [getattr(b, kind)(name, shape, dtype) for name, shape, dtype, kind in inputs]
        return b.build(build(b, *values))
    return example


def _rms_core(b, h, two=2):
    return b.mul(h, b.rsqrt(b.add(b.mean(b.pow(h, two), dim=[-1], keepdim=True), 1e-6)))


# --- RMSNorm (transformers: w * (x32 * rsqrt(mean(x32^2, -1) + eps)).to(x.dtype)) ------------------

def _rmsnorm_core(two: str) -> Rule:
    # the float32 core: h * rsqrt(mean(h^2, -1, keepdim) + eps) is rmsnorm without weight when h is f32
    return Rule(
        f"rmsnorm-core-{'int' if two.startswith('(Int') else 'float'}",
        f"""(rule ((= e (Mul h (Rsqrt (Add (Mean (Pow h (Absent) {two}) {LAST} (Bool true)) (Absent) (Float eps)))
                         (NoAttr)))
                   (= (dtype h) "f32"))
                  ((union e (Rmsnorm h (Absent) (Float eps)))))""",
        "the float32 core of RMSNorm, pow(h, 2) written with an int or a float exponent",
        _graph([("x", (2, 3, 8), "f32", "input")],
               lambda b, x: _rms_core(b, x, 2 if two.startswith("(Int") else 2.0)))


def _rmsnorm_core_low(dtype: str) -> Rule:
    # a user's RMSNorm written without the upcast: the same core computed in bf16 or f16 is rmsnorm of h,
    # which computes in float32 and rounds once: more accurate, which the precision policy allows
    # (docs/design.md, Precision: a higher-precision replacement of a lower-precision region)
    return Rule(
        f"rmsnorm-core-{dtype}",
        f"""(rule ((= e (Mul h (Rsqrt (Add (Mean (Pow h (Absent) (Int 2)) {LAST} (Bool true)) (Absent) (Float eps)))
                         (NoAttr)))
                   (= (dtype h) "{dtype}"))
                  ((union e (Rmsnorm h (Absent) (Float eps)))))""",
        f"the RMSNorm core computed in {dtype} (no upcast) is rmsnorm, computed in float32",
        _graph([("x", (2, 3, 64), dtype, "input")], lambda b, x: _rms_core(b, x)))


RMSNORM = (
    _rmsnorm_core("(Int 2)"),
    _rmsnorm_core("(Float 2.0)"),
    _rmsnorm_core_low("bf16"),
    _rmsnorm_core_low("f16"),
    # x cast to f32, normalized, cast back to x's dtype: rmsnorm of x itself (the op casts the same way)
    Rule("rmsnorm-casts",
         """(rule ((= e (Cast (Rmsnorm (Cast x (Str "f32")) (Absent) eps) (Str d))) (= (dtype x) d))
                  ((union e (Rmsnorm x (Absent) eps))))""",
         "cast(rmsnorm(cast(x, f32)), dtype(x)) = rmsnorm(x)",
         _graph([("x", (2, 8), "bf16", "input")],
                lambda b, x: b.cast(_rms_core(b, b.cast(x, dtype="f32")), dtype="bf16")),
         needs=("rmsnorm-core-int",)),
    # the weight: w * rmsnorm(x) with w over the last dim is rmsnorm(x, w), in either operand order
    Rule("rmsnorm-weight",
         """(rule ((= e (Mul w (Rmsnorm x (Absent) eps) (NoAttr))) (= s (shape x))
                   (= (shape w) (vec-of (vec-get s (- (vec-length s) 1)))) (= (dtype w) dw) (is-float dw))
                  ((union e (Rmsnorm x w eps))))""",
         "w * rmsnorm(x) = rmsnorm(x, w) (the weight first, as transformers writes it)",
         _graph([("x", (2, 3, 8), "bf16", "input"), ("w", (8,), "bf16", "weight")],
                lambda b, x, w: b.mul(w, b.cast(_rms_core(b, b.cast(x, dtype="f32")), dtype="bf16"))),
         needs=("rmsnorm-core-int", "rmsnorm-casts")),
    Rule("rmsnorm-weight-after",
         """(rule ((= e (Mul (Rmsnorm x (Absent) eps) w (NoAttr))) (= s (shape x))
                   (= (shape w) (vec-of (vec-get s (- (vec-length s) 1)))) (= (dtype w) dw) (is-float dw))
                  ((union e (Rmsnorm x w eps))))""",
         "rmsnorm(x) * w = rmsnorm(x, w)",
         _graph([("x", (2, 8), "f32", "input"), ("w", (8,), "f32", "weight")],
                lambda b, x, w: b.mul(_rms_core(b, x), w)),
         needs=("rmsnorm-core-int",)),
)

# --- softmax, SiLU, GELU -------------------------------------------------------------------------------

ACTIVATIONS = (
    # torch's decomposition of softmax: exp(x - max) / sum(exp(x - max)), over the last dim
    Rule("softmax",
         f"""(rule ((= ex (Exp (Sub x (Amax x {LAST} (Bool true)) (NoAttr))))
                   (= e (Div ex (Sum ex {LAST} (Bool true) (NoAttr)) (NoAttr))) {FLOAT.format(x="x")})
                  ((union e (Softmax x (Int -1)))))""",
         "exp(x - amax(x)) / sum(exp(x - amax(x))) = softmax(x, -1)",
         _graph([("x", (2, 3, 5), "f32", "input")],
                lambda b, x: (lambda ex: b.div(ex, b.sum(ex, dim=[-1], keepdim=True)))(
                    b.exp(b.sub(x, b.amax(x, dim=[-1], keepdim=True)))))),
    # silu(x) = x * sigmoid(x), written either way round
    Rule("silu", f"(rule ((= e (Mul x (Sigmoid x) (NoAttr))) {FLOAT.format(x='x')}) ((union e (Silu x))))",
         "x * sigmoid(x) = silu(x)",
         _graph([("x", (2, 6), "f32", "input")], lambda b, x: b.mul(x, b.sigmoid(x)))),
    Rule("silu-after", f"(rule ((= e (Mul (Sigmoid x) x (NoAttr))) {FLOAT.format(x='x')}) ((union e (Silu x))))",
         "sigmoid(x) * x = silu(x)",
         _graph([("x", (2, 6), "f32", "input")], lambda b, x: b.mul(b.sigmoid(x), x))),
    # torch's decomposition of exact GELU: (x * 0.5) * (1 + erf(x * sqrt(1/2)))
    Rule("gelu-erf",
         f"""(rule ((= e (Mul (Mul x (Absent) (Float 0.5))
                             (Add (Erf (Mul x (Absent) (Float 0.7071067811865476))) (Absent) (Int 1)) (NoAttr)))
                   {FLOAT.format(x="x")})
                  ((union e (Gelu x (Str "none")))))""",
         "x * 0.5 * (1 + erf(x / sqrt(2))) = gelu(x)",
         _graph([("x", (2, 6), "f32", "input")],
                lambda b, x: b.mul(b.mul(x, 0.5), b.add(b.erf(b.mul(x, 0.7071067811865476)), 1)))),
    # transformers' NewGELU (GPT-2): 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    Rule("gelu-tanh",
         f"""(rule ((= inner (Mul (Add x (Mul (Pow x (Absent) (Float 3.0)) (Absent) (Float 0.044715)) (NoAttr))
                                  (Absent) (Float 0.7978845608028654)))
                   (= e (Mul (Mul x (Absent) (Float 0.5)) (Add (Tanh inner) (Absent) (Float 1.0)) (NoAttr)))
                   {FLOAT.format(x="x")})
                  ((union e (Gelu x (Str "tanh")))))""",
         "0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) = gelu(x, approximate='tanh')",
         _graph([("x", (2, 6), "f32", "input")],
                lambda b, x: b.mul(b.mul(x, 0.5), b.add(b.tanh(b.mul(b.add(x, b.mul(b.pow(x, 3.0), 0.044715)),
                                                                      0.7978845608028654)), 1.0)))),
)

# --- RoPE (transformers: x * cos + rotate_half(x) * sin, rotate_half = cat(-x2, x1)) -------------------
# The slices and the concat are along the last dim, written -1 or rank - 1: (d + rank) % rank = rank - 1.


def _rope_example(b, x, cos, sin):
    half = x.type.shape[-1] // 2
    rotated = b.concat(b.neg(b.slice(x, dim=-1, start=half, end=2**63 - 1)), b.slice(x, dim=-1, start=0, end=half),
                       dim=-1)
    return b.add(b.mul(x, cos), b.mul(rotated, sin))


_ROPE_INPUTS = [("x", (1, 2, 3, 8), "f32", "input"), ("cos", (1, 1, 3, 8), "f32", "input"),
                ("sin", (1, 1, 3, 8), "f32", "input")]

# Two steps, so that each query joins few rows: matching the whole form at once made egglog join every
# slice with every multiplication (2.4 s per iteration at 28 layers; these take milliseconds).
ROPE = (
    Rule("rotate-half",
         """(rule ((= rot (Concat (TCons (Neg (Slice x (Int sd) (Int h) (Int end) (Int 1)))
                                         (TCons (Slice x (Int sd) (Int 0) (Int h) (Int 1)) (TNil))) (Int cd)))
                   (= s (shape x)) (= r (vec-length s)) (= (* 2 h) (vec-get s (- r 1))) (>= end (* 2 h))
                   (= (% (+ sd r) r) (- r 1)) (= (% (+ cd r) r) (- r 1)))
                  ((rotate-half-of rot x)))""",
         "records that rot = cat(-x[..., h:], x[..., :h]) along the last dim (it rewrites nothing)",
         _graph(_ROPE_INPUTS, _rope_example)),
    Rule("rope",
         """(rule ((rotate-half-of rot x) (= e (Add (Mul x cos (NoAttr)) (Mul rot sin (NoAttr)) (NoAttr)))
                   (= (shape e) (shape x)) (= (dtype e) (dtype x)) (= (dtype x) d) (is-float d))
                  ((union e (Rope x cos sin))))""",
         "x * cos + rotate_half(x) * sin = rope(x, cos, sin), when it keeps x's type",
         _graph(_ROPE_INPUTS, _rope_example), needs=("rotate-half",)),
)

# --- attention (eager: softmax(q k^T * scale + mask) v) ----------------------------------------------


def _attention(dims: tuple[int, int], masked: bool) -> Rule:
    scores = "(Mul (Matmul q (Transpose k (Int {}) (Int {}))) (Absent) (Float scale))".format(*dims)
    logits = f"(Add {scores} mask (NoAttr))" if masked else scores
    mask = "mask" if masked else "(Absent)"
    name = f"attention{'-masked' if masked else ''}{'-neg' if dims[0] < 0 else ''}"

    def build(b, q, k, v, *mask_value):
        s = b.mul(b.matmul(q, b.transpose(k, dim0=dims[0], dim1=dims[1])), 0.125)
        return b.matmul(b.softmax(b.add(s, mask_value[0]) if masked else s, dim=-1), v)

    # a decode step: one query against a cache of three keys
    inputs = [("q", (1, 2, 1, 4), "f32", "input"), ("k", (1, 2, 3, 4), "f32", "input"),
              ("v", (1, 2, 3, 4), "f32", "input")] + ([("mask", (1, 1, 1, 3), "f32", "input")] if masked else [])
    return Rule(
        name,
        f"""(rule ((= e (Matmul (Softmax {logits} (Int -1)) v)) (= (dtype q) "f32") (= (dtype k) "f32")
                   (= (dtype v) "f32") (= sq (shape q)) (= sk (shape k)) (= (vec-length sq) 4) (= sk (shape v))
                   (= (vec-get sq 0) (vec-get sk 0)) (= (vec-get sq 1) (vec-get sk 1)) (= (vec-get sq 3) (vec-get sk 3))
                   {"(= (dtype mask) " + '"f32")' if masked else ""})
                  ((union e (Sdpa q k v {mask} (Bool false) (Float scale) (Bool false)))))""",
        "softmax(q k^T * scale" + (" + mask" if masked else "") + ") v = sdpa, for f32 4-d q [B, H, Tq, D] and "
        "k, v [B, H, Tk, D] (as many heads: repeat_kv has run)",
        _graph(inputs, build))


ATTENTION = tuple(_attention(d, m) for d in ((2, 3), (-2, -1)) for m in (True, False))


def _repeat_kv(var: str, g: str) -> str:
    """transformers' repeat_kv of `var` [B, Hkv, S, D] by `g`: [B, Hkv, 1, S, D] expanded to [B, Hkv, g, S, D],
    copied, viewed as [B, Hkv * g, S, D]; the Ints variables are named after `var`."""
    return f"(Reshape (Contiguous (Expand (Reshape {var} (Ints {var}5)) (Ints {var}g))) (Ints {var}4))"


def _repeat_kv_guard(var: str, g: str) -> str:
    return (f"(= s{var} (shape {var})) (= (vec-length s{var}) 4) "
            f"(= {var}5 (vec-of (vec-get s{var} 0) (vec-get s{var} 1) 1 (vec-get s{var} 2) (vec-get s{var} 3))) "
            f"(= {var}g (vec-of (vec-get s{var} 0) (vec-get s{var} 1) {g} (vec-get s{var} 2) (vec-get s{var} 3))) "
            f"(= {var}4 (vec-of (vec-get s{var} 0) (* {g} (vec-get s{var} 1)) (vec-get s{var} 2) (vec-get s{var} 3)))")


def _gqa_example(b, q, k, v, mask):
    def repeat(x):
        B, H, S, D = x.type.shape
        wide = b.contiguous(b.expand(b.reshape(x, shape=(B, H, 1, S, D)), shape=(B, H, 2, S, D)))
        return b.reshape(wide, shape=(B, 2 * H, S, D))
    return b.sdpa(q, repeat(k), repeat(v), mask, scale=0.25)


GQA = (
    # repeat_kv then attention is grouped-query attention over the unexpanded k and v: query head h reads
    # kv head h // g either way (expand then view puts kv head j at heads j*g .. j*g + g - 1), and torch's
    # enable_gqa makes the same grouping; so no copy of a cache is needed. Guarded on the exact
    # reshape -> expand -> contiguous -> reshape shapes of both k and v, with one group size g for both.
    Rule("gqa-attention",
         f"""(rule ((= e (Sdpa q {_repeat_kv("k", "g")} {_repeat_kv("v", "g")} mask causal scale (Bool false)))
                   (= g (vec-get kg 2)) (> g 1) {_repeat_kv_guard("k", "g")} {_repeat_kv_guard("v", "g")}
                   (= sk sv) (= (dtype k) (dtype v)))
                  ((union e (Sdpa q k v mask causal scale (Bool true)))))""",
         "sdpa(q, repeat_kv(k, g), repeat_kv(v, g)) = sdpa(q, k, v, enable_gqa=true): attention reads the "
         "kv heads as they are cached",
         _graph([("q", (1, 4, 1, 8), "f32", "input"), ("k", (1, 2, 5, 8), "f32", "input"),
                 ("v", (1, 2, 5, 8), "f32", "input"), ("mask", (1, 1, 1, 5), "bool", "input")], _gqa_example)),
)

# --- layer norm (x - mean) * rsqrt(var + eps), then * w + b ---------------------------------------------

LAYER_NORM = (
    Rule("layer-norm-core",
         f"""(rule ((= xc (Sub x (Mean x {LAST} (Bool true)) (NoAttr)))
                   (= e (Mul xc (Rsqrt (Add (Mean (Pow xc (Absent) (Int 2)) {LAST} (Bool true)) (Absent) (Float eps)))
                             (NoAttr)))
                   (= (dtype x) "f32") (= s (shape x)) (= n (vec-get s (- (vec-length s) 1))))
                  ((union e (LayerNorm x (Absent) (Absent) (Ints (vec-of n)) (Float eps)))))""",
         "(x - mean(x)) * rsqrt(mean((x - mean(x))^2) + eps) = layer_norm(x) over the last dim, in f32",
         _graph([("x", (2, 3, 8), "f32", "input")],
                lambda b, x: (lambda xc: b.mul(xc, b.rsqrt(b.add(b.mean(b.pow(xc, 2), dim=[-1], keepdim=True),
                                                                  1e-5))))(
                    b.sub(x, b.mean(x, dim=[-1], keepdim=True))))),
    Rule("layer-norm-affine",
         """(rule ((= e (Add (Mul (LayerNorm x (Absent) (Absent) (Ints ns) eps) w (NoAttr)) bias (NoAttr)))
                   (= (shape w) ns) (= (shape bias) ns) (= (dtype w) "f32") (= (dtype bias) "f32"))
                  ((union e (LayerNorm x w bias (Ints ns) eps))))""",
         "layer_norm(x) * w + b = layer_norm(x, w, b) for f32 weight and bias of the normalized shape",
         _graph([("x", (2, 8), "f32", "input"), ("w", (8,), "f32", "weight"), ("bias", (8,), "f32", "weight")],
                lambda b, x, w, bias: b.add(b.mul(b.layer_norm(x, normalized_shape=[8]), w), bias))),
)

PATTERNS = RuleSet("patterns", RMSNORM + ACTIVATIONS + ROPE + ATTENTION + GQA + LAYER_NORM, __doc__ or "",
                   prelude="(relation rotate-half-of (Tensor Tensor))")
