"""`Verdict`: what a check concluded, in words a person or an LLM can act on.

A rejected candidate gets a `kind` (a short tag a program can branch on: "mismatch", "cached",
"crashed", ...), a `reason` (a sentence that names the problem and, where it can, the cheat or the
fix), the error figures, and the `counterexample`: the smallest failing inputs found, described well
enough to reproduce them (shapes, value distributions, value ranges, the worst element and the seed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import HoidError

# Every kind of rejection, with what it means. Tests and agents branch on these tags.
KINDS = {
    "static": "the source uses a construct that is refused before anything runs",
    "raised": "the candidate raised an exception",
    "crashed": "the isolated process running the candidate died",
    "timeout": "the candidate did not finish within the time limit",
    "output_type": "an output is not a plain tensor of the expected shape, dtype and device",
    "alias": "an output is, or shares memory with, an input or another output",
    "mutated": "the candidate wrote into one of its inputs",
    "patched": "the candidate replaced a function of torch, hoid or builtins",
    "unwritten": "elements of an output were never written",
    "nonfinite": "NaN or Inf where the reference has none",
    "mismatch": "values differ from the reference beyond the tolerance",
    "nondeterministic": "two runs on the same inputs disagree",
    "cached": "the output did not follow new input values written into the same buffers",
    "stateful": "the candidate was right for its first calls, then wrong",
    "race": "a kernel it built on the GPU announces writes before they are made (a ticket with no barrier)",
}


@dataclass(frozen=True)
class Failure:
    """One failed trial, as found by the checker (before shrinking)."""

    kind: str
    message: str
    figures: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown failure kind {self.kind!r}; expected one of {', '.join(KINDS)}")


@dataclass(frozen=True)
class Counterexample:
    """Failing inputs, small enough to read: what to feed the candidate to see it fail again.

    sizes: the value of every symbolic dim; inputs: one line per input (type, distribution, value range);
    worst: the element with the largest error (output, index, candidate value, reference value), if any;
    seed: the check's seed (pass it back as `check(..., seed=...)` to replay this exact search)."""

    sizes: dict[str, int]
    inputs: tuple[str, ...]
    worst: str | None
    seed: int

    def __str__(self) -> str:
        lines = [f"seed {self.seed}"]
        if self.sizes:
            lines.append("sizes " + ", ".join(f"{k}={v}" for k, v in self.sizes.items()))
        lines += [f"input {line}" for line in self.inputs]
        if self.worst:
            lines.append(f"worst {self.worst}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Verdict:
    """ok: accepted; kind/reason: why not (None/"" when ok); counterexample: the shrunk failing inputs;
    figures: error measures of the failure (relative L2, max error, ...); trials: how many trials ran;
    seed: replay the check with `seed=`; notes: things the check could not do and says so (no
    readable source for the static pass, a reference that could not run in float64...)."""

    ok: bool
    reason: str
    kind: str | None = None
    counterexample: Counterexample | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    trials: int = 0
    seed: int = 0
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = "accepted" if self.ok else f"rejected ({self.kind})"
        text = f"{head}: {self.reason}"
        if self.counterexample is not None:
            text += "\ncounterexample:\n  " + str(self.counterexample).replace("\n", "\n  ")
        for note in self.notes:
            text += f"\nnote: {note}"
        return text


class VerifyError(HoidError, ValueError):
    """A check could not be set up (bad input declarations, a reference that fails on valid inputs, a
    candidate that cannot be sent to an isolated process): a mistake of the caller, not a verdict."""
