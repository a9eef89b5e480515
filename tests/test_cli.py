"""The `hoid` command: the README's main job works end to end, and a user's mistake is a message, not a trace."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hoid
from hoid.cli import main
from hoid.models.examples import mlp_block

ROOT = str(Path(__file__).resolve().parents[1])


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
    assert err.count("\n") == 1, err  # one line: where, what, the fix
    assert f"ParseError: {tmp_path / 'bad.hoid'}, line " in err and "unknown op 'rsqrtt'; did you mean rsqrt" in err
    assert "Traceback" not in err


def test_version_names_hoid_and_torch(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"hoid {hoid.__version__} (torch {torch.__version__})"


def _binary(tmp_path):
    path = tmp_path / "weights.hoid"
    path.write_bytes(b"\x89hoid\xff\xfe" + bytes(range(256)))
    return path


@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "missing.hoid", "missing.hoid: no such file; give the path of a .hoid document"),
    (lambda tmp: tmp, "is a directory; give the path of a .hoid document"),
    (_binary, "weights.hoid: not a text file (byte 0, line 1"),
])
def test_validate_reports_a_bad_path_in_one_line_without_traceback(tmp_path, capsys, make, words):
    assert main(["validate", str(make(tmp_path))]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hoid: ") and words in lines[0], captured.err


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(Exception, match="no such file"):
        main(["validate", str(tmp_path / "missing.hoid"), "--debug"])
    with pytest.raises(Exception, match="no such file"):
        main(["--debug", "validate", str(tmp_path / "missing.hoid")])


def test_the_installed_command_exits_non_zero_with_one_line(tmp_path):
    # The real process, as a user runs it: nothing of Python's traceback machinery reaches the terminal.
    done = subprocess.run([sys.executable, "-m", "hoid.cli", "validate", str(tmp_path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


def test_validate_without_the_weights_file_checks_the_structure_and_says_so(tmp_path, capsys):
    graph = mlp_block()
    graph.weights = {v.name: torch.zeros(v.type.shape, dtype=v.type.torch_dtype) for v in graph.weight_inputs}
    hoid.save(graph, tmp_path / "mlp.hoid")
    assert main(["validate", str(tmp_path / "mlp.hoid")]) == 0
    assert "weights checked against mlp.safetensors" in capsys.readouterr().out
    (tmp_path / "mlp.safetensors").unlink()
    assert main(["validate", str(tmp_path / "mlp.hoid")]) == 0
    out = capsys.readouterr().out
    assert "is valid: 5 inputs, 17 nodes" in out and "the weights were not checked" in out


def test_validate_still_checks_weights_that_do_not_match(tmp_path, capsys):
    graph = mlp_block()
    graph.weights = {v.name: torch.zeros(v.type.shape, dtype=v.type.torch_dtype) for v in graph.weight_inputs}
    hoid.save(graph, tmp_path / "mlp.hoid")
    from safetensors.torch import save_file

    save_file({"stray": torch.zeros(2)}, str(tmp_path / "mlp.safetensors"))
    assert main(["validate", str(tmp_path / "mlp.hoid")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GraphError" in err and "stray" in err
