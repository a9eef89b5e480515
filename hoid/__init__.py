"""hoid: an ML compiler whose optimizer is a search over an e-graph.

Importing hoid must not import egglog, openai or CuTe DSL: they load lazily where used.
"""

from .errors import ExportError, GraphError, HoidError, InputError, NotAGraphError, ParseError, UnsupportedOpError
from .ir import Graph, GraphBuilder, Node, TensorType, Value, register_op, run
from .ir.from_torch import from_torch
from .ir.io import load, save
from .ir.text import dumps, loads

__version__ = "0.1.0"

__all__ = ["ExportError", "Graph", "GraphBuilder", "GraphError", "HoidError", "InputError", "Node",
           "NotAGraphError", "ParseError", "TensorType", "UnsupportedOpError", "Value", "register_op", "run"]
__all__ += ["dumps", "load", "loads", "save"]  # the .hoid document (hoid/ir/text.py, hoid/ir/io.py)
__all__ += ["from_torch"]  # import a PyTorch module (hoid/ir/from_torch/)

__all__ += ["CompiledGraph", "compile"]  # the runtime (hoid/runtime/), loaded on first use


def __getattr__(name: str):
    if name in ("compile", "CompiledGraph"):
        from . import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'hoid' has no attribute {name!r}")


from . import search  # noqa: E402  the e-graph search (hoid/search/): egglog loads only when a search runs

__all__ += ["search"]

__all__ += ["Budget", "optimize"]  # the loop (hoid/agent/), loaded on first use: importing hoid stays light


def __getattr__(name: str):
    if name in ("Budget", "optimize"):
        from . import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'hoid' has no attribute {name!r}")
