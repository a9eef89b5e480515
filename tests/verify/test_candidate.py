"""Candidates as callables or kernel source: forms accepted, loading, static findings."""

import pytest

from hoid.verify import KernelSource, VerifyError
from hoid.verify.candidate import as_candidate, load_source, static_findings


def test_source_is_text_or_a_path(tmp_path):
    text = "def f(x):\n    return x\n"
    assert as_candidate((text, "f")) == KernelSource(text, "f")
    path = tmp_path / "k.py"
    path.write_text(text)
    assert KernelSource.of(path, "f") == KernelSource(text, "f", str(path))
    with pytest.raises(VerifyError, match="no file"):
        KernelSource.of("missing.py", "f")
    with pytest.raises(VerifyError, match="name of a function"):
        KernelSource.of(text, "not a name")


def test_loading_finds_the_entry_or_names_what_is_there():
    assert load_source(KernelSource("def f(x):\n    return x + 1\n", "f"))(1) == 2
    with pytest.raises(VerifyError, match="defines: f"):
        load_source(KernelSource("def f(x):\n    return x\n", "g"))


def test_syntax_errors_are_static_findings():
    findings, _ = static_findings(KernelSource("def f(:\n", "f"))
    assert findings[0].construct == "a syntax error"
