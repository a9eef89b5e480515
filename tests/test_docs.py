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
