from hoid.cli import main


def test_optimize_the_example_prints_a_labelled_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOID_CACHE", str(tmp_path / "c.sqlite"))
    monkeypatch.setenv("HOID_KERNELS", str(tmp_path / "k.sqlite"))
    code = main(["optimize", "example:mlp_block", "--agent", "library", "--budget", "1 attempts",
                 "--device", "h200", "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "o.hoid")])
    out, err = capsys.readouterr()
    assert code == 0 and "modelled gain" in out and "not a speedup" in out and "[1]" in err
    assert (tmp_path / "o.hoid").is_file()


def test_a_bad_budget_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["optimize", "example:mlp_block", "--budget", "soon", "--journal", str(tmp_path / "j")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hoid: ") and err.count("\n") == 1 and "--budget soon" in err
