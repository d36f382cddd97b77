"""`neuron-ready hook`, the pre-commit entry point, called the way pre-commit calls it (fast checks;
tests/test_precommit.py runs the real pre-commit)."""

from __future__ import annotations

import re

from cli import run_cli

GPU = "import torch\n\nx = torch.zeros(3).cuda()\n"


def test_no_files_passes_silently(tmp_path):
    (tmp_path / "train.py").write_text(GPU, encoding="utf-8")  # never scanned: no file was passed
    r = run_cli("hook", cwd=tmp_path)
    assert (r.code, r.out, r.err) == (0, "", "")


def test_fails_on_any_finding_by_default(tmp_path):
    (tmp_path / "train.py").write_text(GPU, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("torch.cuda\n", encoding="utf-8")
    r = run_cli("hook", "train.py", "notes.txt", cwd=tmp_path)
    assert r.code == 1
    assert r.out.startswith("train.py\n") and "NR1001" in r.out
    assert r.err.strip() == "neuron-ready: --fail-on met: 1 finding"


def test_threshold_from_args_or_configuration(tmp_path):
    (tmp_path / "train.py").write_text(GPU, encoding="utf-8")
    assert run_cli("hook", "train.py", "--fail-on", "triton", cwd=tmp_path).code == 0
    assert run_cli("hook", "train.py", "--fail-on", "device", cwd=tmp_path).code == 1
    (tmp_path / "pyproject.toml").write_text('[tool.neuron-ready]\nfail-on = ["month-plus"]\n', encoding="utf-8")
    assert run_cli("hook", "train.py", cwd=tmp_path).code == 0  # the configured threshold replaces `any`
    assert run_cli("hook", "train.py", "--fail-on", "any", cwd=tmp_path).code == 1


def test_clean_files_print_nothing(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(3)\n", encoding="utf-8")
    r = run_cli("hook", "ok.py", cwd=tmp_path)
    assert (r.code, r.out) == (0, "")


def test_baseline_in_the_hook(tmp_path):
    (tmp_path / "train.py").write_text(GPU, encoding="utf-8")
    assert run_cli("scan", "--write-baseline", "b.json", "-o", "report.txt", cwd=tmp_path).code == 0
    assert run_cli("hook", "train.py", "--baseline", "b.json", cwd=tmp_path).code == 0
    (tmp_path / "train.py").write_text(GPU + "y = torch.ones(1).cuda()\n", encoding="utf-8")
    r = run_cli("hook", "train.py", "--baseline", "b.json", cwd=tmp_path)
    listed = [int(m.group(1)) for m in re.finditer(r"^\s+(\d+):\d+\s+NR\d+", r.out, re.M)]
    assert r.code == 1 and listed == [4]  # only the new line, not the known one on line 3
    assert "1 new finding, 1 known" in r.err


def test_main_help_lists_the_review_commands():
    r = run_cli("--help")
    for cmd in ("diff", "hook", "ci", "comment"):
        assert f"neuron-ready {cmd}" in r.out


def test_file_names_that_look_like_options_stay_files(tmp_path):
    """A committed file named `--ignore=NR1001` or `--config=evil.toml` (pre-commit passes it after
    the hook's args) must not switch off a real finding."""
    (tmp_path / "train.py").write_text(GPU, encoding="utf-8")
    (tmp_path / "evil.toml").write_text("[tool.neuron-ready]\nignore = [\"NR1001\"]\n", encoding="utf-8")
    for name in ("--ignore=NR1001", "--config=evil.toml", "--select=NR99", "-q"):
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    r = run_cli("hook", "--fail-on", "any", "--ignore=NR1001", "--config=evil.toml", "--select=NR99", "-q",
                "train.py", cwd=tmp_path)
    assert r.code == 1, r.err
    assert "NR1001" in r.out
    # the same arguments as real options still work when no such file exists
    for name in ("--ignore=NR1001", "--config=evil.toml", "--select=NR99", "-q"):
        (tmp_path / name).unlink()
    assert run_cli("hook", "--ignore=NR1001", "train.py", cwd=tmp_path).code == 0
