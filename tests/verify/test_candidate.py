"""Candidates as callables or kernel source: the forms accepted, and what the static pass reads."""

import pytest

import hoid.verify.candidate as candidate_module
from hoid.verify import KernelSource, VerifyError
from hoid.verify.candidate import RefusedSource, as_candidate, static_findings

TEXT = "import torch\n\n\ndef f(x):\n    return x + 1\n"


def test_source_is_text_or_a_path(tmp_path):
    assert as_candidate((TEXT, "f")) == KernelSource(TEXT, "f")
    path = tmp_path / "k.py"
    path.write_text(TEXT)
    assert as_candidate((path, "f")) == KernelSource(TEXT, "f", str(path))
    assert as_candidate((str(path), "f")).path == str(path)
    with pytest.raises(VerifyError, match="no file"):
        as_candidate(("missing.py", "f"))
    with pytest.raises(VerifyError, match="expected a callable"):
        as_candidate(42)


def test_source_the_loader_refuses_is_still_read_by_the_static_pass():
    refused = as_candidate(("import threading\n\n\ndef f(x):\n    return x\n", "f"))
    assert isinstance(refused, RefusedSource)
    findings, _ = static_findings(refused)
    constructs = {f.construct for f in findings}
    assert {"import threading", "kernel source structure"} <= constructs


def test_syntax_errors_are_findings_with_their_line():
    findings, _ = static_findings(as_candidate(("def f(:\n    pass\n", "f")))
    assert findings[0].construct == "kernel source structure" and "syntax error" in findings[0].why


def test_source_that_does_not_parse_alone_is_noted_not_fatal(monkeypatch):
    # inspect gives a lambda the lines around it, which need not parse on their own.
    monkeypatch.setattr(candidate_module, "callable_sources", lambda fn: ([("m.<lambda>", "f(lambda x: x,\n")], []))
    findings, notes = static_findings(lambda x: x)
    assert findings == [] and notes == ["the static pass could not read the source of m.<lambda>"]
