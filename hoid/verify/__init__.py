"""Property-based checks that a kernel computes what it claims, written against kernels that cheat.

    from hoid.verify import check
    verdict = check(candidate, reference, [((64, 256), "f32"), ((256,), "f32")], isolate=True)
    verdict.ok, verdict.reason, verdict.counterexample

See `check.py` for the three checks, `inputs.py` for declaring inputs, `tolerance.py` for what "close"
means, and `hoid.testing.strategies` for hypothesis strategies to test your own kernels with.
Importing this package does not import hypothesis, egglog, openai or Triton.
"""

from ..kernels.loader import KernelSource
from .check import check, check_kernel, check_region
from .inputs import DISTRIBUTIONS, Dim, Input
from .region import extract_region
from .static import scan
from .tolerance import TOLERANCES, Tolerance, tolerance_for
from .verdict import Counterexample, Verdict, VerifyError

__all__ = [
    "DISTRIBUTIONS",
    "TOLERANCES",
    "Counterexample",
    "Dim",
    "Input",
    "KernelSource",
    "Tolerance",
    "Verdict",
    "VerifyError",
    "check",
    "check_kernel",
    "check_region",
    "extract_region",
    "scan",
    "tolerance_for",
]
