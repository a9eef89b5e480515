"""A kernel's version: a hash of the code its launch runs, so that nothing cached under it outlives that code.

The hash covers the kernel's own text (`KernelSpec.source` when given, else its launch's module) and the
source of every *helper*: a module of the kernel's package that the launch's module imports, directly
or through another helper (function-level imports included). The kernel's package is
`hoid.kernels.library` for a library kernel (one module or a folder of them, all sharing
`_triton_compile.py`, `_constraints.py`, `patterns.py` ...), and the launch module's own package for a
kernel defined elsewhere. The package's `__init__` is no helper: it lists the kernels, and adding one
must not change the others.

What the hash leaves out, on purpose: the library's build-only modules (`BUILD_ONLY`), which compile a
kernel for an arch without a GPU (CI's sm_90/sm_100 check) and which no launch runs, so an edit there
changes no measured code; `hoid.ir`, `hoid.kernels.spec`/`pattern` and the rest of hoid are
the framework every kernel is declared in (types, the spec contract, the graph builder), not the code a
launch runs; hashing them would change every version on any edit there and throw away every cached
measurement for nothing. torch and Triton are outside too: the measurement cache keys on their
versions itself (`hoid.measure.cache`).

Imports are followed from the launch's module where its text is hashed (by default) or it is a library
module (the torch kernels' shared launch lives in `_torch_vendor.py`), and from every library module
whose text an explicit `source` holds (the library's torch kernels hash `source_of(their module, the
torch code they call)`). Each module is hashed once. An agent's kernel, whose explicit source is its
whole file, whose launch is the loader's, and which may import no hoid module
(`source_check.ALLOWED_IMPORTS`), hashes that text alone: its version stays its file's hash.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path

LIBRARY = "hoid.kernels.library"
# Imported by kernel modules for their `build` checks, never run by a launch (see the module doc).
BUILD_ONLY = frozenset({f"{LIBRARY}._triton_build", f"{LIBRARY}._ptxas"})


def kernel_version(launch: Callable, source: str | None = None) -> str:
    """The 12-hex-digit version of a kernel: its own text, plus its helpers' (see the module doc)."""
    module = inspect.getmodule(launch)
    module_text = _module_text(module)
    text = source if source is not None else (module_text if module_text is not None else _launch_text(launch))
    helpers = {}
    for root in _roots(module, module_text, text, source):
        for name in sorted({root} | helpers_of(root, module_source(root) or "")):
            helper = module_source(name)
            if helper and helper not in text:  # each module once: the kernel's own text already holds it
                helpers[name] = helper
    if not helpers:  # a kernel without helpers hashes exactly its text (a loaded file's version is its hash)
        return hashlib.sha256(text.encode()).hexdigest()[:12]
    parts = [text] + [f"\n# --- helper {name}\n{helpers[name]}" for name in sorted(helpers)]
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:12]


def _roots(module, module_text: str | None, text: str, source: str | None) -> list[str]:
    """The modules whose imports are followed: the launch's module where its text is hashed or it is a
    library module (the torch kernels' shared launch lives in `_torch_vendor.py`), and every library
    module whose text an explicit `source` holds (`source_of(sys.modules[__name__], ...)`)."""
    roots = []
    if module is not None and module_text and module.__name__ != "__main__" and (
            module_text in text or module.__name__.startswith(LIBRARY + ".")):
        roots.append(module.__name__)
    if source is not None:
        library = [(name, m) for name, m in list(sys.modules.items()) if name.startswith(LIBRARY + ".")]
        roots += [name for name, m in library if (held := _module_text(m)) and held in source]
    return list(dict.fromkeys(roots))


def helper_scope(module_name: str) -> str | None:
    """The package whose modules count as helpers of a kernel in `module_name`; None where there is none."""
    if module_name.startswith(LIBRARY + "."):
        return LIBRARY
    package = module_name.rpartition(".")[0]
    return package or None


def helpers_of(module_name: str, text: str) -> set[str]:
    """Every module of the scope that `text` (the source of `module_name`) imports, transitively."""
    scope = helper_scope(module_name)
    if scope is None:
        return set()
    found: set[str] = set()
    todo = [(module_name, text)]
    while todo:
        name, source = todo.pop()
        for imported in _imports(name, source, _is_package(name)):
            if (imported.startswith(scope + ".") and imported not in found and imported != module_name
                    and imported not in BUILD_ONLY):
                helper = module_source(imported)
                if helper is not None:  # `from .x import f` also names `x.f`, which is no module
                    found.add(imported)
                    todo.append((imported, helper))
    return found


def module_source(name: str) -> str | None:
    """The text of module `name` as it is on disk now (not as imported): the file's edit is what counts."""
    path = _source_path(name)
    try:
        return path.read_text() if path is not None else None
    except OSError:
        return None


def _source_path(name: str) -> Path | None:
    """The file of module `name` (`x.py` or `x/__init__.py`) found from its top package's folders,
    without importing anything (`importlib.util.find_spec` would import the parents, and a lazy import
    inside a function must stay lazy)."""
    top, _, rest = name.partition(".")
    spec = _find_spec(top)
    if spec is None or spec.submodule_search_locations is None:
        return Path(spec.origin) if spec is not None and spec.origin and not rest else None
    for folder in spec.submodule_search_locations:
        base = Path(folder).joinpath(*rest.split(".")) if rest else Path(folder)
        for candidate in (base / "__init__.py", base.with_suffix(".py") if rest else None):
            if candidate is not None and candidate.is_file():
                return candidate
    return None


def _is_package(name: str) -> bool:
    path = _source_path(name)
    return path is not None and path.name == "__init__.py"


@functools.lru_cache(maxsize=512)
def _imports(name: str, source: str, is_package: bool) -> tuple[str, ...]:
    """The modules `source` (of module `name`) may import, as absolute names: `from .x import f` gives
    `pkg.x` and `pkg.x.f`, for the caller to keep those that are modules. Keyed by the text, so an edit
    is seen."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    package = name if is_package else name.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            except (ImportError, ValueError):  # a relative import beyond the top package: nothing to follow
                continue
            names += [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return tuple(dict.fromkeys(names))


def _find_spec(top: str):
    """The spec of a top-level module (no parent to import)."""
    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None


def _module_text(module) -> str | None:
    if module is None:
        return None
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return None


def _launch_text(fn: Callable) -> str:
    """launch's own source; else its bytecode and constants (a launch defined where no source file
    exists, e.g. `python -c`): never its name alone, which two bodies may share."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        pass
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return _code_text(code)


def _code_text(code) -> str:
    consts = [_code_text(c) if inspect.iscode(c) else repr(c) for c in code.co_consts]
    return f"{code.co_code.hex()}|{code.co_names}|{consts}"
