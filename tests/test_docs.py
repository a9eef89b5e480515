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

GUIDE = ["tutorial.md", "check-your-kernel.md", "write-a-proposer.md", "outside-agents.md", "see-it.md"]
BLOCK = re.compile(r"```(sh|python)\n(.*?)```", re.S)


def test_the_guide_is_linked_from_the_readme_and_its_pages_and_images_resolve():
    assert "docs/index.md" in README
    for page in ["index.md", *GUIDE]:
        text = (ROOT / "docs" / page).read_text()
        links = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
        missing = [link for link in links if link and not (ROOT / "docs" / link).exists()]
        assert not missing, (page, missing)


@pytest.mark.slow
@pytest.mark.parametrize("page", GUIDE)
def test_every_code_block_of_the_guide_runs(page, tmp_path):
    """sh blocks run in bash -e with `hoid` on PATH; python blocks run in a fresh interpreter; both in a folder
    that earlier blocks (and the tutorial's first steps, which later pages build on) wrote into."""
    blocks = BLOCK.findall((ROOT / "docs" / page).read_text())
    assert blocks, page
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hoid").write_text(f"#!{sys.executable}\nimport sys\nfrom hoid.cli import main\nsys.exit(main())\n")
    (bin_dir / "hoid").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "HOID_CACHE": str(tmp_path / "cache.sqlite"), "HOID_KERNELS": str(tmp_path / "kernels.sqlite")}
    python = os.path.dirname(sys.executable)
    env["PATH"] += os.pathsep + python
    if page != "tutorial.md":  # later pages start where the tutorial's first step left off: mlp.hoid
        subprocess.run([sys.executable, "-c", "import hoid; from hoid.models.examples import mlp_block; "
                        "hoid.save(mlp_block(), 'mlp.hoid')"], cwd=tmp_path, env=env, check=True)
    for kind, code in blocks:
        command = ["bash", "-e", "-o", "pipefail", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
        if kind == "sh" and "| head" in code:
            command = ["bash", "-e", "-c", code]  # head closing the pipe early is not a failure
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (f"{page}: block failed:\n{code}\n--- stdout\n{done.stdout}\n"
                                      f"--- stderr\n{done.stderr}")


def test_the_op_table_page_is_what_the_registry_generates():
    done = subprocess.run([sys.executable, "-m", "hoid.viz.op_table"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert (ROOT / "docs" / "op-table.md").read_text() == done.stdout, "run: python -m hoid.viz.op_table > " \
        "docs/op-table.md"


@pytest.mark.slow
def test_the_site_builds_with_strict(tmp_path):
    """mkdocs build --strict: a broken link, anchor or API cross-reference fails it. MKDOCS names the mkdocs
    to run (CI installs the `docs` extra); without one this skips."""
    import shutil

    mkdocs = os.environ.get("MKDOCS") or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()
