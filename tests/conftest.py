"""Test-wide settings: GPU tests skip cleanly without CUDA; Triton kernels run under its interpreter there;
hypothesis runs without deadlines on slow CI."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    # Triton decides interpreter-or-compile when first imported: set it before any test module imports it.
    os.environ.setdefault("TRITON_INTERPRET", "1")
from hypothesis import HealthCheck, settings

settings.register_profile(
    "hoid", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], print_blob=True
)
settings.load_profile("hoid")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (marked gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
