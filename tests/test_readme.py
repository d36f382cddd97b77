"""The README's promises: its two quick-start commands are what a user runs and what CI runs, the
report it shows is what its first command prints, and its docs are current."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys

from cli import run_cli
from conftest import FIXTURES, REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _marked_block(marker: str, lang: str) -> str:
    m = re.search(rf"<!-- {marker} -->\s*```{lang}\n(.+?)\n```", README, re.S)
    assert m, f"README.md must mark a {lang} block with <!-- {marker} -->"
    return m.group(1).strip()


def _readme_test_command() -> str:
    return _marked_block("test-command", "bash")


def test_ci_runs_exactly_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert _readme_test_command() in ci.splitlines()


def test_the_readme_report_is_what_the_first_command_prints():
    """The first command installs and scans a bundled example; the report the README shows under it
    is that scan's output, line for line where it does not say `...`."""
    first = _marked_block("quick-start", "bash")
    steps = [s.strip() for s in first.split("&&")]
    assert steps[:2] == ["python3 -m venv .venv", ".venv/bin/pip install ."]
    scan = shlex.split(steps[-1])
    assert scan[:2] == [".venv/bin/neuron-ready", "scan"] and len(steps) == 3
    shown = _marked_block("quick-start-output", "text").splitlines()
    assert shlex.split(shown[0].removeprefix("$ ")) == ["neuron-ready", *scan[1:]]

    run = run_cli(*scan[1:], cwd=REPO, env={"NO_COLOR": "1"})
    assert run.code == 0, run.err
    printed = run.out.splitlines()
    at = 0
    for line in shown[1:]:
        if not line.strip() or line.strip() == "...":
            continue
        assert line in printed[at:], f"README shows a line the scan does not print (in this order): {line!r}"
        at = printed.index(line, at) + 1
    assert shown[-1] == printed[-1]  # the report is shown to its end


def test_the_readme_workload_gives_a_break_even(tmp_path):
    """The workload the README shows (and the HTML report points to when none is configured) is a
    valid configuration that makes a scan report its break-even."""
    tree = tmp_path / "repo"
    shutil.copytree(FIXTURES / "cuda_extension", tree)
    (tree / "pyproject.toml").write_text(_marked_block("workload", "toml") + "\n", encoding="utf-8")
    run = run_cli("scan", ".", "--format", "json", cwd=tree)
    assert run.code == 0 and not run.err, run.err
    breakeven = json.loads(run.out)["breakeven"]
    assert breakeven["verdict"] == "trainium" and breakeven["breakeven_runs"] > 0


def test_rule_docs_are_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_rule_docs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
