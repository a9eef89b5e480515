"""The IR: types, values, nodes, graphs, the op registry, the builder and the reference interpreter."""

from .analysis import weight_only_values
from .builder import GraphBuilder
from .dtypes import dtype_name
from .graph import Graph, GraphInput, Node, Value, expect_graph
from .interpreter import run
from .ops.kernel import KernelImpl
from .region import Region, extract_region
from .registry import Attr, OpDef, all_ops, get_op, register_op
from .types import TensorType

__all__ = ["Attr", "Graph", "GraphBuilder", "GraphInput", "KernelImpl", "Node", "OpDef", "Region", "TensorType",
           "Value", "all_ops", "dtype_name", "expect_graph", "extract_region", "get_op", "register_op", "run",
           "weight_only_values"]

# Last: the importer builds on everything above. A user's lowering for an ATen op hoid lacks.
from .from_torch.aten_table import register_lowering  # noqa: E402

__all__ += ["register_lowering"]
