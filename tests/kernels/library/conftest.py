"""Triton kernels run under the Triton interpreter where there is no GPU: the variable must be set before
triton is imported (the library also decides at each launch, so an earlier import elsewhere does not break
this). Where CUDA is present the kernels compile, so `python -m pytest -m gpu` runs the GPU tests with no
variable set."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    # The interpreter turns a run-time loop bound into an int through numpy, which warns once per program.
    config.addinivalue_line("filterwarnings", "ignore:Conversion of an array with ndim > 0:DeprecationWarning")
