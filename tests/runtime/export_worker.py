"""Run exported packages where `import hoid` fails: each eager, under torch.export, under torch.compile.

    python export_worker.py <jobs.json>

jobs.json lists {"parent", "name", "inputs", "outputs", "backend"}: a package's parent dir and name, its
inputs (.pt) and where to write its outputs (.pt), and torch.compile's backend. Started by
tests/runtime/test_export.py in a fresh process whose sys.path holds torch's site-packages; a meta-path
blocker makes any import of hoid raise, so each package proves it needs none. The packages run one after
another in this one process: one import of torch and one warm-up of torch.compile instead of one per
package (about 2 s of CPU each on the 2-core CI machine). Writes, per package,
{"eager": [...], "compiled": [...], "exported": [...], "custom_ops": [...], "hoid_loaded": bool}. A job whose
backend is "--cute" (a package holding CuTe DSL kernels, which run on a GPU only) writes instead what `load`
says on the CPU and without CuTe DSL, and the ops of `torch.export` over the model built from its weights
(fakes only: nothing runs); with "build": true, each CuTe GEMV launch of the package's copy built for sm_90
(CuTe DSL compiles without a GPU).
"""

import json
import logging
import sys
from contextlib import contextmanager


class _BlockHoid:
    blocked = ("hoid",)

    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in self.blocked):
            raise ImportError(f"import of {name} blocked: an exported package must not need it here")


sys.meta_path.insert(0, _BlockHoid())


def run(parent, name, inputs_path, outputs_path, backend):
    sys.path.insert(0, parent)
    import importlib

    import torch

    pkg = importlib.import_module(name)
    model = pkg.load("cpu")
    inputs = torch.load(inputs_path)

    def fresh():  # a state input is written in place: each run gets its own copy
        return [t.clone() for t in inputs]

    eager = [t.clone() for t in model(*fresh())]
    compiled_fn = torch.compile(model, fullgraph=True, backend=backend)
    with _implicit_fallbacks(pkg.META["namespace"]) as fallbacks:
        compiled = [t.clone() for t in compiled_fn(*fresh())]
    program = torch.export.export(model, tuple(fresh()))
    exported = [t.clone() for t in program.module()(*fresh())]
    ops = sorted({str(n.target) for n in program.graph.nodes if n.op == "call_function"
                  and str(n.target).startswith(pkg.META["namespace"])})
    torch.save({"eager": eager, "compiled": compiled, "exported": exported, "custom_ops": ops,
                "implicit_fallbacks": fallbacks,
                "hoid_loaded": any(m == "hoid" or m.startswith("hoid.") for m in sys.modules)}, outputs_path)


@contextmanager
def _implicit_fallbacks(namespace):
    """The package's ops that Inductor met without a lowering and described in its log (the path that
    stringifies every input's IR), as a list filled while the block runs."""
    found = []

    class Record(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if "implicit fallback" in text and namespace in text:
                found.append(text.splitlines()[1] if "\n" in text else text)

    logger, handler = logging.getLogger("torch._inductor.graph"), Record()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def cute(parent, name, inputs_path, outputs_path, build: bool):
    sys.path.insert(0, parent)
    import importlib

    import torch
    from safetensors.torch import load_file

    pkg = importlib.import_module(name)
    said, built = {}, []
    try:
        pkg.load("cpu")
    except pkg.UnsupportedDeviceError as e:
        said["cpu"] = str(e)
    _BlockHoid.blocked = ("hoid", "cutlass")  # as where CuTe DSL is not installed
    try:
        pkg.check_device(torch.device("cuda", 0))
    except pkg.MissingDependencyError as e:
        said["no_cute_dsl"] = str(e)
    from importlib import import_module

    tensors = load_file(str(pkg._HERE / "weights.safetensors"))
    model = import_module(f"{name}.model").Model([tensors[f"t{i}"] for i in range(len(tensors))]).eval()
    program = torch.export.export(model, tuple(torch.load(inputs_path)))
    ops = sorted({str(n.target) for n in program.graph.nodes if n.op == "call_function"
                  and str(n.target).startswith(pkg.META["namespace"])})
    cutlass_loaded = "cutlass" in sys.modules
    _BlockHoid.blocked = ("hoid",)
    if build:  # each CuTe launch of the package's copy, built for sm_90 over CPU views
        helpers, gemv = import_module(f"{name}._kernels.cute_compile"), import_module(f"{name}._kernels.cute_gemv")
        for launch in ("launch_linear", "launch_linear_add", "launch_linear_swiglu", "launch_rmsnorm_linear",
                       "launch_rmsnorm_linear_swiglu"):
            if hasattr(gemv, launch):
                x, w = torch.zeros(1, 64), torch.zeros(2 * 32, 64)
                out = torch.zeros(1, 32 if launch.endswith("swiglu") else 64)
                res = (torch.zeros_like(out),) if launch.endswith("add") else ()
                captured = []
                gemv.launch = lambda *prepared, into=captured: into.append(prepared)  # prepare, do not launch
                if "rmsnorm" in launch:  # (x, norm weight, weight, out)
                    getattr(gemv, launch)(x, torch.ones(64), w, out)
                else:
                    getattr(gemv, launch)(x, w, *res, out)
                build, key, make, tensors = captured[0]
                stream = helpers.cute_modules()[2].CUstream(0)
                helpers.compiled_for(build, key, make, helpers.dlpack_views(tensors), stream, "sm_90")
                built.append(build)
    torch.save({"said": said, "custom_ops": ops, "cutlass_loaded": cutlass_loaded, "built": built,
                "hoid_loaded": any(m == "hoid" or m.startswith("hoid.") for m in sys.modules)}, outputs_path)


def main(jobs_path):
    with open(jobs_path) as f:
        jobs = json.load(f)
    for job in jobs:
        if job["backend"] == "--cute":
            cute(job["parent"], job["name"], job["inputs"], job["outputs"], job.get("build", False))
        else:
            run(job["parent"], job["name"], job["inputs"], job["outputs"], job["backend"])


if __name__ == "__main__":
    main(*sys.argv[1:])
