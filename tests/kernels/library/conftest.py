"""Triton kernels run under the Triton interpreter on the CPU: the variable must be set before triton is
imported (the library also decides at each launch, so an earlier import elsewhere does not break this)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
