"""The `.hoid` text format: `dumps(graph) -> str` and `loads(text) -> Graph`.

A `.hoid` document is the graph as a person, an LLM and `diff` read it: line-oriented, one node a
line, stable names, exact round trip (`loads(dumps(g)) == g` and `dumps(loads(t)) == t` for every
`t` that `dumps` wrote). An example::

    hoid 1
    graph @rms
    input %x : f32[4,64]
    input %w : f32[64]
    %t0 = rmsnorm(%x, %w, eps=1e-06) : f32[4,64]
    output %t0
    end

    graph @main
    input %x : f32[4,64]
    weight %norm.w : f32[64]
    state %cache : f32[4,64]
    %q = transpose(%x, dim0=0, dim1=1) : f32[64,4]{1,64}
    %a, %b = split(%x, sizes=[32, 32], dim=1) : f32[4,32], f32[4,32]
    %k = kernel(%x, %norm.w, body=@rms, kernel="t.rms", version="3fa2", attrs={"eps": 1e-06}, params={}) : f32[4,64]
    %c = cast(%k, dtype=bf16) : bf16[4,64]
    %new = add(%cache, %k) : f32[4,64]
    output %c
    output %new updates %cache
    end

The rules, in the order a reader meets them:

- The first line is the header `hoid <version>`. A document of a newer version than this hoid
  knows is refused (upgrade hoid), never half-read. `hoid.save` adds a line `weights "<file>"`
  naming the safetensors file, beside the document, that holds the bound weights.
- A document holds one or more graphs, `graph @label` ... `end`, separated by a blank line. The
  last graph is the main one; every earlier graph is a kernel body, defined before the graph that
  uses it, printed once however often it is used (structurally equal bodies are one). A body's label
  is its name; when two different bodies share a name, the later one is labelled `@name_2` and its
  header keeps the real name: `graph @body_2 name="body"`.
- Inside a graph: inputs first (`input`, `weight` or `state`, a name and a type), then nodes, then
  outputs. `input` values are what `hoid.run` takes, in order, with the `state` ones; `weight`
  values are looked up by name (a module path such as `%model.norm.weight`). A state input is
  updated by an output: `output %new_cache updates %k_cache` (several states: `updates %a, %b`).
- A node: its output names, the op, its operands, then its attrs by name, and the output types.
  Attrs come in the op's schema order, all of them, defaults included, except an optional attr
  whose value and default are both none (`add(%x, %y)`, not `add(%x, %y, scalar=none)`).
- Names: `%` or `@` followed by letters, digits, `_` and `.`; any other name is JSON-quoted after
  the sigil (`%"my value"`).
- Types: `dtype[d0,d1,...]`, with the strides in elements after it when the layout is not
  contiguous: `f32[64,4]{1,64}`. A scalar is `f32[]`.
- Attr values: integers (`3`); floats as Python's `repr` writes them, which reads back bit-exact
  (`1e-06`, `2.0`: an integral float keeps its `.0`; `inf`, `-inf`, `nan`); `true`, `false`,
  `none`; strings JSON-quoted; lists `[1, 2]`; parameter dicts `{"BLOCK": 64}`; dtypes bare
  (`bf16`); graphs by label (`@rmsnorm_body`).
- `#` starts a comment, to the end of the line; comments and blank lines are ignored (and not kept:
  `dumps` writes none).

Errors: a malformed document raises `hoid.ParseError` with the line, the column, the offending text
and what was expected. Semantic errors (unknown op, bad attr, wrong arity, a declared type that
differs from the inferred one, an undefined or duplicate name, a state without its update) are
ParseErrors too, at the line of the node, carrying the registry's message.
"""

from __future__ import annotations

from .graph import Graph, expect_graph
from .text_parse import parse_document
from .text_print import FORMAT_VERSION, format_document

__all__ = ["FORMAT_VERSION", "dumps", "loads"]


def dumps(graph: Graph) -> str:
    """The `.hoid` document of `graph` (weights are not in it: `hoid.save` writes them beside it)."""
    return format_document(expect_graph(graph, "hoid.dumps"))


def loads(text: str) -> Graph:
    """The main graph of a `.hoid` document; raises `hoid.ParseError` if the text is malformed.

    Weights are not bound (a `weights` line is read and ignored): `hoid.load(path)` binds them.
    """
    if not isinstance(text, str):
        raise TypeError(f"loads takes the text of a .hoid document, not a {type(text).__name__}; "
                        "to read a file, use hoid.load(path)")
    return parse_document(text).graph
