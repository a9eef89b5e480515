"""Kernel source from a file or text: the path an agent's (or a person's) kernels take into hoid.

Such source is untrusted. Loading it here *parses* it and checks its structure; nothing in it runs. The
structure is what makes it safe to import later, inside `hoid.verify`'s isolated process:

- it parses, and names an `entry`: a plain top-level `def`, the host-side launch (destination-passing:
  `entry(*inputs, *outputs, **attrs, **params)`), not a `@triton.jit` kernel;
- importing it runs nothing but imports, `def`s, their decorators and constant assignments: a top-level
  call, loop, `if`, `with` or class would run at import, before any check;
- it imports only what kernels are written with (`ALLOWED_IMPORTS`);
- its tunable parameters are declared as data (`PARAMS = {"BLOCK": (64, 128)}`), never through
  `triton.autotune`: hoid tunes through its measurement layer, so that choices are cached and reported.

The defences against kernels that cheat (streams, threads, patching, frame access, try/except) are
`hoid.verify`'s static pass; the numerical check and process isolation follow it. `load_entry` is the
one function here that runs the source: only `hoid.verify`'s isolated worker, or a caller that trusts a
source already verified, calls it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HoidError
from .pattern import Pattern
from .source_check import SourceProblem, check_source, literal_constants
from .spec import Constraint, KernelSpec, Param

_BACKEND_OF_IMPORT = {"triton": "triton", "cutlass": "cute"}


class KernelSourceError(HoidError, ValueError):
    """Kernel source that cannot be loaded: every problem found, each with its line, column and the fix."""

    def __init__(self, where: str, problems: Sequence[SourceProblem]):
        self.where, self.problems = where, tuple(problems)
        lines = [f"{where}:{p.line}:{p.column}: {p.message}" for p in self.problems]
        super().__init__(f"kernel source {where} cannot be loaded:\n" + "\n".join(lines))


@dataclass(frozen=True)
class KernelSource:
    """Checked kernel source. `text`: the module; `entry`: the launch function's name; `path`: the file it
    came from, if any. Derived at construction, without running anything: `version` (the hash a
    `KernelSpec` built from it carries), `backend` (from its imports) and `constants` (its top-level
    UPPERCASE assignments of literal values, e.g. `PARAMS`). Raises `KernelSourceError` when malformed."""

    text: str
    entry: str = "launch"
    path: str | None = None
    version: str = field(init=False)
    backend: str = field(init=False)
    constants: dict = field(init=False, compare=False)

    def __post_init__(self):
        where = self.path or "<text>"
        if not isinstance(self.entry, str) or not self.entry.isidentifier():
            raise KernelSourceError(where, [SourceProblem(0, 0, f"the entry must name a function, got "
                                                                f"{self.entry!r}")])
        tree, problems, imports = check_source(self.text, self.entry)
        if problems:
            raise KernelSourceError(where, problems)
        backends = {_BACKEND_OF_IMPORT[m] for m in imports if m in _BACKEND_OF_IMPORT}
        object.__setattr__(self, "version", hashlib.sha256(self.text.encode()).hexdigest()[:12])
        backend = "cute" if "cute" in backends else backends.pop() if backends else "torch"
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "constants", literal_constants(tree))

    @classmethod
    def from_file(cls, path: str | os.PathLike, entry: str = "launch") -> KernelSource:
        """Read and check the source in `path`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no kernel source file at {path}")
        return cls(path.read_text(), entry, str(path))

    def declared_params(self) -> tuple[Param, ...]:
        """The `PARAMS = {"name": (choice, ...)}` the source declares; the first choice is the default."""
        declared = self.constants.get("PARAMS", {})
        if not isinstance(declared, dict) or not all(
                isinstance(k, str) and isinstance(v, (tuple, list)) and v for k, v in declared.items()):
            raise KernelSourceError(self.path or "<text>", [SourceProblem(
                0, 0, "PARAMS must map each parameter name to a non-empty tuple of its choices, "
                      'e.g. PARAMS = {"BLOCK": (64, 128, 256)}')])
        return tuple(Param(name, tuple(choices), choices[0]) for name, choices in declared.items())

    def to_spec(self, kernel_id: str, pattern: Pattern, *, constraints: Sequence[Constraint] = (),
                deterministic: bool = False, doc: str = "", fixed: dict | None = None, **spec_fields) -> KernelSpec:
        """A `KernelSpec` for this source: its params are the declared ones, its version this source's, and
        `fixed` ({name: value}: launch keywords of one value each, a region's constant such as an eps).
        Its launch imports the source on first call (`load_entry`): call it only once verified."""
        declared = self.declared_params()
        clash = sorted(set(fixed or {}) & {p.name for p in declared})
        if clash:
            raise ValueError(f"kernel {kernel_id}: {', '.join(clash)} fixed for its region, but tuned by the "
                             "source's PARAMS; a keyword is one or the other")
        params = declared + tuple(Param(name, (value,), value) for name, value in (fixed or {}).items())
        return KernelSpec(id=kernel_id, pattern=pattern, backend=self.backend, launch=_DeferredLaunch(self),
                          constraints=tuple(constraints), params=params,
                          deterministic=deterministic, source=self.text, doc=doc, **spec_fields)


def load_entry(source: KernelSource) -> Callable[..., None]:
    """Import `source` as a module of its own and return its entry function. THIS RUNS THE SOURCE: call
    it inside `hoid.verify`'s isolated process, or for source already verified.

    The checked text is written to a file named by its version and imported from there, never from
    `source.path`, which may have changed since it was read: what runs is exactly what was checked (and
    Triton, which reads a kernel's source from its file, sees the same text)."""
    name = f"hoid_kernel_{source.version}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, _materialize(source))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running it: Triton and dataclasses look modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]  # a half-imported module must not be found by the next load
            raise
    return getattr(module, source.entry)


class _DeferredLaunch:
    """A launch that imports its source on first call (the spec is built before anything runs)."""

    def __init__(self, source: KernelSource):
        self.source, self._entry = source, None
        self.__qualname__ = f"{source.entry}@{source.version}"

    def __call__(self, *tensors, **kwargs) -> None:
        if self._entry is None:
            self._entry = load_entry(self.source)
        self._entry(*tensors, **kwargs)


def _materialize(source: KernelSource) -> str:
    """The file holding exactly `source.text`, in a folder of this user's alone (others could otherwise
    plant or change a kernel file that would then be imported unchecked)."""
    folder = _kernel_folder()
    path = folder / f"kernel_{source.version}.py"
    try:
        reusable = path.read_text() == source.text
    except (OSError, UnicodeDecodeError):
        reusable = False
    if not reusable:  # write then rename: a concurrent loader never sees half a file
        handle, tmp = tempfile.mkstemp(dir=folder, suffix=".py")
        try:
            with os.fdopen(handle, "w") as f:
                f.write(source.text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return str(path)


def _kernel_folder() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else None
    folder = Path(tempfile.gettempdir()) / (f"hoid_kernels_{uid}" if uid is not None else "hoid_kernels")
    folder.mkdir(mode=0o700, exist_ok=True)
    if uid is not None:
        info = folder.lstat()
        if not folder.is_dir() or folder.is_symlink() or info.st_uid != uid or info.st_mode & 0o077:
            raise PermissionError(f"{folder} must be a directory of user {uid} alone (mode 0o700) to hold "
                                  "kernel source; remove it and load again")
    return folder
