"""What a check can be given as a candidate, and what the static pass reads of it.

A candidate is a callable over torch tensors, or kernel source: a `hoid.kernels.loader.KernelSource`,
or the pair `(code, entry)` where `code` is a file path or the source text and `entry` names the
function to call. Source is untrusted by definition: the loader checks its structure (what importing it
would run) without running it, the static pass reads it for cheats, and it only ever runs isolated
(`isolate.py` imports it there with `hoid.kernels.loader.load_entry`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..kernels.loader import KernelSource, KernelSourceError
from .static import Finding, callable_sources, module_names, scan
from .verdict import VerifyError


@dataclass(frozen=True)
class RefusedSource:
    """Source the loader refused: its text (still read by the static pass) and the loader's problems."""

    text: str
    error: KernelSourceError


def source_of(code: str | os.PathLike, entry: str) -> KernelSource | RefusedSource:
    """Kernel source from a file path or the text itself (text is anything with a newline in it)."""
    if isinstance(code, os.PathLike) or (isinstance(code, str) and "\n" not in code):
        path = Path(code)
        if not path.is_file():
            raise VerifyError(f"kernel source: no file {str(path)!r} (text must span lines to be read as source)")
        text, where = path.read_text(), str(path)
    elif isinstance(code, str):
        text, where = code, None
    else:
        raise VerifyError(f"kernel source: expected a path or source text, got {type(code).__name__}")
    try:
        return KernelSource(text, entry, where)
    except KernelSourceError as error:
        return RefusedSource(text, error)


def as_candidate(candidate) -> Callable | KernelSource | RefusedSource:
    """A callable, or kernel source (checked by the loader: a `RefusedSource` when it is malformed)."""
    if isinstance(candidate, KernelSource) or callable(candidate):
        return candidate
    if isinstance(candidate, tuple) and len(candidate) == 2:
        return source_of(*candidate)
    raise VerifyError(f"candidate: expected a callable, a KernelSource or a (source, entry) pair, got "
                      f"{type(candidate).__name__}")


def static_findings(candidate: Callable | KernelSource | RefusedSource) -> tuple[list[Finding], list[str]]:
    """(refused constructs, notes on what could not be read) for the candidate's source."""
    if isinstance(candidate, (KernelSource, RefusedSource)):
        try:
            findings = scan(candidate.text)
        except SyntaxError:
            findings = []  # the loader's problems say where
        if isinstance(candidate, RefusedSource):
            findings += [Finding(p.line, "kernel source structure", p.message) for p in candidate.error.problems]
        return findings, []
    sources, unreadable = callable_sources(candidate)
    modules = module_names(candidate)
    findings: list[Finding] = []
    for name, text in sources:
        try:
            findings += scan(text, modules=modules)
        except SyntaxError:  # a lambda's source is the lines around it, which may not parse alone
            unreadable.append(name)
    notes = [f"the static pass could not read the source of {name}" for name in unreadable]
    return findings, notes
