"""The launch side every Triton kernel of the library shares: what it refuses, and with which fix."""

import pytest


def test_cpu_tensors_without_the_interpreter_are_refused_with_the_fix():
    import torch

    from hoid.kernels.library._triton_compile import TritonDeviceError, _require_gpu_tensors

    with pytest.raises(TritonDeviceError, match="TRITON_INTERPRET=1"):
        _require_gpu_tensors("k", [torch.zeros(2)])


def test_without_triton_the_library_registers_and_a_launch_names_the_package():
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['triton'] = None\n"  # makes `import triton` fail as if not installed
        "import torch, hoid.kernels as K\n"
        "spec = K.get('triton.rmsnorm')\n"
        "x = torch.ones(2, 8)\n"
        "try:\n"
        "    spec.launch(x, torch.ones(8), torch.empty(2, 8), eps=1e-6, **spec.default_params())\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("MissingTritonError") and "pip install 'triton" in done.stdout


def test_every_jit_function_of_the_library_is_named_as_it_is_called():
    # torch.compile's inductor rebuilds a user kernel with the jit functions it calls under their
    # __name__: an alias (`f = triton.jit(_g)`) is undefined there (an exported package failed so)
    triton = pytest.importorskip("triton")
    from .modules import library_modules

    aliased = []
    for module_name, module in library_modules():
        for name, value in vars(module).items():
            fn = getattr(value, "impl", value)  # a TritonKernel holds its jit function
            if isinstance(fn, triton.runtime.JITFunction) and fn.__name__ != name:
                aliased.append(f"{module_name}.{name} is {fn.__name__}")
    assert not aliased, aliased


def test_no_kernel_of_the_library_has_an_argument_with_a_default():
    # torch.compile's tracing of a user Triton launch (an exported package under it) matches the launch's
    # arguments to the signature and does not fill in defaults: the GEMV's `GRID_M=False` default failed
    # there on the H200 (12-05: "Incorrect number of arguments passed to kernel"), though Triton ran it
    import inspect

    from hoid.kernels.library._triton_compile import TritonKernel

    from .modules import library_modules

    kernels = {f"{module_name}.{name}": value for module_name, module in library_modules()
               for name, value in vars(module).items() if isinstance(value, TritonKernel)}
    assert len(kernels) >= 14, "the library's Triton kernels were not found"
    defaulted = [f"{where}({p.name}=...)" for where, kernel in kernels.items()
                 for p in inspect.signature(kernel.fn).parameters.values() if p.default is not p.empty]
    assert not defaulted, f"drop the defaults and pass every argument at each launch: {defaulted}"
