"""The comparison the issues state for "runs exactly": relative L2 error against the reference, in float64."""

import torch


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want||, computed in float64 so that the measure adds no rounding of its own."""
    return ((got.double() - want.double()).norm() / want.double().norm()).item()
