"""The fixed text of an exported package (`hoid.export`): its `__init__.py`, and the headers of `model.py`
and `ops.py`. Kept as text, apart from the code that fills it in, so a reader sees the package whole."""

INIT = '''"""A model exported by hoid (hoid.export): plain PyTorch, its kernels as torch.library ops.

    import <this package> as pkg
    model = pkg.load("cuda")                 # a torch.nn.Module
    outputs = model(*inputs)                 # the graph's inputs and outputs, in its order

It imports torch, safetensors and triton (and CuTe DSL where META["cute"] names kernels), never hoid. META
says what it was exported for.
"""

import json
import os
from pathlib import Path

import torch

_HERE = Path(__file__).parent
META = json.loads((_HERE / "meta.json").read_text())


class UnsupportedDeviceError(RuntimeError):
    """The package's kernels do not build for the device it is loaded on."""


class MissingDependencyError(ImportError):
    """The package's CuTe DSL kernels need NVIDIA's CuTe DSL, which this environment lacks."""


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _have_cute_dsl() -> bool:
    from ._kernels.cute_compile import have_cute  # torch only: finds CuTe DSL without importing it

    return have_cute()


def check_device(device) -> None:
    """Refuse a device whose arch the kernels do not build for, saying which they do; and, with CuTe DSL
    kernels, a device that is not a CUDA GPU (CuTe has no interpreter) or an environment without CuTe DSL."""
    device = torch.device(device)
    archs = META["archs"]
    cute = META.get("cute") or []
    if cute and device.type != "cuda":
        raise UnsupportedDeviceError(
            f"{META['graph']}: its CuTe DSL kernels ({', '.join(cute)}) run on a CUDA GPU only "
            f"({', '.join(archs)}); to run it elsewhere, export it with hoid.export(..., kernels=) a kernel set "
            "without CuTe's, whose nodes then run their bodies")
    if cute and not _have_cute_dsl():  # hoid's own test, copied with the CuTe launches
        raise MissingDependencyError(
            f"{META['graph']}: its CuTe DSL kernels ({', '.join(cute)}) need NVIDIA's CuTe DSL: "
            f"pip install nvidia-cutlass-dsl=={META.get('cute_dsl') or '4.8.1'} (the version it was exported with)")
    if archs is None:  # no Triton kernel: torch ops run anywhere torch does
        return
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        arch = f"sm_{major}{minor}"
        if arch not in archs:
            raise UnsupportedDeviceError(
                f"{META['graph']}: its kernels were chosen for {META['arch']} and build for "
                f"{', '.join(archs)}; {torch.cuda.get_device_name(device)} is {arch}. Export the graph again "
                f"on that device (hoid.export), or load it on one of {', '.join(archs)}")
    elif not _interpreting():
        raise UnsupportedDeviceError(
            f"{META['graph']}: its Triton kernels run on a CUDA GPU ({', '.join(archs)}); on the CPU only "
            "under the Triton interpreter (set TRITON_INTERPRET=1 before importing triton)")


def load(device=None) -> torch.nn.Module:
    """The model on `device` (default: the GPU when there is one, else the CPU), in eval mode."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    check_device(device)
    from safetensors.torch import load_file

    from .model import Model

    tensors = load_file(str(_HERE / "weights.safetensors"), device=str(torch.device(device)))
    return Model([tensors[f"t{i}"] for i in range(len(tensors))]).eval()
'''

MODEL = '''"""The graph as a torch.nn.Module: one line a node, in graph order (exported by hoid.export)."""

import torch

from . import ops

NAMES = {names}  # the graph's name of each frozen tensor t<i>


class Model(torch.nn.Module):
    def __init__(self, tensors):
        super().__init__()
        assert len(tensors) == {count}, "weights.safetensors does not belong to this model"
        for i, t in enumerate(tensors):
            self.register_buffer(f"t{{i}}", t)

    def forward({params}):
{body}
'''

OPS_HEADER = '''"""The kernels as torch.library ops, and each op node's torch code (exported by hoid.export).

A Triton kernel is a `triton_op` where Triton compiles (a GPU): torch.compile and torch.export trace into it
through `wrap_triton`. Under Triton's CPU interpreter, whose kernels wrap_triton cannot trace, and for
kernels that are not launched through the package's Triton wrapper, it is a `custom_op`; so is an in-place
kernel (one that mutates its inputs), whose host code checks where its outputs live (`data_ptr`), which
tracing cannot see: opaque, it runs as it was checked. Each has a fake.
"""

from math import inf, nan  # noqa: F401  (traced code spells infinities so)

import torch

NAMESPACE = "{namespace}"


def _triton_compiles() -> bool:
    try:
        import triton.language as tl
    except ImportError:
        return False
    return type(tl.standard.sum).__name__ != "InterpretedFunction"


_TRITON_OP = _triton_compiles()


def _op(name, mutates_args, traceable):
    def register(fn):
        qualified = f"{{NAMESPACE}}::{{name}}"
        if traceable and _TRITON_OP and not mutates_args:
            return torch.library.triton_op(qualified, fn, mutates_args=mutates_args)
        op = torch.library.custom_op(qualified, fn, mutates_args=mutates_args)
        _inductor_fallback(op, qualified)
        return op
    return register


def _inductor_fallback(op, qualified):
    """Tell Inductor (torch.compile's backend) up front that `op` is opaque: a fallback with the layout its
    tags ask for, the call Inductor makes itself when it first meets an op it cannot lower. Met unknown,
    torch 2.11 first builds an info log line of the op's every input as Inductor IR, logging on or off,
    and on a deep graph that string took minutes: Whisper-large-v3's exported encoder spent more than five
    of its first compiled call in it (an H100, 12-06). Importing Inductor here costs about a second once."""
    import warnings

    try:
        from torch._inductor import lowering
        from torch._library.utils import get_layout_constraint_tag

        target = op._opoverload
        if target not in lowering.lowerings:
            tag = get_layout_constraint_tag(target, with_default=True)
            lowering.make_fallback(target, layout_constraint=lowering.tag_to_layout_constraint(tag))
    except (ImportError, AttributeError) as e:  # another torch's internals: compiling still works, maybe slowly
        warnings.warn(f"{{qualified}}: not registered with Inductor ahead ({{e!r}}); torch.compile may "
                      "spend minutes describing a deep graph's inputs to this op before it runs", stacklevel=2)


'''
