"""`save` and `load`: a graph as a `.hoid` document on disk, its bound weights beside it.

    hoid.save(graph, "decode.hoid")     # writes decode.hoid and, if weights are bound, decode.safetensors
    graph = hoid.load("decode.hoid")    # the same graph, its weights bound again

The document names its weights file on a `weights "decode.safetensors"` line, resolved next to the
document, so the pair can be moved together (or the document renamed) without editing either.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..errors import GraphError, HoidError
from .graph import Graph, expect_graph
from .text_parse import parse_document
from .text_print import FORMAT_VERSION, format_document


class WeightsFileError(HoidError, FileNotFoundError):
    """A document names a weights file that is not where it says."""


def weights_path(path: str | os.PathLike) -> Path:
    """Where `save` puts the weights of the document at `path`: beside it, same stem, `.safetensors`."""
    path = Path(path)
    if path.suffix == ".safetensors":
        raise ValueError(f"{path}: a document may not end in .safetensors, the suffix of its weights "
                         "file; name it .hoid")
    return path.with_suffix(".safetensors")


KERNELS_DIR = "kernels"  # beside the document: the source of its kernels that are not in the library


def kernel_files(path: str | os.PathLike) -> dict[str, str]:
    """file name -> text of the kernel files beside the document at `path` (which ones are needed, and how
    they are checked, is `hoid.kernels.documents`' business: this package cannot import kernels)."""
    folder = Path(path).parent / KERNELS_DIR
    if not folder.is_dir():
        return {}
    return {f.name: f.read_text(encoding="utf-8") for f in sorted(folder.glob("*.py"))}


def save(graph: Graph, path: str | os.PathLike, *, kernel_sources: dict[str, str] | None = None) -> None:
    """Write `graph` as a `.hoid` document at `path`, and its bound weights (`graph.weights`), if any,
    to a safetensors file beside it with the same stem. Weights are stored as contiguous CPU copies.
    kernel_sources: file name -> text, written into `kernels/` beside the document (`hoid.save` passes
    the source of every kernel node not in the library)."""
    graph = expect_graph(graph, "hoid.save")
    path, target = Path(path), weights_path(path)
    graph.validate()
    weights_file = None
    if graph.weights:
        from safetensors.torch import save_file

        metadata = {"format": "pt", "hoid": str(FORMAT_VERSION)}
        tensors = _separate_storage(graph.weights)
        replace_atomically(target, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))
        weights_file = target.name
    for name, source in (kernel_sources or {}).items():
        folder = path.parent / KERNELS_DIR
        folder.mkdir(exist_ok=True)
        replace_atomically(folder / name, lambda tmp, s=source: tmp.write_text(s, encoding="utf-8"))
    text = format_document(graph, weights_file=weights_file)
    replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def replace_atomically(target: Path, write) -> None:
    """Write through a temporary file beside `target`, then rename it over `target`: a crash midway leaves
    the previous file whole, never a truncated one."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: str | os.PathLike, *, device: str | torch.device = "cpu") -> Graph:
    """Read the `.hoid` document at `path`; bind the weights its `weights` line names, loaded on `device`.

    Raises `hoid.ParseError` for a malformed document, `WeightsFileError` when the weights file is
    missing, and `hoid.GraphError` when its tensors do not match the graph's weight inputs.
    """
    path = Path(path)
    document = parse_document(path.read_text(encoding="utf-8"))
    graph = document.graph
    if document.weights_file is None:
        return graph
    target = path.parent / document.weights_file
    if not target.is_file():
        raise WeightsFileError(f"{path} keeps its weights in {document.weights_file!r}, but {target} does "
                               "not exist; copy the weights file beside the document, or remove the "
                               "`weights` line to load the graph without weights")
    from safetensors.torch import load_file

    # safetensors hands out tensors at unaligned addresses, and CPU matmul kernels then round differently
    # from the aligned original: clone so that a loaded graph computes bit for bit what the saved one did.
    graph.weights = {name: t.clone() for name, t in load_file(str(target), device=str(device)).items()}
    declared = {v.name for v in graph.weight_inputs}
    extra = sorted(set(graph.weights) - declared)
    if extra:
        raise GraphError(f"{target} holds tensor(s) {', '.join(extra[:5])} that {path} does not declare as "
                         "weights; the two files do not belong together (save them again with hoid.save)")
    try:
        return graph.validate()
    except GraphError as e:
        raise GraphError(f"{target} does not match {path}: {e}") from None


def _separate_storage(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous CPU tensors, none sharing memory: safetensors refuses shared storage (tied weights)."""
    out, storages = {}, set()
    for name, tensor in weights.items():
        tensor = tensor.detach().to("cpu").contiguous()
        if tensor.untyped_storage().data_ptr() in storages:
            tensor = tensor.clone()
        storages.add(tensor.untyped_storage().data_ptr())
        out[name] = tensor
    return out
