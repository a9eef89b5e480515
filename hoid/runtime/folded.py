"""Bind-time values shared between the executables compiled from the same weights.

A decoder is compiled twice, its step and its prefill, from graphs that hold the same weights, and each
bind folds the graph's weight-only values (merged Q/K/V and gate/up projections, transposed weights).
Folded separately, every merged weight existed twice: on the H200 the Qwen3-1.7B step and prefill each
bound about 1.9 GB of merges, and the `hoid-compile` row peaked at 7.6 GiB against the stock model's 5.1
(`benchmarks/results/decode/`). Here a bound value is remembered under what it was computed from: the
node's op and attrs over its inputs' keys, down to the weights' memory (address, layout, dtype, device,
version counter). A later bind that computes the same value from the same memory is handed the same
tensor. The table holds only weak references: it keeps nothing alive, and an entry whose value or whose
weights are gone is dropped.

Why the weights' memory is a sound key: an entry also holds weak references to the weight tensors it was
computed from, and is used only while they live, so their memory cannot have been freed and reused; two
live tensors with the same address, layout and dtype read the same elements, and a write to either bumps
the version counter they share (views share their base's), which changes the key.
"""

from __future__ import annotations

import weakref

import torch

from ..ir.graph import attr_key

_TABLE: dict[tuple, tuple[weakref.ref, tuple[weakref.ref, ...]]] = {}
_PRUNED_AT = [64]  # the table's size after its last pruning (doubled each time): pruning stays amortized O(1)


def weight_key(tensor: torch.Tensor, device: torch.device) -> tuple:
    """The key of a weight bound on `device`: its memory, layout, dtype and version."""
    try:
        version = tensor._version
    except RuntimeError:  # an inference tensor has no version counter: it cannot be written outside inference
        version = None
    return ("weight", str(device), str(tensor.device), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()),
            tensor.storage_offset(), tensor.untyped_storage().data_ptr(), version)


def node_key(node, inputs: list[tuple], output: int, device: torch.device) -> tuple:
    """The key of output `output` of a bind-time `node` whose inputs have the keys `inputs`."""
    return ("node", str(device), node.op, attr_key(dict(node.attrs)), tuple(inputs), output)


def lookup(key: tuple) -> torch.Tensor | None:
    """The value remembered under `key`, while it and the weights it came from live; else None."""
    entry = _TABLE.get(key)
    if entry is None:
        return None
    value, sources = entry[0](), [ref() for ref in entry[1]]
    if value is None or any(s is None for s in sources):
        del _TABLE[key]
        return None
    return value


def remember(key: tuple, value: torch.Tensor, sources: tuple[torch.Tensor, ...]) -> None:
    """`value` under `key`, computed from the weight tensors `sources`; dead entries are dropped whenever
    the table has doubled since the last time (a 28-layer bind remembers hundreds of values)."""
    if len(_TABLE) >= 2 * _PRUNED_AT[0]:
        for dead in [k for k, (v, s) in _TABLE.items() if v() is None or any(r() is None for r in s)]:
            del _TABLE[dead]
        _PRUNED_AT[0] = max(64, len(_TABLE))
    _TABLE[key] = (weakref.ref(value), tuple(weakref.ref(s) for s in sources))

