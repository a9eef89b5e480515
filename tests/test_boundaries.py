"""The package boundaries of docs/design.md, checked: who may import whom, and the one kernel launcher."""

import ast
import pathlib
import subprocess
import sys

import pytest

HOID = pathlib.Path(__file__).resolve().parents[1] / "hoid"


def _imported_modules(package: str) -> set[str]:
    """Every hoid module a fresh interpreter has loaded after importing `package` and all its submodules."""
    code = ("import importlib, pkgutil, sys\n"
            f"pkg = importlib.import_module({package!r})\n"
            "for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
            "    importlib.import_module(m.name)\n"
            "print('\\n'.join(sorted(n for n in sys.modules if n.startswith('hoid'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


LAZY = {"hoid.search"}


@pytest.mark.parametrize("package, forbidden", [
    ("hoid.ir", ("hoid.search", "hoid.agent", "hoid.kernels", "hoid.runtime")),
    ("hoid.kernels", ("hoid.search", "hoid.agent", "hoid.measure", "hoid.runtime")),
    ("hoid.verify", ("hoid.search", "hoid.agent")),
    ("hoid.measure", ("hoid.search", "hoid.agent", "hoid.runtime")),
])
def test_package_imports_stay_inside_their_boundary(package, forbidden):
    loaded = _imported_modules(package)
    # `import hoid` loads hoid.search's lazy facade (its __init__ only): a boundary is crossed by a module of it
    crossed = sorted(m for m in loaded if any(m.startswith(f + ".") or (m == f and f not in LAZY) for f in forbidden))
    assert not crossed, f"importing {package} loads {crossed}"


def _calls_of_spec_launch(path: pathlib.Path) -> list[int]:
    """Lines where `<something>.launch(...)` is called on a spec (an attribute call named `launch` whose
    receiver is not a Triton kernel grid: `kernel[grid](...)` is a Subscript call, not an attribute)."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "launch"
            and isinstance(node.func.value, ast.Attribute | ast.Name) and _is_spec(node.func.value)]


def _is_spec(receiver) -> bool:
    name = receiver.attr if isinstance(receiver, ast.Attribute) else receiver.id
    return name == "spec" or name.endswith("spec") or name.endswith("SPEC")


def test_a_kernel_spec_is_launched_in_exactly_one_module():
    callers = {str(p.relative_to(HOID)): lines for p in HOID.rglob("*.py") if (lines := _calls_of_spec_launch(p))}
    assert list(callers) == ["kernels/launch.py"], callers
