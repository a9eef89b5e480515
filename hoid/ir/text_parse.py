"""Reading a `.hoid` document back into a `Graph` (the format is described in `hoid.ir.text`).

The document is read line by line; each line is split into tokens that remember their column, so
every error, syntactic or semantic, is a `hoid.ParseError` that points at the line, the column and
the offending text and says what was expected. Semantic checks (op, arity, attrs, inferred types,
names) run as each node is read, through the registry's own `infer_node`, so the document and
`GraphBuilder` accept exactly the same graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import GraphError, ParseError
from .dtypes import TORCH_DTYPES
from .graph import INPUT_KINDS, Graph, GraphInput, Node, Value
from .registry import OpDef, get_op, infer_node
from .text_lex import Line, Token
from .text_print import FORMAT_VERSION
from .types import TensorType


@dataclass
class Document:
    """What a document holds: its main graph (bodies hang off its kernel nodes) and where its weights are."""

    graph: Graph  # the main graph: the last one of the document
    weights_file: str | None  # from a `weights "file.safetensors"` line (written by hoid.save)


def read_type(line: Line) -> tuple[TensorType, Token]:
    """`dtype[d0,d1,...]` with optional `{strides}`; returns the type and its first token."""
    first = line.expect("word", "a type such as f32[4,64]")
    if first.value not in TORCH_DTYPES:
        raise line.error(f"unknown dtype {first.value!r}", first, f"one of {', '.join(TORCH_DTYPES)}")
    shape = _int_list(line, "[", "]")
    strides = _int_list(line, "{", "}") if line.peek().kind == "{" else None
    try:
        return TensorType(shape, first.value, strides), first
    except ValueError as e:
        raise line.error(f"bad type: {e}", first, "non-negative sizes and one stride per dimension") from None


def _int_list(line: Line, open_: str, close: str) -> list[int]:
    line.expect(open_, f"{open_!r} opening a list of sizes")
    items: list[int] = []
    while not line.accept(close):
        if items:
            line.expect(",", f"',' or {close!r}")
        items.append(line.expect("int", "an integer").value)
    return items


class _Bare(str):
    """A bare word given as an attr value: only dtype attrs take one (`dtype=bf16`)."""


def read_value(line: Line, graphs: GraphTable, top: bool = True) -> Any:
    """One attr value, as the Python value the registry expects (lists stay lists until normalized)."""
    token = line.next()
    if token.kind in ("int", "float", "string"):
        return token.value
    if token.kind == "word":
        words = {"true": True, "false": False, "none": None, "inf": float("inf"), "nan": float("nan")}
        if token.value in words:
            return words[token.value]
        if top:
            return _Bare(token.value)
        raise line.error(f"bare word {token.value!r} is not a value", token,
                         f'a number, a quoted string ("{token.value}"), true, false or none')
    if token.kind == "@":
        return graphs.use(token, line)
    if token.kind == "[":
        items: list[Any] = []
        while not line.accept("]"):
            if items:
                line.expect(",", "',' or ']'")
            items.append(read_value(line, graphs, top=False))
        return items
    if token.kind == "{":
        params: dict[str, Any] = {}
        while not line.accept("}"):
            if params:
                line.expect(",", "',' or '}'")
            key = line.expect("string", 'a quoted parameter name such as "BLOCK"')
            line.expect(":", "':' after the parameter name")
            params[key.value] = read_value(line, graphs, top=False)
        return params
    raise line.error("expected a value", token, "a number, a string, true, false, none, a dtype, "
                     "a list [..], a dict {..} or a graph @name")


class GraphTable:
    """The graphs defined so far in a document, by label, and which of them have been used."""

    def __init__(self):
        self.graphs: dict[str, tuple[Graph, Line]] = {}  # label -> (graph, the line of its header)
        self.used: set[str] = set()

    def use(self, token: Token, line: Line) -> Graph:
        if token.value not in self.graphs:
            raise line.error(f"undefined graph @{token.value}", token,
                             "a graph defined earlier in the document (bodies come before their use)")
        self.used.add(token.value)
        return self.graphs[token.value][0]


def _column_of_attr(message: str, attr_tokens: dict[str, Token]) -> Token | None:
    """The attr a registry error speaks of (its messages say `attr <name>`), to point the caret at it."""
    for name, token in attr_tokens.items():
        if f"attr {name} " in message or f"attr {name!r}" in message:
            return token
    return None


def _attr_arg(line: Line, op: OpDef, graphs: GraphTable, attrs: dict, tokens: dict) -> None:
    """`name=value`, checked against the op's schema where the schema decides how to read it."""
    name = line.next()
    line.expect("=", "'=' after the attr name")
    if name.value not in op.attr_map:
        raise line.error(f"{op.name} has no attr {name.value!r}", name,
                         f"one of its attrs: {', '.join(op.attr_map) or '(it has none)'}")
    if name.value in attrs:
        raise line.error(f"attr {name.value!r} is given twice", name, "each attr once")
    value_token = line.peek()
    value = read_value(line, graphs)
    is_dtype = op.attr_map[name.value].kind == "dtype"
    if isinstance(value, _Bare) and not (is_dtype and value in TORCH_DTYPES):
        expected = (f"a dtype: one of {', '.join(TORCH_DTYPES)}" if is_dtype
                    else f'a number, a quoted string ("{value}"), true, false or none')
        raise line.error(f"bad value {str(value)!r} for attr {name.value}", value_token, expected)
    if is_dtype and isinstance(value, str) and not isinstance(value, _Bare):
        raise line.error(f"attr {name.value} is a dtype, written bare", value_token, f"{name.value}={value}")
    attrs[name.value] = str(value) if isinstance(value, _Bare) else value
    tokens[name.value] = name


def read_node(line: Line, env: dict[str, Value], graphs: GraphTable) -> tuple[Node, list[Token]]:
    """`%a, %b = op(%x, attr=value, ...) : type_a, type_b`, checked by the registry's inference."""
    out_tokens = [line.expect("%", "a value name such as %x")]
    while line.accept(","):
        out_tokens.append(line.expect("%", "another output name"))
    line.expect("=", "'=' after the output names")
    op_token = line.expect("word", "an op name such as add")
    try:
        op = get_op(op_token.value)
    except GraphError as e:
        raise line.error(str(e), op_token, "a registered op (hoid.ir.all_ops())") from None
    line.expect("(", "'(' after the op name")
    operands: list[Value] = []
    attrs: dict[str, Any] = {}
    attr_tokens: dict[str, Token] = {}
    while not line.accept(")"):
        if operands or attrs:
            line.expect(",", "',' or ')'")
        token = line.peek()
        if token.kind == "%":
            if attrs:
                raise line.error("operand after an attr", token, "operands first, then attrs (name=value)")
            line.next()
            if token.value not in env:
                raise line.error(f"undefined value %{token.value}", token,
                                 "a value defined above (an input or an earlier node's output)")
            operands.append(env[token.value])
        elif token.kind == "word":
            _attr_arg(line, op, graphs, attrs, attr_tokens)
        else:
            raise line.error("expected an operand or an attr", token, "%name or name=value")
    line.expect(":", "':' and the output types")
    types = [read_type(line)]
    while line.accept(","):
        types.append(read_type(line))
    line.end()
    if len(types) != len(out_tokens):
        raise line.error(f"{len(out_tokens)} output names but {len(types)} types", types[0][1],
                         "one type per output name")
    try:
        inferred, attrs = infer_node(op.name, [v.type for v in operands], attrs)
    except GraphError as e:
        raise line.error(str(e), _column_of_attr(str(e), attr_tokens) or op_token,
                         f"a valid call of {op.name}({', '.join(op.operands)})") from None
    except Exception as e:  # a bug in the op's inference: still say where, and keep the cause
        raise line.error(f"{op.name}: type inference failed with {type(e).__name__}: {e}", op_token,
                         f"{op.name}'s inference to accept or refuse this call (a bug in the op)") from e
    if len(inferred) != len(out_tokens):
        raise line.error(f"{op.name} gives {len(inferred)} outputs, the line names {len(out_tokens)}",
                         out_tokens[0], f"{len(inferred)} output names")
    for (declared, token), want in zip(types, inferred, strict=True):
        if declared != want:
            raise line.error(f"declared type {declared} does not match the inferred type {want}", token,
                             f"the type {want}")
    outputs = tuple(Value(t.value, ty) for t, ty in zip(out_tokens, inferred, strict=True))
    return Node(op.name, tuple(operands), attrs, outputs), out_tokens


class GraphReader:
    """Reads the lines of one graph, from `graph @label` to `end`, into a `Graph`."""

    def __init__(self, header: Line, label: str, name: str, graphs: GraphTable):
        self.header, self.label, self.name, self.graphs = header, label, name, graphs
        self.inputs: list[GraphInput] = []
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.updates: dict[str, str] = {}
        self.env: dict[str, Value] = {}
        self.defined_at: dict[str, int] = {}
        self.states: dict[str, Line] = {}
        self.section = 0  # 0 inputs, 1 nodes, 2 outputs: a graph is written in that order

    def read(self, line: Line) -> Graph | None:
        """Consume one line; returns the finished graph on `end`."""
        first = line.peek()
        if first.kind == "word" and first.value in INPUT_KINDS:
            self._enter(line, 0, "inputs")
            self._input(line)
        elif first.kind == "%":
            self._enter(line, 1, "nodes")
            node, tokens = read_node(line, self.env, self.graphs)
            for value, token in zip(node.outputs, tokens, strict=True):
                self._define(line, value, token)
            self.nodes.append(node)
        elif first.kind == "word" and first.value == "output":
            self.section = 2
            self._output(line)
        elif first.kind == "word" and first.value == "end":
            line.next()
            line.end()
            return self._finish()
        elif first.kind == "word" and first.value == "graph":
            opened = self.header.number
            raise line.error(f"a graph starts inside graph @{self.label} (opened at line {opened}): "
                             "is its `end` missing?", first, "end before the next graph")
        else:
            raise line.error(f"unexpected {first.text!r} inside graph @{self.label}", first,
                             "input, weight, state, a node (%x = op(...) : type), output or end")
        return None

    def _enter(self, line: Line, section: int, what: str) -> None:
        if self.section > section:
            raise line.error(f"{what} must come before {'nodes' if self.section == 1 else 'outputs'}",
                             expected="inputs, then nodes, then outputs")
        self.section = section

    def _define(self, line: Line, value: Value, token: Token) -> None:
        if value.name in self.env:
            raise line.error(f"duplicate value name %{value.name} (first defined at line "
                             f"{self.defined_at[value.name]})", token, "a name not used before in this graph")
        self.env[value.name] = value
        self.defined_at[value.name] = line.number

    def _input(self, line: Line) -> None:
        kind = line.next().value
        token = line.expect("%", f"the {kind}'s name, such as %x")
        line.expect(":", "':' and the type")
        type_, _ = read_type(line)
        line.end()
        self._define(line, Value(token.value, type_), token)
        self.inputs.append(GraphInput(self.env[token.value], kind))
        if kind == "state":
            self.states[token.value] = line

    def _output(self, line: Line) -> None:
        line.next()
        token = line.expect("%", "the output value, such as %y")
        if token.value not in self.env:
            raise line.error(f"undefined value %{token.value}", token, "a value defined above in this graph")
        value = self.env[token.value]
        self.outputs.append(value)
        if line.accept("word", "updates"):
            while True:
                self._update(line, value, line.expect("%", "the state input it updates, such as %k_cache"))
                if not line.accept(","):
                    break
        line.end()

    def _update(self, line: Line, value: Value, state: Token) -> None:
        if state.value not in self.states:
            raise line.error(f"%{state.value} is not a state input of graph @{self.label}", state,
                             "a state declared with `state %name : type`")
        if state.value in self.updates:
            raise line.error(f"state %{state.value} is already updated by %{self.updates[state.value]}",
                             state, "one update per state")
        declared = self.env[state.value].type
        if not value.type.same_data_type(declared):
            raise line.error(f"state %{state.value} is {declared} but its update %{value.name} is "
                             f"{value.type}", state, f"an update of type {declared}")
        self.updates[state.value] = value.name

    def _finish(self) -> Graph:
        for state, line in self.states.items():
            if state not in self.updates:
                raise line.error(f"state %{state} has no update", line.tokens[1],
                                 f"a line `output %new_value updates %{state}` in graph @{self.label}")
        graph = Graph(self.name, self.inputs, self.nodes, self.outputs, self.updates)
        try:
            return graph.validate()  # a safety net: the checks above should have caught everything
        except GraphError as e:
            raise self.header.error(f"graph @{self.label} is invalid: {e}", self.header.tokens[0]) from None


def parse_document(text: str) -> Document:
    """Parse a whole document; raises `hoid.ParseError` on the first problem."""
    graphs = GraphTable()
    weights_file: str | None = None
    reader: GraphReader | None = None
    header_seen = False
    last: Line | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = Line(number, raw)
        if line.empty:
            continue
        last = line
        if not header_seen:
            _read_header(line)
            header_seen = True
        elif reader is not None:
            graph = reader.read(line)
            if graph is not None:
                graphs.graphs[reader.label] = (graph, reader.header)
                reader = None
        elif line.accept("word", "graph"):
            reader = _open_graph(line, graphs)
        elif not graphs.graphs and line.accept("word", "weights"):
            weights_file = line.expect("string", 'the weights file name, such as "model.safetensors"').value
            line.end()
        else:
            raise line.error(f"unexpected {line.peek().text!r} between graphs", expected="graph @name")
    if last is None:
        raise ParseError("the document is empty", line=1, column=1,
                         expected=f"the header `hoid {FORMAT_VERSION}`")
    if reader is not None:
        raise ParseError(f"the document ends inside graph @{reader.label} (opened at line "
                         f"{reader.header.number})", line=last.number, column=len(last.text) + 1,
                         text=last.text, expected="end")
    if not graphs.graphs:
        raise last.error("the document has no graph", last.tokens[-1], "graph @name ... end")
    *bodies, main = graphs.graphs
    for label in bodies:
        if label not in graphs.used:
            raise graphs.graphs[label][1].error(
                f"graph @{label} is never used; the last graph (@{main}) is the main one and earlier graphs "
                "are kernel bodies", expected="every graph but the last to be used by a kernel node")
    return Document(graphs.graphs[main][0], weights_file)


def _read_header(line: Line) -> None:
    if not line.accept("word", "hoid"):
        hint = " (to read a file, use hoid.load(path))" if line.text.strip().endswith(".hoid") else ""
        raise line.error(f"missing header{hint}", expected=f"the first line to be `hoid {FORMAT_VERSION}`")
    version = line.expect("int", f"the format version, such as {FORMAT_VERSION}")
    line.end()
    if version.value > FORMAT_VERSION:
        raise line.error(f"the document is format version {version.value}; this hoid reads versions up to "
                         f"{FORMAT_VERSION}", version,
                         f"version {FORMAT_VERSION} or lower (upgrade hoid to read this)")
    if version.value < 1:
        raise line.error(f"bad format version {version.value}", version, f"1 to {FORMAT_VERSION}")


def _open_graph(line: Line, graphs: GraphTable) -> GraphReader:
    label = line.expect("@", "the graph's label, such as @main")
    name = label.value
    if line.accept("word", "name"):
        line.expect("=", "'=' after name")
        name = line.expect("string", 'the graph\'s name as a string, such as "body"').value
    line.end()
    if label.value in graphs.graphs:
        first = graphs.graphs[label.value][1].number
        raise line.error(f"graph @{label.value} is already defined at line {first}", label,
                         "a label not used before in this document")
    return GraphReader(line, label.value, name, graphs)
