"""Channels-last: a 2-d convolution is also its NHWC form, and what lies between two convolutions follows it.

Why: cuDNN's Hopper convolutions run NHWC. Handed NCHW tensors, each converts its input to NHWC and its
output back: 79 + 40 launches, 3.0 ms of SDXL's 35 ms UNet step on the H100 (12-06), the whole gap to
reduce-overhead, whose layout optimization keeps the tensors channels-last between convolutions.

The IR's values are contiguous in their own shape, so an NHWC tensor is a tensor of shape [N, H, W, C], and
an NCHW value computed from one is its `permute(y, [0, 3, 1, 2])` (P below; Q = [0, 2, 3, 1] is P's
inverse). The rules:

- a convolution is P of its NHWC form over Q of its input (and of its weight: a weight-only value, laid out
  once when weights are bound);
- the NHWC form's bias is an add of its own (a [C] bias broadcasts over [N, H, W, C]), joined with a time
  embedding where one follows, or with the other bias where two convolutions' outputs meet in a residual
  add, so that the group norm or the residual add after it can add it as it reads;
- P and Q cancel, so a chain conv -> ... -> conv needs no permute where every op on the way has an NHWC form:
  unary and binary elementwise ops (a binary one also with an operand that broadcasts over H and W, the
  time embedding [N, C, 1, 1]: its Q is a view), group norm (`group_norm_nhwc`), the upsamplers'
  `interpolate` (`interpolate_nhwc`), and the skip connections' concat along the channels; the transformer
  blocks' own `permute(x, Q)` then meets an NHWC value and cancels too;
- an attention over the image's pixels (the VAE's mid block) reads it as tokens [N, C, H*W] through a group
  norm, and writes it back by a transpose and a reshape: both have channels-last forms, so the chain runs
  through it.

Only rank-4 values under P take part, so the e-graph grows by at most one NHWC twin per such value (no
composition of arbitrary permutes). The cost models price P and Q of a computed value as the copy a kernel
reading it makes (`cost.py`), so extraction leaves the NCHW layout only where the convolutions' measured
gain pays for the permutes at the chain's ends.
"""

from __future__ import annotations

from ...ir import GraphBuilder
from ...ir.ops.spatial import TO_NCHW, TO_NHWC
from ...ir.registry import get_op
from ..language import constructor_name, int_vec
from . import Rule, RuleSet

P, Q = f"(Ints {int_vec(TO_NCHW)})", f"(Ints {int_vec(TO_NHWC)})"
# the NHWC shape of an NCHW shape `s`
_NHWC = "(vec-of (vec-get {s} 0) (vec-get {s} 2) (vec-get {s} 3) (vec-get {s} 1))"


def _nhwc(var: str) -> str:
    return _NHWC.format(s=var)


_CONV = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1))


def _block():
    """conv -> + time embedding [N, C, 1, 1] -> group norm -> silu -> conv, + the block's input: a ResNet
    block in small."""
    b = GraphBuilder("example")
    x = b.input("x", (1, 4, 5, 6), "f32")
    temb = b.input("temb", (1, 4, 1, 1), "f32")
    h = b.conv(x, b.weight("w1", (4, 4, 3, 3), "f32"), b.weight("b1", (4,), "f32"),
               stride=(1, 1), padding=(1, 1), dilation=(1, 1))
    h = b.group_norm(b.add(h, temb), b.weight("gw", (4,), "f32"), b.weight("gb", (4,), "f32"), num_groups=2)
    h = b.conv(b.silu(h), b.weight("w2", (4, 4, 1, 1), "f32"), **_CONV)
    return b.build(b.add(h, x))


def _after_conv(build):
    """`build(b, h, g, x)`: over two 1x1 convolutions' outputs h and g [1, 3, 4, 4] of the input x."""
    def example():
        b = GraphBuilder("example")
        x = b.input("x", (1, 2, 4, 4), "f32")
        h = b.conv(x, b.weight("w1", (3, 2, 1, 1), "f32"), **_CONV)
        g = b.conv(x, b.weight("w2", (3, 2, 1, 1), "f32"), **_CONV)
        return b.build(build(b, h, g, x))
    return example


def _transformer_entry():
    """The spatial transformer's way in and out: permute(h, Q), reshape to tokens, back, permute(., P)."""
    def build(b, h, g, x):
        tokens = b.reshape(b.permute(h, dims=(0, 2, 3, 1)), shape=(1, 16, 3))
        return b.permute(b.reshape(b.neg(tokens), shape=(1, 4, 4, 3)), dims=(0, 3, 1, 2))
    return _after_conv(build)()


def _there_and_back():
    b = GraphBuilder("example")
    x = b.input("x", (1, 2, 3, 4), "f32")
    return b.build(b.exp(b.permute(b.permute(x, dims=(0, 2, 3, 1)), dims=(0, 3, 1, 2))))


def _attention_block():
    """A VAE's mid-block attention in small: the image's group norm as tokens [N, C, H*W], transposed to
    [N, H*W, C] for the attention (here a negation), and back to [N, C, H, W] for the residual add."""
    def build(b, h, g, x):
        normed = b.group_norm(b.reshape(h, shape=(1, 3, 16)), b.weight("gw", (3,), "f32"),
                              b.weight("gb", (3,), "f32"), num_groups=3)
        tokens = b.neg(b.transpose(normed, dim0=1, dim1=2))
        return b.add(b.reshape(b.transpose(tokens, dim0=-1, dim1=-2), shape=(1, 3, 4, 4)), h)
    return _after_conv(build)()


def _tokens_to_image(dims):
    """[N, H*W, C] tokens (a 1x1 convolution's output laid out so) transposed by `dims` and reshaped to an
    image: the way out of an attention block."""
    def build(b, h, g, x):
        tokens = b.reshape(b.permute(h, dims=(0, 2, 3, 1)), shape=(1, 16, 3))
        return b.exp(b.reshape(b.transpose(b.neg(tokens), dim0=dims[0], dim1=dims[1]), shape=(1, 3, 4, 4)))
    return _after_conv(build)


# The elementwise ops that sit between a UNet's or a VAE's convolutions (and their close kin): each gets its
# rules, so a chain through them stays channels-last; any other op ends the chain (its operand copied back).
UNARY = ("silu", "gelu", "relu", "sigmoid", "tanh", "exp", "neg")
BINARY = ("add", "sub", "mul", "div")


def _attr_vars(name: str) -> str:
    return " ".join(f"a{i}" for i in range(len(get_op(name).attrs)))


def _unary_rule(name: str) -> str:
    c, attrs = constructor_name(name), _attr_vars(name)
    return f"""(rule ((= e ({c} (Permute y {P}) {attrs})) (= s (shape e)) (= d (dtype e)))
                      ((let z ({c} y {attrs})) (set (shape z) {_nhwc('s')}) (set (dtype z) d)
                       (union e (Permute z {P}))))"""


def _binary_rules(name: str) -> list[tuple[str, str, object]]:
    """(form, rule, example): both operands under P; one under P and a scalar; one under P and the other
    (either side) broadcast over H and W."""
    c, attrs = constructor_name(name), _attr_vars(name)
    new = f"(set (shape z) {_nhwc('s')}) (set (dtype z) d) (union e (Permute z {P}))"
    facts = "(= s (shape e)) (= d (dtype e))"
    # the broadcast operand o: rank 4, 1 in H and W
    bcast = "(= so (shape o)) (= (vec-length so) 4) (= (vec-get so 2) 1) (= (vec-get so 3) 1) (= do (dtype o))"
    q_of_o = f"(let oq (Permute o {Q})) (set (shape oq) {_nhwc('so')}) (set (dtype oq) do)"

    def small(b, x):  # [1, 3, 1, 1], computed from x (a mean over H and W): not under P
        return b.mean(b.conv(x, b.weight("w3", (3, 2, 1, 1), "f32"), **_CONV), dim=(2, 3), keepdim=True)

    return [
        ("", f"(rule ((= e ({c} (Permute a {P}) (Permute b {P}) {attrs})) {facts}) ((let z ({c} a b {attrs})) {new}))",
         _after_conv(lambda b, h, g, x: b.op(name, h, g))),
        ("-scalar", f"(rule ((= e ({c} (Permute a {P}) (Absent) {attrs})) {facts}) "
                    f"((let z ({c} a (Absent) {attrs})) {new}))",
         _after_conv(lambda b, h, g, x: b.op(name, h, 0.5))),
        ("-broadcast", f"(rule ((= e ({c} (Permute a {P}) o {attrs})) {facts} {bcast}) "
                       f"({q_of_o} (let z ({c} a oq {attrs})) {new}))",
         _after_conv(lambda b, h, g, x: b.op(name, h, small(b, x)))),
        ("-broadcast-first", f"(rule ((= e ({c} o (Permute a {P}) {attrs})) {facts} {bcast}) "
                             f"({q_of_o} (let z ({c} oq a {attrs})) {new}))",
         _after_conv(lambda b, h, g, x: b.op(name, small(b, x), h))),
    ]


RULES = (
    # conv(x, w, b) = P(conv_nhwc(Q(x), Q(w), b)): the same sums, the operands laid out channels-last
    Rule("conv-channels-last",
         f"""(rule ((= e (Conv x w b st pd dl g)) (= s (shape e)) (= (vec-length s) 4) (= d (dtype e))
                    (= sx (shape x)) (= sw (shape w)) (= dx (dtype x)) (= dw (dtype w)))
                   ((let xq (Permute x {Q})) (set (shape xq) {_nhwc('sx')}) (set (dtype xq) dx)
                    (let wq (Permute w {Q})) (set (shape wq) {_nhwc('sw')}) (set (dtype wq) dw)
                    (let z (ConvNhwc xq wq b st pd dl g)) (set (shape z) {_nhwc('s')}) (set (dtype z) d)
                    (union e (Permute z {P}))))""",
         "conv(x, w, b) = permute(conv_nhwc(permute(x, Q), permute(w, Q), b), P) on 2-d convolutions",
         _block),
    # the bias apart: torch adds a convolution's bias in a pass of its own (cuDNN's kernels write the sums
    # only), 42 launches and 6.8 ms of SDXL's VAE on the H100 (12-06); as an add, the norm or the residual add
    # after it can take it in (`triton.bias_group_norm_nhwc`, `triton.bias_residual_add`), as Inductor folds it
    Rule("conv-nhwc-bias-apart",
         """(rule ((= e (ConvNhwc x w b st pd dl g)) (= sb (shape b)) (= (vec-length sb) 1) (= s (shape e))
                   (= d (dtype e)) (= d (dtype b)))
                  ((let z (ConvNhwc x w (Absent) st pd dl g)) (set (shape z) s) (set (dtype z) d)
                   (union e (Add z b (NoAttr)))))""",
         "conv_nhwc(x, w, b) = conv_nhwc(x, w) + b", _block, needs=("conv-channels-last",)),
    # a ResNet block's time embedding [N, 1, 1, C] (under Q) joins the bias [C] before both meet the image:
    # one addend a (sample, channel) for the norm to take in (t's C and b's alike: t + b keeps t's shape)
    Rule("bias-joins-time-embedding",
         """(rule ((= e (Add (Add y b (NoAttr)) t (NoAttr))) (= sb (shape b)) (= (vec-length sb) 1)
                   (= st (shape t)) (= (vec-length st) 4) (= (vec-get st 1) 1) (= (vec-get st 2) 1)
                   (= (vec-get st 3) (vec-get sb 0)) (= d (dtype e)) (= d (dtype b)) (= d (dtype t)))
                  ((let u (Add t b (NoAttr))) (set (shape u) st) (set (dtype u) d) (union e (Add y u (NoAttr)))))""",
         "(y + b) + t = y + (t + b), b a bias [C] and t an addend [N, 1, 1, C]", _block,
         needs=("conv-channels-last", "add-channels-last-broadcast", "conv-nhwc-bias-apart")),
    # a skip that is a convolution's output too (a 1x1 shortcut, or an upsampler's conv that the block's norm
    # also reads) brings its bias to the residual add: the two biases join, a weight-only [C], and the add
    # takes both as it reads (`triton.bias_residual_add`); in SDXL's VAE these were 5 of the 16 bias passes
    # left, over 1.2 GB of images (H100, 12-06 15:42)
    Rule("biases-join-across-residual",
         """(rule ((= e (Add (Add r b1 (NoAttr)) (Add x b2 (NoAttr)) (NoAttr))) (= s1 (shape b1)) (= s1 (shape b2))
                   (= (vec-length s1) 1) (= s (shape e)) (= (vec-length s) 4) (= s (shape x)) (= s (shape r))
                   (= (vec-get s 3) (vec-get s1 0)) (= d (dtype e)) (= d (dtype b1)) (= d (dtype b2)))
                  ((let bb (Add b1 b2 (NoAttr))) (set (shape bb) s1) (set (dtype bb) d)
                   (let xb (Add x bb (NoAttr))) (set (shape xb) s) (set (dtype xb) d)
                   (union e (Add r xb (NoAttr)))))""",
         "(r + b1) + (x + b2) = r + (x + (b1 + b2)), b1 and b2 biases [C] over images [N, H, W, C]",
         _after_conv(lambda b, h, g, x: b.add(
             b.conv(x, b.weight("w3", (3, 2, 1, 1), "f32"), b.weight("b3", (3,), "f32"), **_CONV),
             b.conv(x, b.weight("w4", (3, 2, 1, 1), "f32"), b.weight("b4", (3,), "f32"), **_CONV))),
         needs=("conv-channels-last", "add-channels-last", "conv-nhwc-bias-apart")),
    # P then Q (and Q then P) is no permute at all
    Rule("permute-nhwc-roundtrip", f"(rewrite (Permute (Permute x {P}) {Q}) x)",
         "permute(permute(x, P), Q) = x", _transformer_entry, needs=("conv-channels-last",)),
    Rule("permute-nchw-roundtrip", f"(rewrite (Permute (Permute x {Q}) {P}) x)",
         "permute(permute(x, Q), P) = x", _there_and_back),
    # group_norm over the channels of P(y) is P of the group norm over y's last dim
    Rule("group-norm-channels-last",
         f"""(rule ((= e (GroupNorm (Permute y {P}) w b g eps)) (= s (shape y)) (= d (dtype e)))
                   ((let z (GroupNormNhwc y w b g eps)) (set (shape z) s) (set (dtype z) d)
                    (union e (Permute z {P}))))""",
         "group_norm(permute(y, P)) = permute(group_norm_nhwc(y), P)",
         _block, needs=("conv-channels-last", "add-channels-last-broadcast")),
    # the VAE's mid-block attention normalizes the image as tokens, group_norm(reshape(P(y), [N, C, H*W])): the
    # same statistics over the same elements as the image's group norm, so it is the NHWC norm laid out as
    # [N, H*W, C] and transposed (the attention's own transpose to tokens then cancels it). Without it the
    # mid block ran NCHW: torch's group norm (0.30 ms), copies back to NHWC before the next convolutions
    # (0.24) and the first upsampler NCHW (0.20), of a 25.4 ms step on the H100 (12-06 19:22)
    Rule("group-norm-tokens-channels-last",
         f"""(rule ((= e (GroupNorm (Reshape (Permute y {P}) (Ints v)) w b g eps)) (= (vec-length v) 3)
                    (= sy (shape y)) (= (vec-length sy) 4) (= (vec-get v 0) (vec-get sy 0))
                    (= (vec-get v 1) (vec-get sy 3)) (= (vec-get v 2) (* (vec-get sy 1) (vec-get sy 2)))
                    (= d (dtype e)))
                   ((let z (GroupNormNhwc y w b g eps)) (set (shape z) sy) (set (dtype z) d)
                    (let r (Reshape z (Ints (vec-of (vec-get v 0) (vec-get v 2) (vec-get v 1)))))
                    (set (shape r) (vec-of (vec-get v 0) (vec-get v 2) (vec-get v 1))) (set (dtype r) d)
                    (let t (Transpose r (Int 1) (Int 2))) (set (shape t) v) (set (dtype t) d)
                    (union e t)))""",
         "group_norm(reshape(permute(y, P), [N, C, HW])) = transpose(reshape(group_norm_nhwc(y), [N, HW, C]), 1, 2)",
         _attention_block, needs=("conv-channels-last",)),
    # resizing P(y) in H and W is P of resizing y's middle dims (torch's upsampling runs channels-last as is)
    Rule("interpolate-channels-last",
         f"""(rule ((= e (Interpolate (Permute y {P}) sz md ac)) (= s (shape e)) (= d (dtype e)))
                   ((let z (InterpolateNhwc y sz md ac)) (set (shape z) {_nhwc('s')}) (set (dtype z) d)
                    (union e (Permute z {P}))))""",
         "interpolate(permute(y, P)) = permute(interpolate_nhwc(y), P)",
         _after_conv(lambda b, h, g, x: b.interpolate(h, size=(8, 8), mode="nearest")), needs=("conv-channels-last",)),
    # two channels-last tensors joined along the channels are joined along their last dim
    Rule("concat-channels-last",
         f"""(rule ((= e (Concat (TCons (Permute a {P}) (TCons (Permute c {P}) (TNil))) (Int 1)))
                    (= s (shape e)) (= d (dtype e)))
                   ((let z (Concat (TCons a (TCons c (TNil))) (Int 3))) (set (shape z) {_nhwc('s')})
                    (set (dtype z) d) (union e (Permute z {P}))))""",
         "concat([permute(a, P), permute(c, P)], 1) = permute(concat([a, c], 3), P)",
         _after_conv(lambda b, h, g, x: b.concat(h, g, dim=1)), needs=("conv-channels-last",)),
) + tuple(
    # an elementwise op of P(y) is P of the op of y: it reads and writes every element alike
    Rule(f"{name}-channels-last", _unary_rule(name), f"{name}(permute(y, P)) = permute({name}(y), P)",
         _after_conv(lambda b, h, g, x, name=name: b.op(name, h)), needs=("conv-channels-last",))
    for name in UNARY
) + tuple(
    Rule(f"{name}-channels-last{form}", text,
         f"{name} with operands under P (or a scalar, or one broadcast over H and W) = P of {name} channels-last",
         example, needs=("conv-channels-last",))
    for name in BINARY for form, text, example in _binary_rules(name)
)

# tokens [N, H*W, C] transposed to [N, C, H*W] and reshaped to an image are P of the tokens reshaped to
# [N, H, W, C]: the attention block's way out stays channels-last (one rule per spelling of the swap of a 3-d
# tensor's last two dims; the importer keeps torch's, and diffusers writes (-1, -2))
TOKEN_SWAPS = ((1, 2), (2, 1), (-1, -2), (-2, -1))
RULES += tuple(
    Rule("tokens-to-image-channels-last" + "".join(f"-{'m' if i < 0 else ''}{abs(i)}" for i in (a, c)),
         f"""(rule ((= e (Reshape (Transpose t (Int {a}) (Int {c})) (Ints v))) (= (vec-length v) 4)
                    (= st (shape t)) (= (vec-length st) 3) (= (vec-get st 0) (vec-get v 0))
                    (= (vec-get st 2) (vec-get v 1)) (= (vec-get st 1) (* (vec-get v 2) (vec-get v 3)))
                    (= d (dtype e)))
                   ((let r (Reshape t (Ints {_nhwc('v')}))) (set (shape r) {_nhwc('v')}) (set (dtype r) d)
                    (union e (Permute r {P}))))""",
         f"reshape(transpose(t, {a}, {c}), [N, C, H, W]) = permute(reshape(t, [N, H, W, C]), P), t [N, H*W, C]",
         _tokens_to_image((a, c)), needs=("conv-channels-last",))
    for a, c in TOKEN_SWAPS
)

CHANNELS_LAST = RuleSet("channels-last", RULES, __doc__ or "")
