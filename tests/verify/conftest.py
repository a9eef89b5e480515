"""Triton kernels in these tests run under Triton's CPU interpreter when there is no GPU: the variable
must be set before triton is first imported."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
