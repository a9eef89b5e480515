"""The static structure check of kernel source: what importing it would run, found without running it.

Kernel source may hold imports (of `ALLOWED_IMPORTS` only), functions, and constants. Anything else at
the top level (a call, a loop, an `if`, a `with`, a class) runs at import, before any check could see
its effect; so do decorators, default values and annotations, which are allowed only when they are
static (a literal, a dotted name) or come from an imported module (`@triton.jit`). `triton.autotune` is
refused: hoid tunes declared `PARAMS` through its measurement layer.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ALLOWED_IMPORTS = ("torch", "triton", "cutlass", "math", "functools", "typing", "__future__")


@dataclass(frozen=True)
class SourceProblem:
    """A problem at a line and column (1-based; 0 where the whole source is meant), with the fix."""

    line: int
    column: int
    message: str


def check_source(text: str, entry: str) -> tuple[ast.Module | None, list[SourceProblem], set[str]]:
    """(the parsed module or None, every problem found, root names of the modules it imports)."""
    if not isinstance(text, str):
        return None, [SourceProblem(0, 0, f"source must be text, got {type(text).__name__}")], set()
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return None, [SourceProblem(e.lineno or 0, e.offset or 0, f"syntax error: {e.msg}")], set()
    problems: list[SourceProblem] = []

    def refuse(node: ast.AST, message: str) -> None:
        line, column = getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1
        problems.append(SourceProblem(line, column, message))

    imports: set[str] = set()
    for node in ast.walk(tree):  # imports anywhere, function bodies included
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            root = name.split(".")[0]
            if isinstance(node, ast.ImportFrom) and node.level:
                refuse(node, "relative import: kernel source is a module of its own; import absolute names")
            elif root not in ALLOWED_IMPORTS:
                allowed = ", ".join(ALLOWED_IMPORTS)
                refuse(node, f"import of {name!r}: kernel source may import only {allowed}")
            imports.add(root)
        autotune = (isinstance(node, ast.Attribute) and node.attr == "autotune"
                    or isinstance(node, ast.Name) and node.id == "autotune"
                    or isinstance(node, ast.ImportFrom) and any(a.name == "autotune" for a in node.names))
        if autotune:
            refuse(node, "triton.autotune: declare PARAMS = {name: (choices, ...)} instead; hoid tunes them "
                         "through hoid.measure.tune, so choices are cached and reported")
    aliases = _module_aliases(tree)
    functions = {}
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
            for problem_node, message in _import_time_parts(node, aliases):
                refuse(problem_node, message)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            pass
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and index == 0:
            pass  # the module docstring
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            if value is not None and not _is_static(value):
                refuse(node, "a top-level assignment of a computed value runs at import; assign a literal "
                             "(or a module attribute such as torch.float16) or compute it inside a function")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(t, ast.Name) for t in targets):
                refuse(node, "a top-level assignment may only bind plain names")
            if isinstance(node, ast.AnnAssign) and not _is_static_annotation(node.annotation):
                refuse(node.annotation, f"annotation {ast.unparse(node.annotation)!r} is computed at import; "
                                        "annotate with a name (or a subscript of names and literals)")
        else:
            kind = type(node).__name__.replace("AsyncFunctionDef", "async def").replace("ClassDef", "class")
            refuse(node, f"top-level {kind} statement runs at import, before any check; "
                         "kernel source may hold only imports, functions and constants")
    if entry not in functions:
        defined = ", ".join(sorted(functions)) or "none"
        refuse(tree, f"no top-level function {entry!r} (the entry); functions defined: {defined}")
    elif any(_decorator_name(d).endswith("jit") for d in functions[entry].decorator_list):
        refuse(functions[entry], f"the entry {entry!r} is a jit kernel; the entry must be the host function "
                                 "that launches it into the caller's output tensors")
    return tree, problems, imports


def _module_aliases(tree: ast.Module) -> set[str]:
    """Names the top-level imports bind."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _import_time_parts(fn: ast.FunctionDef, aliases: set[str]):
    """What of a `def` runs at import: decorators (allowed when taken from an imported module, such as
    `triton.jit`), default values and annotations (allowed when static). Yields (node, problem)."""
    for decorator in fn.decorator_list:
        root = decorator.func if isinstance(decorator, ast.Call) else decorator
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in aliases):
            yield decorator, (f"decorator {ast.unparse(decorator)!r} of {fn.name} does not come from an "
                              "imported module; decorators run at import")
    args = fn.args
    for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        if not _is_static(default):
            yield default, (f"default value {ast.unparse(default)!r} of {fn.name} is computed at import; "
                            "use a literal")
    annotations = [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.annotation]
    for annotation in [*annotations, *([fn.returns] if fn.returns else [])]:
        if not _is_static_annotation(annotation):
            yield annotation, f"annotation {ast.unparse(annotation)!r} of {fn.name} is computed at import"


def _is_static(node: ast.expr) -> bool:
    """A literal, or a dotted name (`tl.constexpr`, `torch.float16`): nothing that calls or computes."""
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return isinstance(node, (ast.Name, ast.Attribute)) and all(
            isinstance(n, (ast.Name, ast.Attribute, ast.Load)) for n in ast.walk(node))


def _is_static_annotation(node: ast.expr) -> bool:
    """Static (`_is_static`), or a subscript (`tuple[int, ...]`, `tl.tensor[tl.float16]`) whose value and
    slice are themselves static annotations: a subscript of a call would run the call at import."""
    if _is_static(node):
        return True
    if isinstance(node, ast.Subscript):
        return _is_static_annotation(node.value) and _is_static_annotation(node.slice)
    if isinstance(node, ast.Tuple):
        return all(_is_static_annotation(e) for e in node.elts)
    return False


def _decorator_name(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(node)


def literal_constants(tree: ast.Module) -> dict:
    """The module's top-level UPPERCASE names assigned literal values (`PARAMS`, `PATTERN`, ...), read
    without running anything."""
    found = {}
    for node in tree.body:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None)
        if isinstance(target, ast.Name):
            name = target.id
            if name.isupper():
                try:
                    found[name] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    pass  # a dotted name such as torch.float16: a constant, but not data we can read
    return found
