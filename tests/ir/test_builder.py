"""GraphBuilder: inference as you build, scalars, multi-output ops, and errors that say what was expected."""

import pytest
import torch

import hoid


def test_python_numbers_become_scalar_attrs():
    b = hoid.GraphBuilder()
    x = b.input("x", (3,), "f16")
    y = b.mul(x, 0.5)
    z = b.mul(2, y)  # commutative: swapped
    w = b.sub(1.0, z)  # c - x == (-x) + c exactly
    g = b.build(w)
    assert [n.op for n in g.nodes] == ["mul", "mul", "neg", "add"]
    assert g.nodes[0].attrs == {"scalar": 0.5} and g.nodes[1].attrs == {"scalar": 2}
    assert y.type.dtype == "f16"  # a Python float does not promote a half tensor
    t = torch.randn(3, dtype=torch.float16)
    (out,) = hoid.run(g, t)
    torch.testing.assert_close(out, 1.0 - 2 * (t * 0.5), rtol=0, atol=0)


def test_non_commutative_number_first_is_refused_with_a_fix():
    b = hoid.GraphBuilder()
    x = b.input("x", (3,), "f32")
    with pytest.raises(hoid.GraphError, match=r"div: a number as first operand.*full"):
        b.div(1.0, x)


def test_bad_call_names_op_shapes_and_expectation():
    b = hoid.GraphBuilder()
    x = b.input("x", (4, 8), "f32")
    y = b.input("y", (5,), "f32")
    with pytest.raises(hoid.GraphError, match=r"add\(f32\[4,8\], f32\[5\]\): shapes \[4, 8\], \[5\] do not broadcast"):
        b.add(x, y)
    with pytest.raises(hoid.GraphError, match=r"exp\(i32\[2\]\): expects a floating-point tensor"):
        b.exp(b.input("i", (2,), "i32"))


def test_unknown_op_and_attribute_errors():
    b = hoid.GraphBuilder()
    with pytest.raises(AttributeError, match="no method or op 'softmaxx'"):
        _ = b.softmaxx
    with pytest.raises(hoid.GraphError, match="unknown op 'nope'"):
        b.op("nope")


def test_duplicate_input_names_are_refused():
    b = hoid.GraphBuilder()
    b.input("x", (1,), "f32")
    with pytest.raises(hoid.GraphError, match="duplicate value name %x"):
        b.weight("x", (1,), "f32")


def test_torch_dtypes_are_accepted():
    b = hoid.GraphBuilder()
    x = b.input("x", (2,), torch.bfloat16)
    assert x.type.dtype == "bf16"
    assert b.cast(x, dtype=torch.float32).type.dtype == "f32"


def test_op_and_the_method_take_numbers_the_same_way():
    b = hoid.GraphBuilder()
    x = b.input("x", (3,), "f32")
    via_op, via_method = b.op("sub", 1.0, x), b.sub(1.0, x)
    g = b.build(via_op, via_method)
    assert [n.op for n in g.nodes] == ["neg", "add", "neg", "add"]
    t = torch.randn(3)
    assert all(torch.equal(out, 1.0 - t) for out in hoid.run(g, t))
