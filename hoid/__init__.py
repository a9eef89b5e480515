"""hoid: an ML compiler whose optimizer is a search over an e-graph.

Importing hoid must not import egglog, openai or CuTe DSL: they load lazily where used.
"""

from .errors import (
    ExportError,
    GraphError,
    HoidError,
    InputError,
    NotAGraphError,
    ParseError,
    UnknownDeviceError,
    UnsupportedOpError,
)
from .ir import Graph, GraphBuilder, Node, TensorType, Value, register_op, run
from .ir.from_torch import from_torch
from .ir.text import dumps, loads

__version__ = "0.1.0"

__all__ = ["ExportError", "Graph", "GraphBuilder", "GraphError", "HoidError", "InputError", "Node",
           "NotAGraphError", "ParseError", "TensorType", "UnknownDeviceError", "UnsupportedOpError", "Value",
           "register_op", "run"]
__all__ += ["dumps", "load", "loads", "save"]  # the .hoid document (hoid/ir/text.py, hoid/ir/io.py)
__all__ += ["from_torch"]  # import a PyTorch module (hoid/ir/from_torch/)

from . import search  # noqa: E402  the e-graph search (hoid/search/): egglog loads only when a search runs

__all__ += ["search"]

# Loaded on first use, so that importing hoid stays light: public name -> the package that defines it.
_LAZY = {
    "compile": "runtime", "CompiledGraph": "runtime", "export": "runtime",  # the runtime (hoid/runtime/)
    "optimize": "agent", "Budget": "agent",  # the loop (hoid/agent/)
    # hoid.ir.io's save/load with the kernel files beside the document; lazy, so hoid.ir never loads kernels
    "save": "kernels.documents", "load": "kernels.documents",
}
__all__ += sorted(set(_LAZY) - set(__all__))


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'hoid' has no attribute {name!r}")
