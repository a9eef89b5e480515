"""The `hoid` command: the README's main job works end to end, and a user's mistake is a message, not a trace."""

import re

import hoid
from hoid.cli import main
from hoid.models.examples import mlp_block


def test_example_prints_runs_and_optimizes_with_equal_outputs(capsys):
    assert main(["example"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# mlp_block: the document") and "hoid 1\ngraph @mlp_block" in out
    assert "# optimized by e-graph search" in out and "rmsnorm(" in out  # the decomposed norm was recognized
    error = float(re.search(r"relative L2 error (\S+)", out).group(1))
    assert error < 1e-5


def test_validate_reports_a_valid_document(tmp_path, capsys):
    hoid.save(mlp_block(), tmp_path / "mlp.hoid")
    assert main(["validate", str(tmp_path / "mlp.hoid")]) == 0
    assert "is valid: 5 inputs, 17 nodes" in capsys.readouterr().out


def test_validate_refuses_a_malformed_document_with_line_and_hint(tmp_path, capsys):
    text = hoid.dumps(mlp_block()).replace("rsqrt(", "rsqrtt(")
    (tmp_path / "bad.hoid").write_text(text)
    assert main(["validate", str(tmp_path / "bad.hoid")]) == 2
    err = capsys.readouterr().err
    assert "ParseError: line" in err and "unknown op 'rsqrtt'; did you mean rsqrt" in err
    assert "Traceback" not in err
