"""Run exported packages where `import hoid` fails: each eager, under torch.export, under torch.compile.

    python export_worker.py <jobs.json>

jobs.json lists {"parent", "name", "inputs", "outputs", "backend"}: a package's parent dir and name, its
inputs (.pt) and where to write its outputs (.pt), and torch.compile's backend. Started by
tests/runtime/test_export.py in a fresh process whose sys.path holds torch's site-packages; a meta-path
blocker makes any import of hoid raise, so each package proves it needs none. The packages run one after
another in this one process: one import of torch and one warm-up of torch.compile instead of one per
package (about 2 s of CPU each on the 2-core CI machine). Writes, per package,
{"eager": [...], "compiled": [...], "exported": [...], "custom_ops": [...], "hoid_loaded": bool}.
"""

import json
import sys


class _BlockHoid:
    def find_spec(self, name, path=None, target=None):
        if name == "hoid" or name.startswith("hoid."):
            raise ImportError(f"import of {name} blocked: an exported package must not need hoid")


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
    compiled = [t.clone() for t in compiled_fn(*fresh())]
    program = torch.export.export(model, tuple(fresh()))
    exported = [t.clone() for t in program.module()(*fresh())]
    ops = sorted({str(n.target) for n in program.graph.nodes if n.op == "call_function"
                  and str(n.target).startswith(pkg.META["namespace"])})
    torch.save({"eager": eager, "compiled": compiled, "exported": exported, "custom_ops": ops,
                "hoid_loaded": any(m == "hoid" or m.startswith("hoid.") for m in sys.modules)}, outputs_path)


def main(jobs_path):
    with open(jobs_path) as f:
        jobs = json.load(f)
    for job in jobs:
        run(job["parent"], job["name"], job["inputs"], job["outputs"], job["backend"])


if __name__ == "__main__":
    main(*sys.argv[1:])
