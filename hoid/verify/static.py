"""The static pass: refuse source that uses constructs an honest kernel has no need for.

Run before anything executes, over the candidate's source (the text of a source candidate, or the
source `inspect` finds for a callable and for the functions of its module that it calls). Each finding
names the line, the construct and why it is refused:

- try/except (a fallback that swaps a failing fast path for a slow correct one, or hides an error);
- threads, processes and async work (work that outlives the call, or races the checker);
- extra CUDA streams (work the checker's synchronisation does not wait for);
- assignments into modules (`torch.allclose = ...`, `setattr(torch, ...)`): patching torch, hoid or the
  synchronisation;
- frame, `gc` and `inspect` access, `globals()`, `__builtins__`: reading the checker's state, such as the
  reference or its results;
- `exec`, `eval`, `compile`, `__import__`, `importlib`: code this pass cannot see.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass

REFUSED_MODULES = {
    "threading": "starts threads",
    "_thread": "starts threads",
    "concurrent": "starts threads or processes",
    "multiprocessing": "starts processes",
    "subprocess": "starts processes",
    "asyncio": "runs async work",
    "gc": "reads the garbage collector (the checker's objects)",
    "inspect": "inspects frames and objects",
    "importlib": "imports code this pass cannot see",
    "builtins": "reaches into builtins",
}
REFUSED_CALLS = {
    "exec": "runs code this pass cannot see",
    "eval": "runs code this pass cannot see",
    "compile": "compiles code this pass cannot see",
    "__import__": "imports code this pass cannot see",
    "globals": "reads module globals (the checker's state)",
    "locals": "reads frame locals",
    "vars": "reads an object's or frame's namespace",
    "setattr": "sets attributes by name (patching)",
    "delattr": "deletes attributes by name (patching)",
}
REFUSED_ATTRS = {
    "_getframe": "reads the call stack",
    "f_back": "walks the call stack",
    "f_locals": "reads frame locals",
    "f_globals": "reads frame globals",
    "tb_frame": "reads a frame from a traceback",
    "gi_frame": "reads a frame",
    "cr_frame": "reads a frame",
    "__globals__": "reads a function's globals",
    "__builtins__": "reaches builtins",
    "__subclasses__": "enumerates classes",
    "__dict__": "reads or patches a namespace",
    "Stream": "creates an extra CUDA stream",
    "stream": "switches CUDA streams",
    "set_stream": "switches CUDA streams",
    "ExternalStream": "uses an extra CUDA stream",
    "fork": "starts a process",
}


@dataclass(frozen=True)
class Finding:
    line: int
    construct: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.construct} ({self.why})"


class _Scanner(ast.NodeVisitor):
    def __init__(self):
        self.findings: list[Finding] = []
        self.modules: set[str] = set()  # names bound to modules (scan() adds every import's before visiting)

    def add(self, node: ast.AST, construct: str, why: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), construct, why))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._imported(node, node.module or "")
        for alias in node.names:
            self._imported(node, f"{node.module}.{alias.name}")

    def _imported(self, node: ast.AST, name: str) -> None:
        root = name.split(".")[0]
        if root in REFUSED_MODULES:
            self.add(node, f"import {name}", REFUSED_MODULES[root])
        if name in ("sys._getframe", "os.fork"):
            self.add(node, f"import {name}", "reads the call stack or starts a process")

    def _try(self, node) -> None:
        if node.handlers:
            self.add(node, "try/except", "a fallback that can hide a failing fast path or an error")
        self.generic_visit(node)

    visit_Try = _try
    visit_TryStar = _try

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name in REFUSED_CALLS:
            self.add(node, f"{name}()", REFUSED_CALLS[name])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "suppress":
            self.add(node, "contextlib.suppress", "swallows exceptions, like try/except")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in REFUSED_ATTRS:
            self.add(node, f".{node.attr}", REFUSED_ATTRS[node.attr])
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.add(node, "__builtins__", REFUSED_ATTRS["__builtins__"])

    def _targets(self, node, targets) -> None:
        for target in targets:
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if target is not root and isinstance(root, ast.Name) and root.id in self.modules:
                self.add(node, f"assignment to {ast.unparse(target)}", "patches a module (torch, hoid, ...)")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node, node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets(node, [node.target])

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node, node.targets)


def scan(source: str, *, modules: set[str] = frozenset()) -> list[Finding]:
    """Every refused construct in `source`, in line order. `modules`: names already bound to modules
    where the source runs (for a function read out of its module: the module's imports)."""
    tree = ast.parse(textwrap.dedent(source))
    scanner = _Scanner()
    scanner.modules |= set(modules)
    # Imports first, wherever they stand, so that assignments above them are judged too.
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            scanner.modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
    scanner.visit(tree)
    return sorted(set(scanner.findings), key=lambda f: f.line)


def _function(f) -> types.FunctionType | None:
    """The plain Python function behind a callable: through partials, bound methods, decorators that
    keep `__wrapped__`, and `triton.JITFunction` (whose `.fn` is the function it compiles)."""
    if isinstance(f, functools.partial):
        f = f.func
    f = getattr(f, "__func__", f)
    f = getattr(f, "fn", f)
    f = inspect.unwrap(f) if callable(f) else f
    return f if isinstance(f, types.FunctionType) else None


def callable_sources(fn: Callable, *, depth: int = 3) -> tuple[list[tuple[str, str]], list[str]]:
    """The sources the static pass reads for a callable: its own, and those of the plain functions of
    its module it calls (to `depth` levels). Returns ([(qualified name, source)], [unreadable names])."""
    seen: set[int] = set()
    found: list[tuple[str, str]] = []
    unreadable: list[str] = []

    def visit(f: types.FunctionType, level: int) -> None:
        seen.add(id(f))
        try:
            found.append((f"{f.__module__}.{f.__qualname__}", inspect.getsource(f)))
        except (OSError, TypeError):
            unreadable.append(f.__qualname__)
            return
        if level == depth:
            return
        for name in _called_names(f.__code__):
            callee = _function(f.__globals__.get(name))
            if callee is not None and callee.__module__ == f.__module__ and id(callee) not in seen:
                visit(callee, level + 1)

    top = _function(fn)
    if top is None:
        unreadable.append(getattr(fn, "__qualname__", type(fn).__qualname__))
    else:
        visit(top, 0)
    return found, unreadable


def _called_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _called_names(const)
    return names


def module_names(fn: Callable) -> set[str]:
    """Names bound to modules in the globals of `fn` (so `torch.x = ...` in its body reads as a patch)."""
    namespace = getattr(_function(fn), "__globals__", {})
    return {name for name, value in namespace.items() if isinstance(value, types.ModuleType)}
