"""The source an exported package needs from hoid's kernel modules, and nothing else.

A library kernel's module holds its launch beside its spec, its pattern and its examples, which import
hoid's IR and the kernel contract. The exported package may not import hoid, so it gets a pruned copy of
each module: the top-level statements that define what the launch uses, transitively, across hoid's
modules (`_triton_compile`'s launch wrapper, a shared row kernel in another module, `hoid.errors`).
Relative and `hoid.` imports become imports of the copies; everything else (torch, triton, math) stays.
What is copied is hoid's own text, statement by statement, so the package runs the code that was
measured; nothing here rewrites a kernel.

Annotations: a copy keeps its module's `from __future__ import annotations` or its absence. Where the
module has it, annotations stay strings (Triton reads `tl.constexpr` as text) and are not followed, which
would drag in `TensorType` and the IR. Where it does not, they are evaluated, so they are followed: CuTe
DSL evaluates a `@cute.jit` function's annotations (`cute.Tensor`) in the scope that defined them, which
postponed strings would move to the module's globals, where `cute` is not.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass, field

from ..errors import ExportError


@dataclass
class _Module:
    name: str
    tree: ast.Module
    is_package: bool
    postponed: bool  # `from __future__ import annotations`: annotations are strings, not followed
    defines: dict[str, int] = field(default_factory=dict)  # top-level name -> statement index
    needed: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)  # needed names (an import statement keeps only these)


class SourceSet:
    """Pruned copies of hoid modules, named for the package: `need(module, name)` pulls `name` and what it
    uses; `files()` gives file name -> text. `local(module)` is the copy's module name in the package."""

    def __init__(self, prefix: str = "hoid"):
        self.prefix = prefix
        self.modules: dict[str, _Module] = {}
        self.local_names: dict[str, str] = {}
        self.patches: dict[str, list[tuple[str, str]]] = {}

    def local(self, module: str) -> str:
        if module not in self.local_names:
            base = module.rsplit(".", 1)[-1].lstrip("_") or "module"
            name = base
            while name in self.local_names.values():  # two hoid modules of one name: the path tells them apart
                name = module.replace(".", "_")
            self.local_names[module] = name
        return self.local_names[module]

    def patch(self, module: str, old: str, new: str) -> None:
        """Replace `old` by `new` in the copy of `module` (it must occur: a drifted helper fails loudly)."""
        self.patches.setdefault(module, []).append((old, new))

    def need(self, module: str, name: str) -> None:
        mod = self._module(module)
        if name not in mod.defines:
            if mod.is_package:  # `from . import submodule`
                self._module(f"{module}.{name}")
                return
            raise ExportError(f"export: {module} defines no top-level {name!r} that a kernel uses")
        index = mod.defines[name]
        if name in mod.names:
            return
        mod.names.add(name)
        stmt = mod.tree.body[index]
        if index in mod.needed and not isinstance(stmt, ast.ImportFrom):
            return
        mod.needed.add(index)
        if isinstance(stmt, ast.ImportFrom) and self._is_hoid(module, stmt):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    target = self._resolve(module, mod.is_package, stmt)
                    self._need_import(target, alias.name)
            return
        for used in _free_names(stmt, annotations=not mod.postponed):
            head, _, attr = used.partition(".")
            if head in mod.defines:
                self.need(module, head)
                sub = self._submodule_of(mod, head)
                if sub is not None and attr:
                    self.need(sub, attr)

    def _need_import(self, target: str, name: str) -> None:
        try:
            importlib.import_module(f"{target}.{name}")
            is_sub = True
        except ImportError:
            is_sub = False
        if is_sub and name not in self._module(target).defines:
            self._module(f"{target}.{name}")
        else:
            self.need(target, name)

    def _submodule_of(self, mod: _Module, head: str) -> str | None:
        stmt = mod.tree.body[mod.defines[head]]
        if isinstance(stmt, ast.ImportFrom) and self._is_hoid(mod.name, stmt):
            target = self._resolve(mod.name, mod.is_package, stmt)
            alias = next(a for a in stmt.names if (a.asname or a.name) == head)
            full = f"{target}.{alias.name}"
            if full in self.modules or _is_module(full):
                self._module(full)
                return full
        return None

    def _is_hoid(self, module: str, stmt: ast.ImportFrom) -> bool:
        return stmt.level > 0 or (stmt.module or "").split(".")[0] == self.prefix

    def _resolve(self, module: str, is_package: bool, stmt: ast.ImportFrom) -> str:
        if stmt.level == 0:
            return stmt.module
        parts = module.split(".") if is_package else module.split(".")[:-1]
        base = parts[:len(parts) - (stmt.level - 1)]
        return ".".join(base + ([stmt.module] if stmt.module else []))

    def _module(self, name: str) -> _Module:
        if name not in self.modules:
            module = importlib.import_module(name)
            tree = ast.parse(inspect.getsource(module))
            postponed = any(isinstance(s, ast.ImportFrom) and s.module == "__future__"
                            and any(a.name == "annotations" for a in s.names) for s in tree.body)
            mod = _Module(name, tree, hasattr(module, "__path__"), postponed)
            for i, stmt in enumerate(tree.body):
                for defined in _defined_names(stmt):
                    mod.defines.setdefault(defined, i)
            self.modules[name] = mod
            self.local(name)
        return self.modules[name]

    def files(self) -> dict[str, str]:
        out = {}
        for name, mod in self.modules.items():
            lines = [f'"""Pruned from {name}: the statements the exported kernels use (see hoid.export)."""',
                     *(["", "from __future__ import annotations"] if mod.postponed else [])]
            for i, stmt in enumerate(mod.tree.body):
                if i in mod.needed and (code := self._emit(mod, stmt)):
                    lines.append(code)
            text = "\n\n".join(lines) + "\n"
            for old, new in self.patches.get(name, []):
                if old not in text:
                    raise ExportError(f"export: {name} no longer holds {old!r}; update hoid/runtime/export*.py")
                text = text.replace(old, new)
            out[self.local(name) + ".py"] = text
        return out

    def _emit(self, mod: _Module, stmt: ast.stmt) -> str:
        if isinstance(stmt, ast.ImportFrom):
            if stmt.module == "__future__":
                return ""
            if self._is_hoid(mod.name, stmt):
                target = self._resolve(mod.name, mod.is_package, stmt)
                parts = []
                for a in stmt.names:
                    if (a.asname or a.name) not in mod.names:
                        continue
                    full = f"{target}.{a.name}"
                    if full in self.modules:
                        parts.append(f"from . import {self.local(full)} as {a.asname or a.name}")
                    else:
                        parts.append(f"from .{self.local(target)} import {a.name} as {a.asname or a.name}")
                return "\n".join(parts)
        # whole lines, from the first decorator (a def's own line number is that of `def`)
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        return "\n".join(_source_lines(mod)[first - 1:stmt.end_lineno])


def _source_lines(mod: _Module) -> list[str]:
    return inspect.getsource(importlib.import_module(mod.name)).splitlines()


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def _defined_names(stmt: ast.stmt) -> set[str]:
    """Top-level names a statement binds (a `try` or `if` around imports binds what its branches do)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    names = set()
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for t in targets:
            names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        # `Target.H200 = ...` extends a name defined elsewhere: keep it with that name
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                names.add(t.value.id)
    if isinstance(stmt, (ast.Try, ast.If)):
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                names |= _defined_names(child)
            for grand in getattr(child, "body", []):
                if isinstance(grand, ast.stmt):
                    names |= _defined_names(grand)
    return names


def _free_names(stmt: ast.stmt, annotations: bool = False) -> set[str]:
    """Every name a statement reads (over-approximated: locals too), and `name.attr` for attribute reads,
    annotations included only where `annotations` (a module that evaluates them)."""
    skip = set() if annotations else _annotation_nodes(stmt)
    names = set()
    for node in ast.walk(stmt):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and id(node.value) not in skip:
            names.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _annotation_nodes(stmt: ast.stmt) -> set[int]:
    """The ids of every AST node inside the annotations of `stmt` (arguments, returns, annotated names)."""
    skip = set()
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if a is not None and a.annotation is not None:
                    skip |= {id(n) for n in ast.walk(a.annotation)}
            if node.returns is not None:
                skip |= {id(n) for n in ast.walk(node.returns)}
        if isinstance(node, ast.AnnAssign):
            skip |= {id(n) for n in ast.walk(node.annotation)}
    return skip
