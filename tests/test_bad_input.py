"""Bad input never stops a scan: each broken file is a diagnostic with path and reason."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from cli import run_cli
from scanning import scan_text


@pytest.fixture
def broken_repo(tmp_path, fixtures):
    repo = tmp_path / "broken"
    shutil.copytree(fixtures / "broken", repo)
    # ~3 MiB, above the 2 MiB default, but one long string: cheap to parse when the limit is raised
    # (120,000 statements took libcst about a minute and 3 GB, past the per-file CPU limit on a busy CI)
    big = 'import torch\nx = torch.ones(1).cuda()\nTABLE = """\n' + "0123456789abcdef " * 190_000 + '\n"""\n'
    (repo / "generated_big.py").write_text(big)
    os.symlink(repo / "loop2", repo / "loop1")
    os.symlink(repo / "loop1", repo / "loop2")
    return repo


def test_broken_fixture_reports_every_problem_and_still_finds_the_rest(broken_repo):
    r = run_cli("scan", str(broken_repo), "--format", "json")
    assert r.code == 0, r.err
    assert "Traceback" not in r.err
    report = json.loads(r.out)
    diags = {(d["path"], d["kind"]) for d in report["diagnostics"]}
    assert diags == {
        ("broken_notebook.ipynb", "notebook"),
        ("generated_big.py", "too-large"),
        ("latin1.py", "decode-error"),
        ("loop1", "symlink"),
        ("loop2", "symlink"),
        ("nul_bytes.py", "binary"),
        ("partial_notebook.ipynb", "syntax-error"),
        ("py2_script.py", "syntax-error"),
        ("pyproject.toml", "syntax-error"),
        ("syntax_error.py", "syntax-error"),
        ("train_config.yaml", "syntax-error"),
    }
    by_path = {d["path"]: d for d in report["diagnostics"]}
    assert "Python 2" in by_path["py2_script.py"]["message"]
    assert by_path["partial_notebook.ipynb"]["message"].startswith("cannot parse at cell 2, line 1")
    assert by_path["latin1.py"]["line"] == 2
    found = {(f["path"], f["line"], f["rule"]) for f in report["findings"]}
    assert ("good.py", 3, "NR1001") in found
    assert ("partial_notebook.ipynb", 1, "NR1001") in found  # the cells after a broken one still count
    assert by_path["train_config.yaml"]["message"].startswith("invalid YAML") and by_path["train_config.yaml"]["line"] == 5
    assert report["summary"]["files_scanned"] == 11  # README.md is read for launch commands


def test_size_limit_is_configurable(broken_repo):
    r = json.loads(run_cli("scan", str(broken_repo), "--format", "json", "--max-file-size", "8MiB").out)
    assert "generated_big.py" not in {d["path"] for d in r["diagnostics"]}
    assert any(f["path"] == "generated_big.py" for f in r["findings"])


def test_file_that_vanishes_between_discovery_and_reading(tmp_path):
    from neuron_ready.catalog import load_catalog
    from neuron_ready.sources import FileJob, ScanContext, scan_file

    res = scan_file(FileJob(str(tmp_path / "gone.py"), "gone.py", "python"), ScanContext(load_catalog(), "native"))
    assert [(d.kind, d.message.split(":")[0]) for d in res.diagnostics] == [("unreadable", "cannot read")]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path):
    p = tmp_path / "secret.py"
    p.write_text("import torch\nx.cuda()\n")
    p.chmod(0)
    r = json.loads(run_cli("scan", str(tmp_path), "--format", "json").out)
    assert [(d["path"], d["kind"]) for d in r["diagnostics"]] == [("secret.py", "unreadable")]


def test_deep_nesting_is_a_diagnostic_not_a_crash():
    code = "import torch\nx = " + "(" * 3000 + "1" + ")" * 3000 + "\ny = x.cuda()\n"
    res = scan_text(code)
    assert not [d for d in res.diagnostics if d.kind == "internal-error"]


def test_declared_encoding_is_honoured():
    res = scan_text("# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nx.cuda()\n".encode("latin-1"))
    assert res.diagnostics == [] and [f.line for f in res.findings] == [4]


# ------------------------------------------------------------------ content that used to exit 3


def test_a_gitignore_pattern_git_cannot_read_is_a_diagnostic(tmp_path):
    (tmp_path / ".gitignore").write_text("*.log\n\\\n", encoding="utf-8")
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    (tmp_path / "debug.log").write_text("x\n", encoding="utf-8")
    r = run_cli("scan", str(tmp_path), "--format", "json", "--no-cache")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [f["path"] for f in report["findings"]] == ["train.py"]
    assert [(d["path"], d["line"], d["kind"]) for d in report["diagnostics"]] == [(".gitignore", 2, "unreadable")]


@pytest.mark.parametrize("content", [
    b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000, b'{"schema_version": 1e999}', b"NaN", b"\x00\x00",
    b'{"schema_version": 1, "summary": {"score": 1, "effort": {"class": "days"}}, "findings": [{"rule": 5, '
    b'"category": "x", "path": "a.py", "line": 1}]}',
    b'{"schema_version": 1, "summary": {"score": 1, "effort": {"class": "days"}}, "findings": [{"rule": "NR1", '
    b'"category": "x", "path": ["a.py"], "line": 1}]}',
], ids=["not-utf8", "deep", "1e999", "nan", "nulls", "rule-int", "path-list"])
def test_a_bad_baseline_is_one_line_and_exit_2(tmp_path, content):
    (tmp_path / "train.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "baseline.json").write_bytes(content)
    r = run_cli("scan", "train.py", "--baseline", "baseline.json", "--no-cache", cwd=tmp_path)
    assert r.code == 2, r.err
    assert r.err.startswith("neuron-ready: error: baseline.json") and len(r.err.strip().splitlines()) == 1


def test_output_that_cannot_be_written_keeps_the_old_file_and_exits_2(tmp_path):
    import resource
    import signal

    def small_files():  # a disk that is full past 1 KiB
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    (tmp_path / "train.py").write_text("import torch\n" + "x = torch.zeros(1).cuda()\n" * 40, encoding="utf-8")
    (tmp_path / "report.json").write_text("the old report\n", encoding="utf-8")
    for flag in ("-o", "--write-baseline"):
        r = run_cli("scan", ".", "--format", "json", flag, "report.json", "--no-cache", cwd=tmp_path, preexec_fn=small_files)
        assert r.code == 2 and "cannot write report.json" in r.err, r.err
        assert (tmp_path / "report.json").read_text(encoding="utf-8") == "the old report\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "train.py"]  # no temporary left
    with open("/dev/full", "w") as dev_full:
        import subprocess
        import sys

        p = subprocess.run([sys.executable, "-m", "neuron_ready", "scan", ".", "--no-cache"], cwd=tmp_path,
                           stdout=dev_full, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 2 and p.stderr.strip() == "neuron-ready: error: cannot write the output: No space left on device"


def _reading_stdin(pid: int) -> bool:
    """Blocked in read(0, ...): /proc/PID/syscall on x86-64 (read is syscall 0), else a pipe wait
    channel, which `git` (run by `comment` before it reads the body) would also show."""
    try:
        return open(f"/proc/{pid}/syscall").read().startswith("0 0x0 ")
    except OSError:
        return "pipe_read" in open(f"/proc/{pid}/wchan").read()


def test_ctrl_c_exits_130_not_1(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ, GITHUB_TOKEN="t")
    p = subprocess.Popen([sys.executable, "-m", "neuron_ready", "comment", "-", "--repo", "a/b", "--pr", "1"],
                         cwd=tmp_path, env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # until it waits for the body on stdin (imports done, inside the command)
        if p.poll() is not None or _reading_stdin(p.pid):
            break
        time.sleep(0.1)
    # it exited 2 a few times in full suite runs, never alone: say whether it stopped before the signal, and why
    early = p.poll() is not None
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert not early, f"exited {p.returncode} before Ctrl-C: {err.strip()}"
    assert p.returncode == 130 and err.strip().endswith("neuron-ready: interrupted"), (p.returncode, err)


def test_packaging_files_read_in_the_main_process_cannot_stop_the_scan(tmp_path):
    """A non-UTF-8 root pyproject.toml exited 3; a FIFO named setup.py or setup.cfg would block the
    main process (which reads them for console scripts) forever."""
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "\xff\xfe"\n')
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    os.mkfifo(tmp_path / "setup.py")
    os.mkfifo(tmp_path / "setup.cfg")
    os.mkfifo(tmp_path / ".gitmodules")
    r = run_cli("scan", str(tmp_path), "--format", "json", "--no-cache", timeout=120)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [f["path"] for f in report["findings"]] == ["train.py"]
    assert {d["path"] for d in report["diagnostics"]} >= {"setup.py"}


def test_large_native_and_dependency_files_are_linear(tmp_path):
    """A 900 KB .cu of unbalanced kernels hit the per-file timeout (brace matching from every
    kernel); a 1.7 MB pyproject.toml took 46 s (a scan of all lines per dependency), and large
    requirements and environment files were slow too. With a 30 CPU-second limit per file (it was
    minutes), each is scanned whole: nothing times out and the line numbers are right."""
    n = 20_000
    (tmp_path / "kernels.cu").write_text("__global__ void k(float* x) {\n  x[0] = 1;\n" * n, encoding="utf-8")
    (tmp_path / "CMakeLists.txt").write_text("add_library(x " + "a." * 300_000 + ")\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\ndependencies = [\n" + "".join(f'  "pkg{i}>=1.0",\n' for i in range(60_000))
        + '  "cupy-cuda12x",\n]\n', encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("".join(f"pkg{i}>=1.0\n" for i in range(60_000)) + "cupy-cuda12x\n",
                                               encoding="utf-8")
    (tmp_path / "environment.yml").write_text(
        "dependencies:\n" + "".join(f"  - pkg{i}=1.0\n" for i in range(60_000)) + "  - cudatoolkit=11.8\n",
        encoding="utf-8")
    r = run_cli("scan", str(tmp_path), "--format", "json", "--no-cache", "--max-file-size", "4MiB",
                env={"NEURON_READY_FILE_TIMEOUT": "30"}, timeout=600)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["diagnostics"] == []
    found = {(f["path"], f["line"]) for f in report["findings"] + report.get("off_path", [])}
    assert ("pyproject.toml", 60_004) in found and ("requirements.txt", 60_001) in found
    assert ("environment.yml", 60_002) in found
    kernels = [f for f in report["findings"] + report.get("off_path", []) if f["path"] == "kernels.cu"]
    assert kernels and kernels[0]["kernels"] == n


def test_one_too_complex_notebook_cell_hides_nothing_else(tmp_path):
    """Cell 2 (30,000 `not \\` continuations) crashed libcst and took cells 1 and 3 with it."""
    def cell(source):
        return {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}

    nb = {"cells": [cell("import torch\nx = torch.zeros(1).cuda()\n"), cell("y = " + "not \\\n" * 30_000 + "1\n"),
                    cell("torch.cuda.synchronize()\n")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "train.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    r = run_cli("scan", str(tmp_path), "--format", "json", "--no-cache")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [(f["rule"], f["cell"], f["line"]) for f in report["findings"]] == [("NR1001", 1, 2), ("NR1007", 3, 1)]
    assert [(d["kind"], d["message"][:7]) for d in report["diagnostics"]] == [("too-complex", "cell 2:")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_escaped_lone_surrogate_in_a_literal_loses_nothing(tmp_path, jobs):
    """`"\\ud800"` in source is a lone surrogate once evaluated (an option default, a registry key, a
    compared value); UTF-8 cannot carry it. It killed the worker (a traceback on stderr) or, in one
    process, the whole scan, and the file's findings were lost."""
    (tmp_path / "train.py").write_text(
        'import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument("--mode", default="\\ud800")\n'
        'REG = {"\\udcff": torch.nn.Linear}\nargs = p.parse_args()\nif args.mode == "x\\ud800\\u202e":\n'
        '    import flash_attn\nmodel = REG["\\udcff"](2, 2).cuda()\n', encoding="ascii")
    for fmt in ("json", "text", "sarif", "markdown", "html"):
        r = run_cli("scan", str(tmp_path), "--entry", "train.py", "--no-cache", "--jobs", jobs, "--format", fmt)
        assert r.code == 0 and r.err == "", (fmt, r.err)
        if fmt == "json":
            report = json.loads(r.out)
            assert not report["diagnostics"]
            assert {f["rule"] for f in report["findings"]} >= {"NR1001"}  # the .cuda() after the literals
            (feature,) = report["opt_in"]
            assert "\\ud800" in feature["gate"]  # shown escaped, never raw
