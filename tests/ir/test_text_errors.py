"""Malformed `.hoid` documents: every error is a `hoid.ParseError` at the right line, saying what is wrong.

Each case edits one line of a valid document (`VALID`); the line numbers below are those of `VALID`.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoid import ParseError
from hoid.ir.text import dumps, loads

VALID = """\
hoid 1
graph @body
input %x : f32[4,8]
%t0 = exp(%x) : f32[4,8]
output %t0
end

graph @main
input %x : f32[4,8]
weight %model.w : f32[8]
state %cache : f32[4,8]
%y = add(%x, %model.w) : f32[4,8]
%k = kernel(%y, body=@body, kernel="t.exp", version="", attrs={}, params={}) : f32[4,8]
%a, %b = split(%k, sizes=[4, 4], dim=1) : f32[4,4], f32[4,4]
%c = cast(%a, dtype=bf16) : bf16[4,4]
output %c
output %k updates %cache
end
"""


def edit(line: int, new: str | None) -> str:
    """VALID with line `line` (1-based) replaced by `new`, or removed when `new` is None."""
    lines = VALID.splitlines()
    lines[line - 1:line] = [] if new is None else [new]
    return "\n".join(lines) + "\n"


# (document, line of the error, words its message must contain)
CASES = {
    "unknown op": (edit(12, "%y = addd(%x, %model.w) : f32[4,8]"), 12, ["unknown op 'addd'", "did you mean"]),
    "bad attr name": (edit(15, "%c = cast(%a, dtyp=bf16) : bf16[4,4]"), 15, ["no attr 'dtyp'", "dtype"]),
    "bad attr value": (
        edit(14, '%a, %b = split(%k, sizes=[4, 4], dim="1") : f32[4,4], f32[4,4]'),
        14, ["attr dim", "integer"]),
    "bad dtype attr": (edit(15, "%c = cast(%a, dtype=bf17) : bf16[4,4]"), 15, ["bf17", "bf16"]),
    "quoted dtype": (edit(15, '%c = cast(%a, dtype="bf16") : bf16[4,4]'), 15, ["dtype", "bare"]),
    "bare word value": (
        edit(13, '%k = kernel(%y, body=@body, kernel=t) : f32[4,8]'), 13, ["bad value 't'", '"t"']),
    "wrong arity": (edit(12, "%y = add(%x, %model.w, %x) : f32[4,8]"), 12, ["add", "operand", "got 3"]),
    "undefined value": (edit(12, "%y = add(%x, %model.v) : f32[4,8]"), 12, ["undefined value %model.v"]),
    "bad dtype in a type": (edit(9, "input %x : f33[4,8]"), 9, ["unknown dtype 'f33'", "f32"]),
    "bad type syntax": (edit(9, "input %x : f32(4,8)"), 9, ["unexpected '('", "list of sizes"]),
    "unclosed shape": (edit(9, "input %x : f32[4,8"), 9, ["ends too early", "']'"]),
    "negative size": (edit(9, "input %x : f32[4,-8]"), 9, ["negative dimension"]),
    "truncated file": (
        VALID[:VALID.index("params={") + len("params={")], 13, ["ends too early", "parameter name"]),
    "truncated graph": (VALID[:VALID.index("output %k")], 16, ["ends inside graph @main", "end"]),
    "missing header": (edit(1, None), 1, ["missing header", "hoid 1"]),
    "newer version": (edit(1, "hoid 2"), 1, ["version 2", "reads versions up to 1", "upgrade hoid"]),
    "version zero": (edit(1, "hoid 0"), 1, ["bad format version 0"]),
    "duplicate name": (
        edit(12, "%x = add(%x, %model.w) : f32[4,8]"), 12, ["duplicate value name %x", "line 9"]),
    "type mismatch": (
        edit(12, "%y = add(%x, %model.w) : f32[4,9]"),
        12, ["declared type f32[4,9]", "inferred type f32[4,8]"]),
    "wrong output count": (
        edit(14, "%a = split(%k, sizes=[4, 4], dim=1) : f32[4,4]"), 14, ["gives 2 outputs"]),
    "types per name": (
        edit(14, "%a, %b = split(%k, sizes=[4, 4], dim=1) : f32[4,4]"), 14, ["one type per output"]),
    "unterminated string": (
        edit(13, '%k = kernel(%y, body=@body, kernel="t.exp) : f32[4,8]'), 13, ["unterminated string"]),
    "missing end": (edit(6, None), 7, ["graph starts inside graph @body", "`end` missing"]),
    "undefined body": (
        edit(13, '%k = kernel(%y, body=@bdy, kernel="t") : f32[4,8]'), 13, ["undefined graph @bdy"]),
    "kernel operand type": (
        edit(13, '%k = kernel(%model.w, body=@body, kernel="t") : f32[4,8]'),
        13, ["operand 0 is f32[8]", "expects f32[4,8]"]),
    "output of undefined value": (edit(16, "output %d"), 16, ["undefined value %d"]),
    "state without update": (edit(17, "output %k"), 11, ["state %cache has no update", "updates %cache"]),
    "update of a non-state": (edit(17, "output %k updates %x"), 17, ["%x is not a state input"]),
    "update of another type": (edit(17, "output %c updates %cache"), 17, ["bf16[4,4]", "update"]),
    "unused body": (
        VALID + "\ngraph @late\ninput %x : f32[2]\noutput %x\nend\n", 8, ["graph @main is never used"]),
    "duplicate graph": (VALID.replace("graph @main", "graph @body"), 8, ["graph @body is already defined"]),
    "operand after attr": (
        edit(12, "%y = add(%x, scalar=2.0, %model.w) : f32[4,8]"), 12, ["operand after an attr"]),
    "attr given twice": (edit(15, "%c = cast(%a, dtype=bf16, dtype=f16) : bf16[4,4]"), 15, ["given twice"]),
    "input after nodes": (edit(13, "input %z : f32[2]"), 13, ["inputs must come before nodes"]),
    "unexpected character": (edit(12, "%y = add(%x; %model.w) : f32[4,8]"), 12, ["unexpected character ';'"]),
    "junk between graphs": (edit(7, "oops"), 7, ["unexpected 'oops' between graphs"]),
    "empty document": ("\n# nothing\n", 1, ["empty"]),
    "no graph": ("hoid 1\n", 1, ["no graph"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_document_raises_a_located_parse_error(name):
    document, line, words = CASES[name]
    with pytest.raises(ParseError) as caught:
        loads(document)
    error = caught.value
    assert error.line == line, f"{name}: error at line {error.line}, expected {line}:\n{error}"
    message = str(error)
    assert message.startswith(f"line {line}, column {error.column}: ")
    for word in words:
        assert word in message, f"{name}: {word!r} not in the message:\n{message}"
    if error.text:  # the offending line is quoted, with a caret under the column
        assert error.text == document.split("\n")[line - 1]
        assert f"  {error.text}\n  {' ' * (error.column - 1)}^" in message
    assert error.expected and f"expected {error.expected}" in message  # every error says what it wanted


def test_the_column_points_at_the_offending_token():
    cases = {
        "unknown op": "addd",
        "bad attr name": "dtyp",
        "undefined value": "%model.v",
        "type mismatch": "f32[4,9]",
        "unterminated string": '"t.exp',
        "undefined body": "@bdy",
    }
    for name, token in cases.items():
        document, line, _ = CASES[name]
        with pytest.raises(ParseError) as caught:
            loads(document)
        text = document.split("\n")[line - 1]
        assert caught.value.column == text.index(token) + 1, name


def test_the_valid_document_is_valid():
    """The cases above fail because of their one edit, not because of the document they edit."""
    assert dumps(loads(VALID)) == VALID


def test_errors_inside_a_body_name_the_body_line():
    document = VALID.replace("%t0 = exp(%x) : f32[4,8]", "%t0 = exp(%x, dim=1) : f32[4,8]")
    with pytest.raises(ParseError, match="exp has no attr 'dim'") as caught:
        loads(document)
    assert caught.value.line == 4


def test_a_path_given_to_loads_gets_a_hint():
    with pytest.raises(ParseError, match=r"use hoid.load\(path\)"):
        loads("decode.hoid")
    with pytest.raises(TypeError, match=r"use hoid.load\(path\)"):
        loads(b"hoid 1\n")


def test_a_crash_in_an_op_inference_is_still_a_located_parse_error(monkeypatch):
    def crashing_infer(op, types, attrs):
        return types[3]  # an IndexError, as a buggy op's inference would raise

    monkeypatch.setattr("hoid.ir.text_parse.infer_node", crashing_infer)
    with pytest.raises(ParseError, match="exp: type inference failed with IndexError") as caught:
        loads(VALID)
    assert caught.value.line == 4 and isinstance(caught.value.__cause__, IndexError)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mangled_documents_raise_only_parse_errors(data):
    """Cut, drop or insert characters anywhere: the parser answers with a ParseError or a graph,
    never with another exception from deep inside."""
    text = VALID
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["cut", "drop", "insert"]))
        if action == "cut":
            text = text[:at]
        elif action == "drop":
            text = text[:at] + text[at + data.draw(st.integers(1, 8)):]
        else:
            piece = data.draw(st.sampled_from([*'%@"[]{}(),=:#-.0x \n', "inf", "end"]))
            text = text[:at] + piece + text[at:]
    try:
        graph = loads(text)
    except ParseError as e:
        assert e.line >= 1 and e.column >= 1
    else:
        assert loads(dumps(graph)) == graph
