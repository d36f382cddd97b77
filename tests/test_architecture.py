"""docs/architecture.md's recipes hold: a throwaway output format and a throwaway command, each added
by touching only the files its "Adding things" section names, work in a copy of the package (the
installed one is never changed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

PAGE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    m = re.search(rf"^### {re.escape(title)}\n(.+?)(?=^##)", PAGE, re.S | re.M)
    assert m, f"docs/architecture.md has no section '### {title}'"
    return m.group(1)


@pytest.fixture
def package(tmp_path) -> Path:
    """analyzer/ and rules/ laid out as the wheel installs them, importable from PYTHONPATH."""
    root = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "analyzer", root / "neuron_ready", ignore=ignore)
    shutil.copytree(REPO / "rules", root / "neuron_ready" / "rules", ignore=ignore)
    return root


def _run(package: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(package), NO_COLOR="1")
    env.pop("NEURON_READY_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "neuron_ready", *args], cwd=package, env=env,
                          capture_output=True, text=True, timeout=300)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path.name} no longer holds {old!r}: update docs/architecture.md"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_the_copy_is_what_runs(package):
    r = subprocess.run([sys.executable, "-c", "import neuron_ready; print(neuron_ready.__file__)"],
                       env=dict(os.environ, PYTHONPATH=str(package)), capture_output=True, text=True)
    assert Path(r.stdout.strip()).parent == package / "neuron_ready"


def test_an_output_format_is_one_module_and_one_formats_entry(package):
    steps = _section("An output format")
    assert "`analyzer/render/<format>.py`" in steps and "`analyzer/render/__init__.py`" in steps
    assert "`FORMATS`" in steps
    render = package / "neuron_ready" / "render"
    (render / "counts.py").write_text(
        '"""A throwaway format: each rule on the training path with its count."""\n\n'
        "from collections import Counter\n\nfrom ..model import Report\n\n\n"
        "def render(report: Report) -> str:\n"
        "    counts = Counter(f.rule for f in report.findings)\n"
        '    return "".join(f"{rule} {n}\\n" for rule, n in sorted(counts.items()))\n',
        encoding="utf-8")
    _edit(render / "__init__.py", "FORMATS = {", 'FORMATS = {"counts": "counts", ')
    r = _run(package, "scan", str(FIXTURES / "cuda_extension"), "--format", "counts", "--isolated", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == ["NR1001 1", "NR1003 1", "NR1202 1"] and "NR1801 2" in r.stdout


def test_a_command_is_one_module_and_one_lazy_entry(package):
    steps = _section("A CLI command")
    assert "`analyzer/cli/<command>.py`" in steps and "`analyzer/cli/__init__.py`" in steps
    assert "`main.lazy`" in steps and "UserError" in steps and "write_output" in steps
    cli = package / "neuron_ready" / "cli"
    (cli / "letters.py").write_text(
        '"""A throwaway command: the letters of a word."""\n\n'
        "import click\n\nfrom .base import UserError, write_output\n\n\n"
        '@click.command("letters")\n@click.argument("word")\n'
        "def letters_cmd(word):\n"
        '    """Count the letters of WORD."""\n'
        "    if not word.isalpha():\n"
        '        raise UserError(f"not a word: {word!r}")\n'
        '    write_output(f"{len(word)}\\n", None)\n',
        encoding="utf-8")
    _edit(cli / "__init__.py", "main.lazy = {\n", 'main.lazy = {\n    "letters": ".letters:letters_cmd",\n')
    assert "letters" in _run(package, "--help").stdout
    ok = _run(package, "letters", "trainium")
    assert (ok.returncode, ok.stdout) == (0, "8\n"), ok.stderr
    bad = _run(package, "letters", "tr41n")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert [line for line in bad.stderr.splitlines() if line.strip()] == ["neuron-ready: error: not a word: 'tr41n'"]
