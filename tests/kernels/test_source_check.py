"""The loader's refusal of malformed kernel source: every problem, with its line and the fix."""

import pytest

from hoid.kernels.loader import KernelSource, KernelSourceError

OK_LAUNCH = "\n\ndef launch(x, out):\n    out.copy_(x)\n"


def refused(text: str, entry: str = "launch") -> KernelSourceError:
    with pytest.raises(KernelSourceError) as info:
        KernelSource(text, entry)
    return info.value


def test_syntax_error_names_line_and_column():
    err = refused("import torch\n\ndef launch(x, out:\n    pass\n")
    assert err.problems[0].line == 3 and "syntax error" in str(err)
    assert "<text>:3:" in str(err)


@pytest.mark.parametrize("statement, words", [
    ("print('hello')", "top-level Expr statement runs at import"),
    ("for i in range(3):\n    pass", "top-level For statement"),
    ("if True:\n    import torch", "top-level If statement"),
    ("class K:\n    pass", "top-level class statement"),
    ("X = torch.zeros(3)", "computed value runs at import"),
    ("import os", "import of 'os': kernel source may import only torch"),
    ("from subprocess import run", "import of 'subprocess'"),
    ("from . import sibling", "relative import"),
    ("import torch\nBLOCK = torch.cuda.Stream", None),  # a dotted name is static: accepted
])
def test_top_level_code_that_would_run_at_import_is_refused(statement, words):
    text = "import torch\n" + statement + OK_LAUNCH
    if words is None:
        assert KernelSource(text).version
        return
    assert words in str(refused(text))


def test_imports_inside_functions_are_checked_too():
    err = refused("import torch\n\ndef launch(x, out):\n    import socket\n    out.copy_(x)\n")
    assert err.problems[0].line == 4 and "'socket'" in str(err)


def test_import_time_parts_of_a_def_are_checked():
    text = ("import torch\n\ndef helper(x, n=len('abc')):\n    return x\n\n"
            "@cache_everything\ndef launch(x, out: make_type()):\n    out.copy_(x)\n")
    message = str(refused(text))
    assert "default value \"len('abc')\" of helper is computed at import" in message
    assert "decorator 'cache_everything' of launch does not come from an imported module" in message
    assert "annotation 'make_type()' of launch is computed at import" in message


def test_missing_entry_lists_the_functions_there_are():
    err = refused("import torch\n\ndef run(x, out):\n    pass\n\ndef helper():\n    pass\n")
    assert "no top-level function 'launch' (the entry); functions defined: helper, run" in str(err)


def test_jit_kernel_as_entry_is_refused():
    text = "import triton\n\n@triton.jit\ndef launch(x_ptr):\n    pass\n"
    assert "the entry must be the host function that launches it" in str(refused(text))


def test_triton_autotune_is_refused_for_declared_params():
    text = ("import triton\n\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x_ptr):\n    pass\n"
            + OK_LAUNCH)
    assert "declare PARAMS" in str(refused(text))


def test_every_problem_is_reported_at_once():
    err = refused("import os\nprint(1)\n\ndef run():\n    pass\n")
    assert len(err.problems) == 3
    assert [p.line for p in err.problems] == [1, 2, 0]


@pytest.mark.parametrize("entry", ["", "not a name", 3])
def test_entry_must_be_a_name(entry):
    assert "the entry must name a function" in str(refused("def launch():\n    pass\n", entry))


def test_non_text_source_is_refused():
    assert "source must be text" in str(refused(b"def launch(): pass"))


@pytest.mark.parametrize("text", [
    "import torch\nX: torch.manual_seed(0) = 1\n" + OK_LAUNCH,
    "import torch\nX: list[torch.manual_seed(0)] = []\n" + OK_LAUNCH,
    "import torch\n\ndef launch(x: torch.manual_seed(0)[0], out):\n    out.copy_(x)\n",
    "import torch\n\ndef launch(x: dict[str, torch.manual_seed(0)], out):\n    out.copy_(x)\n",
])
def test_annotations_that_call_at_import_are_refused(text):
    assert "is computed at import" in str(refused(text))


def test_static_annotations_are_accepted():
    text = ("import torch\nX: int = 1\nY: dict[str, tuple[int, ...]] = {}\n\n"
            "def launch(x: torch.Tensor, out: list[torch.Tensor]) -> None:\n    out.copy_(x)\n")
    assert KernelSource(text).version


@pytest.mark.parametrize("text", [
    "from triton import autotune\n" + OK_LAUNCH,
    "from triton import autotune as tune\n" + OK_LAUNCH,
    "import triton\n\ndef launch(x, out):\n    autotune(x)\n",
])
def test_autotune_imported_by_name_is_refused(text):
    assert "declare PARAMS" in str(refused(text))


def test_annotated_params_are_read():
    text = 'PARAMS: dict = {"BLOCK": (64, 128)}\nLIMIT: int\n' + OK_LAUNCH
    src = KernelSource(text)
    assert src.constants == {"PARAMS": {"BLOCK": (64, 128)}}
    assert [(p.name, p.choices, p.default) for p in src.declared_params()] == [("BLOCK", (64, 128), 64)]
