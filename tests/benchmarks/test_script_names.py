"""A benchmark script runs as `python benchmarks/X.py`, which puts `benchmarks/` first on `sys.path`: a
script named like an installed package hides that package from every library the script imports."""

import importlib.metadata
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_no_script_shadows_an_installed_package():
    installed = importlib.metadata.packages_distributions()  # top-level import name -> distributions
    scripts = {path.stem for path in BENCHMARKS.glob("*.py")} | {path.name for path in BENCHMARKS.iterdir()
                                                                 if (path / "__init__.py").is_file()}
    clashes = {name: installed[name] for name in sorted(scripts & set(installed))}
    assert not clashes, f"benchmarks/ modules named like installed packages (rename them): {clashes}"
