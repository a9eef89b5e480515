"""The README's front door: its links resolve inside the repository, and its two commands say what they do."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_every_relative_link_of_the_readme_resolves_in_the_repository():
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", README) if "://" not in target]
    assert "docs/design.md" in links
    missing = [link for link in links if link and not (ROOT / link).exists()]
    assert not missing, missing
    assert "DESIGN.md" not in README  # the design lives in the repository now


def test_the_design_has_the_precision_policy_the_readme_links_to():
    assert "\n## Precision\n" in (ROOT / "docs" / "design.md").read_text()


def test_the_quick_start_installs_the_main_job_without_dev_extras_and_ci_runs_the_test_command():
    commands = re.findall(r"```sh\n(.+?)\n```", README)
    main_job, tests = commands[0], commands[1]
    assert main_job.endswith('hoid optimize example:mlp_block --budget "10 attempts"') and "[dev]" not in main_job
    assert "pip install torch==2.13.0" in main_job.split("&&")[2] and "pip install torch==2.13.0" in tests
    assert "--clear" in tests  # it starts fresh even where the first command made .venv
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    ci_command = ci[ci.index("# --- the README's test command, verbatim ---") + 1]
    assert ci_command.replace(" -q", "") in tests.replace(" -q", "")


# --- the guide in docs/: every code block runs, page by page, in order, in one fresh folder per page ---
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

GUIDE = ["tutorial.md", "check-your-kernel.md", "write-a-proposer.md", "outside-agents.md", "export-and-ship.md",
         "torch-compile.md", "see-it.md"]
BLOCK = re.compile(r"```(sh|python)\n(.*?)```", re.S)


def test_the_guide_is_linked_from_the_readme_and_its_pages_and_images_resolve():
    assert "docs/index.md" in README
    for page in ["index.md", *GUIDE]:
        text = (ROOT / "docs" / page).read_text()
        links = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
        missing = [link for link in links if link and not (ROOT / "docs" / link).exists()]
        assert not missing, (page, missing)


def run_blocks(page: str, text: str, folder) -> None:
    """Run the page's code blocks in order in `folder`: sh blocks in bash -e with `hoid` on PATH, python
    blocks in a fresh interpreter; a block that fails stops it with its output."""
    blocks = BLOCK.findall(text)
    assert blocks, page
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "hoid").write_text(f"#!{sys.executable}\nimport sys\nfrom hoid.cli import main\nsys.exit(main())\n")
    (bin_dir / "hoid").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "HOID_CACHE": str(folder / "cache.sqlite"), "HOID_KERNELS": str(folder / "kernels.sqlite")}
    python = os.path.dirname(sys.executable)
    env["PATH"] += os.pathsep + python
    if page != "tutorial.md":  # later pages start where the tutorial's first step left off: mlp.hoid
        # written here, not by a process of its own (the same file: mlp_block's weights are seeded), which
        # imported torch and hoid again for it: ~2 s of CPU a page on the 2-core CI machine
        import hoid
        from hoid.models.examples import mlp_block

        hoid.save(mlp_block(), folder / "mlp.hoid")
    for kind, code in blocks:
        command = ["bash", "-e", "-o", "pipefail", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
        if kind == "sh" and "| head" in code:
            command = ["bash", "-e", "-c", code]  # head closing the pipe early is not a failure
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (f"{page}: block failed:\n{code}\n--- stdout\n{done.stdout}\n"
                                      f"--- stderr\n{done.stderr}")


@pytest.mark.slow
@pytest.mark.parametrize("page", GUIDE)
def test_every_code_block_of_the_guide_runs(page, tmp_path):
    """Each page in a folder of its own, which its earlier blocks (and the tutorial's first step) wrote into."""
    run_blocks(page, (ROOT / "docs" / page).read_text(), tmp_path)


def test_a_failing_block_fails_the_page(tmp_path):
    page = "A page.\n\n```sh\nhoid --version\n```\n\n```python\nimport hoid\nassert hoid.__version__ == 'none'\n```\n"
    with pytest.raises(AssertionError, match=r"broken.md: block failed:(.|\n)*import hoid(.|\n)*AssertionError"):
        run_blocks("broken.md", page, tmp_path)


def test_the_op_table_page_is_what_the_registry_generates():
    done = subprocess.run([sys.executable, "-m", "hoid.viz.op_table"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert (ROOT / "docs" / "op-table.md").read_text() == done.stdout, "run: python -m hoid.viz.op_table > " \
        "docs/op-table.md"


def mkdocs_command() -> list[str]:
    """mkdocs from this interpreter (the `docs` extra, which `dev` includes), else MKDOCS; else the test skips."""
    import importlib.util

    if os.environ.get("MKDOCS"):
        return [os.environ["MKDOCS"]]
    if importlib.util.find_spec("mkdocs") and importlib.util.find_spec("mkdocstrings_handlers"):
        return [sys.executable, "-m", "mkdocs"]
    pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")


def build_site(config_dir, site):
    return subprocess.run([*mkdocs_command(), "build", "--strict", "--site-dir", str(site)], cwd=config_dir,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once with --strict: a broken link, anchor or API cross-reference fails it."""
    site = tmp_path_factory.mktemp("site")
    done = build_site(ROOT, site)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


@pytest.mark.slow
def test_the_site_builds_with_strict(site):
    assert (site / "tutorial" / "index.html").is_file() and (site / "api" / "index.html").is_file()


def inventory(site) -> list[str]:
    """The names mkdocstrings documented (its Sphinx-format objects.inv)."""
    import zlib

    head, _, body = (site / "objects.inv").read_bytes().partition(b"zlib.\n")
    assert head.startswith(b"# Sphinx inventory version 2"), head[:60]
    return [line.split(" ")[0] for line in zlib.decompress(body).decode().splitlines()]


def resolve(path: str) -> list:
    """The objects a dotted name may document: `hoid.runtime.export` is both a function (the attribute) and
    a module (the file), and mkdocstrings names a member of either by the same path."""
    import importlib

    parts = path.split(".")
    found = [importlib.import_module(parts[0])]
    for i, part in enumerate(parts[1:], 1):
        step = [getattr(o, part) for o in found if hasattr(o, part)]
        try:
            step.append(importlib.import_module(".".join(parts[:i + 1])))
        except ImportError:
            pass
        found = step
    return found


def exported_packages() -> list[str]:
    """hoid and each of its subpackages that declares `__all__`."""
    names = ["hoid"]
    for init in sorted((ROOT / "hoid").glob("*/__init__.py")):
        if re.search(r"^__all__\b", init.read_text(), re.M):
            names.append(f"hoid.{init.parent.name}")
    return names


@pytest.mark.slow
def test_every_exported_class_and_function_is_in_the_api_reference(site):
    """Each name of each package's `__all__` that is a class or a function (constants carry no docstring)
    is documented: some name in the site's inventory is that very object."""
    import importlib
    import inspect

    documented = set()
    for name in inventory(site):
        documented.update(id(o) for o in resolve(name))
    missing = []
    for package in exported_packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) not in documented:
                missing.append(f"{package}.{name}")
    assert len(exported_packages()) >= 10
    assert not missing, f"not in docs/api.md's pages (no docstring, or its module not listed): {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["[the missing function][hoid.no_such_function]", "[a page](no-such-page.md)"])
def test_a_broken_cross_reference_or_link_fails_the_strict_build(broken, tmp_path):
    shutil_copy = __import__("shutil").copytree
    shutil_copy(ROOT / "docs", tmp_path / "docs")
    config = (ROOT / "mkdocs.yml").read_text()
    assert "paths: [.]" in config
    (tmp_path / "mkdocs.yml").write_text(config.replace("paths: [.]", f"paths: [{ROOT}]"))
    with open(tmp_path / "docs" / "index.md", "a") as f:
        f.write(f"\nSee {broken}.\n")
    done = build_site(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert ("no_such_function" if "hoid." in broken else "no-such-page.md") in done.stdout + done.stderr
