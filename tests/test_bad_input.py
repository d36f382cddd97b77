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
