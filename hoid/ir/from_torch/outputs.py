"""The order of an imported graph's outputs.

A module returns a pytree (a tensor, a tuple, a dict, a transformers `ModelOutput`...); torch.export
flattens it with `torch.utils._pytree`, and so does hoid: the graph's outputs are the tensor leaves
in that order (tuples and lists by position, dicts and ModelOutputs by key order; `None`s dropped),
followed by the updates of the state inputs. `flatten_outputs` applies the same flattening to an
eager result, so that the two can be compared leaf by leaf.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree


def flatten_outputs(result) -> list[torch.Tensor]:
    """The tensor leaves of a module's result, in the order of the imported graph's outputs."""
    return [leaf for leaf in pytree.tree_leaves(result) if isinstance(leaf, torch.Tensor)]
