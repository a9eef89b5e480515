"""Turn an `ExportedProgram` (functional ATen IR) into a hoid `Graph`.

Inputs are declared in this order, which is the order `hoid.run(graph, ...)` takes them in:
  1. the module's tensor arguments, in the order torch.export flattened them (positional args,
     then kwargs); non-tensor arguments were specialized by export and are not inputs;
  2. state: each buffer the module mutates (a KV cache) and each argument it mutates in place,
     named by its module path, in the module's buffer order;
then weights (`kind="weight"`, bound to the graph): parameters, buffers that are only read and
lifted tensor constants, each named by its module path (`model.layers.0.mlp.up_proj.weight`); a
tensor tied to several paths (an LM head sharing the embedding) is one weight, named by the first.

Outputs: the leaves of the module's result in torch's pytree order (see `outputs.py`), then one
update per state input, in state order (`graph.state_updates` maps each state to its update).
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from ...errors import GraphError
from ..builder import GraphBuilder
from ..dtypes import dtype_name
from ..graph import Graph, Value
from ..types import TensorType
from .aten_table import lowering_for
from .emitter import Emitter, NotLowerable
from .unsupported import Unsupported

MISSING = object()  # the result of a node that could not be lowered (already reported)


def bind_arguments(target, args, kwargs) -> dict:
    """An ATen call's arguments by schema name, defaults filled in."""
    bound = {}
    positional = list(args)
    for arg in target._schema.arguments:
        if positional and not arg.kwarg_only:
            bound[arg.name] = positional.pop(0)
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


def _tensor_type(tensor: torch.Tensor, what: str) -> TensorType:
    try:
        return TensorType(tuple(tensor.shape), dtype_name(tensor.dtype))
    except ValueError as e:
        raise GraphError(f"{what}: {e}") from None


class _Converter:
    def __init__(self, ep: ExportedProgram, name: str):
        self.ep = ep
        self.builder = GraphBuilder(name)
        self.em = Emitter(self.builder)
        self.env: dict[str, object] = {}  # FX node name -> Value, tuple of Values, None or MISSING
        self.unsupported = Unsupported()

    # --- inputs ----------------------------------------------------------------------------------
    def declare_inputs(self) -> None:
        sig = self.ep.graph_signature
        mutated = set(sig.buffers_to_mutate.values()) | set(sig.user_inputs_to_mutate.values())
        placeholders = {n.name: n for n in self.ep.graph.nodes if n.op == "placeholder"}
        specs = sig.input_specs
        user = [s for s in specs if s.kind == InputKind.USER_INPUT]
        state = [s for s in specs if s.kind == InputKind.BUFFER and s.target in mutated]
        weight_kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
        weights = [s for s in specs if s.kind in weight_kinds and s.target not in mutated]
        for spec in user:
            fake = placeholders[spec.arg.name].meta.get("val")
            if not isinstance(fake, torch.Tensor):
                continue  # a Python value export specialized the program for
            kind = "state" if spec.arg.name in mutated else "input"
            t = _tensor_type(fake, f"input {spec.arg.name}")
            declare = self.builder.state if kind == "state" else self.builder.input
            self.env[spec.arg.name] = declare(self.em.claim(spec.arg.name), t.shape, t.dtype)
        for spec in state:
            t = _tensor_type(self._tensor_of(spec), f"buffer {spec.target}")
            self.env[spec.arg.name] = self.builder.state(self.em.claim(spec.target), t.shape, t.dtype)
        declared: dict[int, Value] = {}  # id(tensor) -> its weight input
        for spec in weights:
            tensor = self._tensor_of(spec)
            if id(tensor) in declared:  # tied weights (lm_head = embed_tokens): one input, first name
                self.env[spec.arg.name] = declared[id(tensor)]
                continue
            t = _tensor_type(tensor, f"weight {spec.target}")
            declared[id(tensor)] = self.env[spec.arg.name] = self.builder.weight(
                self.em.claim(spec.target), t.shape, t.dtype, tensor.detach().contiguous())
        for spec in specs:
            if spec.kind in (InputKind.CUSTOM_OBJ, InputKind.TOKEN):
                raise GraphError(f"input {spec.arg.name} is a {spec.kind.name.lower()} (a script object or "
                                 "an effect token); hoid imports tensor programs only")

    def _tensor_of(self, spec) -> torch.Tensor:
        ep = self.ep
        tensor = ep.state_dict.get(spec.target)
        if tensor is None:
            tensor = ep.constants.get(spec.target)
        if not isinstance(tensor, torch.Tensor):
            raise GraphError(f"{spec.kind.name.lower()} {spec.target}: export recorded no tensor for it")
        return tensor

    # --- nodes -----------------------------------------------------------------------------------
    def _value_of(self, arg):
        """An FX argument with every FX node replaced by its hoid value (MISSING propagates)."""
        if isinstance(arg, torch.fx.Node):
            return self.env[arg.name]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self._value_of(a) for a in arg)
        return arg

    @staticmethod
    def _has_missing(value) -> bool:
        if value is MISSING:
            return True
        return isinstance(value, (list, tuple)) and any(_Converter._has_missing(v) for v in value)

    def _fail(self, node: torch.fx.Node, reason: str) -> None:
        """Record `node` as not importable and carry on, so that one error lists every such node."""
        self.env[node.name] = MISSING
        self.unsupported.add(node, reason)

    def lower_node(self, node: torch.fx.Node) -> None:
        if node.op == "get_attr":
            return self._fail(node, "a submodule or attribute (control flow such as torch.cond)")
        if node.target is operator.getitem:
            self.env[node.name] = self._getitem(node)
            return
        lower = lowering_for(node.target)
        if lower is None:
            return self._fail(node, "no lowering to hoid ops")
        args, kwargs = self._value_of(tuple(node.args)), self._value_of(dict(node.kwargs))
        if self._has_missing(args) or self._has_missing(list(kwargs.values())):
            self.env[node.name] = MISSING  # an input could not be imported; that one is reported
            return
        self.em.node = node
        try:
            result = lower(self.em, **bind_arguments(node.target, args, kwargs))
            self._check_result(node, result)
        except (NotLowerable, GraphError) as e:
            return self._fail(node, str(e))
        except Exception as e:  # a lowering that crashes is a bug; list it with the rest, do not stop
            return self._fail(node, f"the lowering failed with {type(e).__name__}: {e} (a bug in the "
                                    "importer: please report it)")
        self.env[node.name] = result

    def _getitem(self, node: torch.fx.Node):
        source, i = node.args
        values = self.env[source.name]
        if values is MISSING:
            return MISSING
        if values[i] is None:
            self.unsupported.add(source, f"its output {i} is used, and hoid computes only the others",
                                 count=False)
            return MISSING
        return values[i]

    def _check_result(self, node: torch.fx.Node, result) -> None:
        """Every lowered value must have the shape and dtype torch recorded: a disagreement is a bug
        in a lowering or an op's inference, and importing it would compute something else."""
        fakes = node.meta.get("val")
        values = result if isinstance(result, tuple) else (result,)
        fakes = fakes if isinstance(fakes, (tuple, list)) else (fakes,)
        for value, fake in zip(values, fakes, strict=True):
            if not isinstance(value, Value) or not isinstance(fake, torch.Tensor):
                continue
            expected = TensorType(tuple(fake.shape), dtype_name(fake.dtype))
            if not value.type.same_data_type(expected):
                raise NotLowerable(f"hoid's lowering gives {value.type.contiguous()} where torch gives "
                                   f"{expected} (a bug in the importer: please report it)")

    # --- outputs ---------------------------------------------------------------------------------
    def build(self, module_name: str) -> Graph:
        output_node = next(n for n in self.ep.graph.nodes if n.op == "output")
        returned = list(output_node.args[0])
        outputs, updates = [], {}
        for spec, arg in zip(self.ep.graph_signature.output_specs, returned, strict=True):
            value = self.env.get(arg.name, MISSING) if isinstance(arg, torch.fx.Node) else arg
            if spec.kind == OutputKind.USER_OUTPUT:
                if not isinstance(value, Value) and value is not MISSING:
                    raise GraphError(f"output {len(outputs)} of {module_name} is {value!r}, not a tensor; "
                                     "hoid graphs return tensors only")
                outputs.append(value)
            elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
                updates[spec.target] = value
            else:
                raise GraphError(f"{module_name}: output kind {spec.kind.name} (training outputs are not "
                                 "imported)")
        self.unsupported.raise_if_any(module_name)
        return self.builder.build(*outputs, updates=self._state_updates(updates))

    def _state_updates(self, updates: dict[str, Value]) -> dict[Value, Value]:
        """State input value -> the value that updates it, from export's mutation targets."""
        sig = self.ep.graph_signature
        placeholder_of = {s.target: s.arg.name for s in sig.input_specs if s.kind == InputKind.BUFFER}
        placeholder_of.update({s.arg.name: s.arg.name for s in sig.input_specs
                               if s.kind == InputKind.USER_INPUT})
        return {self.env[placeholder_of[target]]: value for target, value in updates.items()}


def convert(ep: ExportedProgram, name: str) -> Graph:
    """The hoid graph of an exported program whose ops are all in the ATen table (else
    `hoid.UnsupportedOpError` listing every one that is not)."""
    converter = _Converter(ep, name)
    converter.declare_inputs()
    for node in ep.graph.nodes:
        if node.op in ("call_function", "get_attr"):
            converter.lower_node(node)
    return converter.build(name)
