"""What the CLI reads from its arguments, and the one error for a mistake in them (`hoid.cli`, `hoid.cli_agent`
and `hoid.viz.cli` share these; each command module imports them from here, none from another)."""

from __future__ import annotations

from pathlib import Path


class UsageError(Exception):
    """A mistake in what the command was given (a path that is no document): one line, exit 2."""


def read_document(path) -> str:
    """The text of the document at `path`, or a `UsageError` saying why it is not one and what to give."""
    if not path.exists():
        raise UsageError(f"{path}: no such file; give the path of a .hoid document")
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the path of a .hoid document (a file), e.g. one in it")
    data = path.read_bytes()
    try:
        text, bad = data.decode("utf-8"), data.find(b"\0")  # UTF-8 may hold NUL bytes; no text file does
    except UnicodeDecodeError as e:
        text, bad = None, e.start
    if bad >= 0:
        line = data[:bad].count(b"\n") + 1
        raise UsageError(f"{path}: not a text file (byte {bad}, line {line}, is not text); a .hoid document "
                          "is text: give the .hoid file, not its .safetensors weights or another binary")
    return text


def read_graph(path: str):
    """The document at `path`, with its weights if they are beside it (a region document has none)."""
    from . import load
    from .ir.io import weights_path
    from .ir.text import loads

    p = Path(path)
    text = read_document(p)
    return load(p) if weights_path(p).is_file() else loads(text)
