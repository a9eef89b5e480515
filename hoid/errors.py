"""The errors hoid raises on a user's mistake: each names the problem and, where there is one, the fix."""


class HoidError(Exception):
    """Base class of every error hoid raises on purpose."""


class GraphError(HoidError, ValueError):
    """A graph is malformed: unknown op, wrong arity or attrs, type mismatch, use before definition..."""


class ParseError(HoidError, ValueError):
    """A `.hoid` document is malformed. Carries the line and column, the offending text and what was expected."""

    def __init__(self, message: str, *, line: int, column: int, text: str = "", expected: str = ""):
        self.line, self.column, self.text, self.expected = line, column, text, expected
        where = f"line {line}, column {column}"
        parts = [f"{where}: {message}"]
        if text:
            parts.append(f"  {text}\n  {' ' * max(column - 1, 0)}^")
        if expected:
            parts.append(f"expected {expected}")
        super().__init__("\n".join(parts))


class UnsupportedOpError(HoidError, NotImplementedError):
    """An imported program uses ops hoid does not know; lists every one, with counts and first use."""


class ExportError(HoidError, RuntimeError):
    """`torch.export` could not trace a module; carries torch's reason and a hint."""


class NotAGraphError(HoidError, TypeError):
    """A function that takes a `hoid.Graph` was given something else (an `nn.Module`, a path...)."""


class InputError(HoidError, TypeError):
    """Tensors given to a graph do not match its declared inputs."""


class UnknownDeviceError(HoidError, KeyError):
    """A device the device table has no row for (`hoid.measure.devices`); names the known ones and how to add one."""

    def __str__(self) -> str:  # KeyError's own quotes the message
        return str(self.args[0]) if self.args else ""
