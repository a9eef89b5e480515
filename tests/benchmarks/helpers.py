"""Running a benchmark script's `main` in the test's own process."""

import contextlib
import importlib
import io

import pytest
import torch


def run_main(script: str, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """(exit code, stdout) of `python benchmarks/SCRIPT.py ARGV`, run in this process with `env` set for the
    call: `main(argv)` is all the script's `__main__` runs, and a subprocess would only import torch,
    transformers and hoid once more (about 10 s of CPU each time on the 2-core CI machine)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        for key, value in env.items():
            mp.setenv(key, value)
        try:
            code = importlib.import_module(script).main(argv)
        finally:
            torch._dynamo.reset()  # the script's torch.compile rows leave no compiled frames to later tests
    return code, out.getvalue()
