"""What a check can be given as a candidate, and what the static pass reads of it.

A candidate is a callable over torch tensors, or kernel source: `KernelSource(code, entry)` (or the
pair `(code, entry)`), where `code` is a file path or the text itself and `entry` names the function to
call. Source is untrusted by definition: it is always statically checked and always run isolated.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .static import Finding, callable_sources, module_names, scan
from .verdict import VerifyError


@dataclass(frozen=True)
class KernelSource:
    """Kernel source: `text` (read from `path` when given as a file) and the name of the `entry` function."""

    text: str
    entry: str
    path: str | None = None

    @classmethod
    def of(cls, code: str | os.PathLike, entry: str) -> KernelSource:
        """From a file path or the source text itself (text is anything with a newline in it)."""
        if not isinstance(entry, str) or not entry.isidentifier():
            raise VerifyError(f"kernel source: the entry must be the name of a function, got {entry!r}")
        if isinstance(code, os.PathLike) or (isinstance(code, str) and "\n" not in code):
            path = Path(code)
            if not path.is_file():
                raise VerifyError(
                    f"kernel source: no file {str(path)!r} (text must span lines to be read as source)"
                )
            return cls(path.read_text(), entry, str(path))
        if isinstance(code, str):
            return cls(code, entry)
        raise VerifyError(f"kernel source: expected a path or source text, got {type(code).__name__}")


def as_candidate(candidate) -> Callable | KernelSource:
    """A callable or a `KernelSource`; the pair `(code, entry)` becomes a `KernelSource`."""
    if isinstance(candidate, KernelSource) or callable(candidate):
        return candidate
    if isinstance(candidate, tuple) and len(candidate) == 2:
        return KernelSource.of(*candidate)
    raise VerifyError(
        f"candidate: expected a callable, a KernelSource or a (source, entry) pair, got "
        f"{type(candidate).__name__}"
    )


def static_findings(candidate: Callable | KernelSource) -> tuple[list[Finding], list[str]]:
    """(refused constructs, notes on what could not be read) for the candidate's source."""
    if isinstance(candidate, KernelSource):
        try:
            return scan(candidate.text), []
        except SyntaxError as e:
            return [Finding(e.lineno or 0, "a syntax error", str(e.msg))], []
    sources, unreadable = callable_sources(candidate)
    modules = module_names(candidate)
    findings = [f for _, text in sources for f in scan(text, modules=modules)]
    notes = [f"the static pass could not read the source of {name}" for name in unreadable]
    return findings, notes


def load_source(source: KernelSource) -> Callable:
    """Import kernel source as a module of its own and return its entry function.

    Text is written to a temporary file first: Triton reads a kernel's source from its file. Runs in the
    isolated process only, since importing the source runs it."""
    path = source.path
    if path is None:
        handle, path = tempfile.mkstemp(suffix=".py", prefix="hoid_candidate_")
        with os.fdopen(handle, "w") as f:
            f.write(source.text)
    name = f"hoid_candidate_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    entry = getattr(module, source.entry, None)
    if not callable(entry):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise VerifyError(
            f"the source defines no function {source.entry!r}; it defines: {', '.join(defined) or 'none'}"
        )
    return entry
