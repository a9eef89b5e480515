"""Test-wide settings: GPU tests skip cleanly without CUDA; hypothesis runs without deadlines on slow CI."""

import pytest
import torch
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
