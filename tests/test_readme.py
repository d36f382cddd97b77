"""The README's promises: its test command is what CI runs, its docs are current."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def _readme_test_command() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- test-command -->\s*```bash\n(.+?)\n```", text, re.S)
    assert m, "README.md must mark its test command with <!-- test-command -->"
    return m.group(1).strip()


def test_ci_runs_exactly_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert _readme_test_command() in ci.splitlines()


def test_rule_docs_are_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_rule_docs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
