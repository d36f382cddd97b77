"""The pre-commit hook, run by the real pre-commit: try-repo in a temporary git repository (once
passing, once failing), the documented `args` from docs/ci.md, and no files at all.

pre-commit builds the hook's environment by pip-installing this repository (a snapshot of the
working tree), so the first run takes a minute; PRE_COMMIT_HOME is shared so it is built once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

pytestmark = pytest.mark.slow

CLEAN = "import torch\n\nx = torch.zeros(3)\n"
GPU = "import torch\n\nx = torch.zeros(3).cuda()\n"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def sh(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", **(env or {}))
    return subprocess.run(list(args), cwd=cwd, env=full, capture_output=True, text=True, timeout=900)


def pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return sh(cwd, sys.executable, "-m", "pre_commit", *args, env={"PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"})


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "clean.py").write_text(CLEAN, encoding="utf-8")
    (root / "gpu.py").write_text(GPU, encoding="utf-8")
    (root / "README.md").write_text("# a project\n", encoding="utf-8")
    assert sh(root, "git", "init", "-q").returncode == 0
    assert sh(root, "git", "add", ".").returncode == 0
    return root


def _rev(snapshot: Path) -> str:
    return sh(snapshot, "git", "rev-parse", "HEAD").stdout.strip()


def test_try_repo_passes_then_fails(project, home, repo_snapshot):
    rev = _rev(repo_snapshot)
    ok = pre_commit(project, home, "try-repo", str(repo_snapshot), "neuron-ready", "--ref", rev,
                    "--files", "clean.py", "README.md")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"neuron-ready \(Trainium port readiness\)\.+Passed", ok.stdout)

    bad = pre_commit(project, home, "try-repo", str(repo_snapshot), "neuron-ready", "--ref", rev, "--files", "gpu.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"neuron-ready \(Trainium port readiness\)\.+Failed", bad.stdout)
    assert "gpu.py" in bad.stdout and "NR1001" in bad.stdout and "fix:" in bad.stdout
    assert "--fail-on met: 1 finding" in bad.stdout


def test_a_file_named_like_an_option_is_not_an_option(project, home, repo_snapshot):
    """pre-commit appends file names after the args; a committed `--ignore=NR1001` (and a `--config`
    pointing at a permissive file) must not pass over gpu.py's finding."""
    (project / "evil.toml").write_text("[tool.neuron-ready]\nignore = [\"NR1001\"]\n", encoding="utf-8")
    for name in ("--ignore=NR1001", "--config=evil.toml"):
        (project / name).write_text("import torch\n", encoding="utf-8")
    assert sh(project, "git", "add", "--", ".").returncode == 0
    bad = pre_commit(project, home, "try-repo", str(repo_snapshot), "neuron-ready", "--ref", _rev(repo_snapshot),
                     "--all-files")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "gpu.py" in bad.stdout and "NR1001" in bad.stdout


def _documented_config(snapshot: Path) -> dict:
    """The .pre-commit-config.yaml from docs/ci.md, pointed at the snapshot instead of GitHub."""
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.+?)```", text, re.S).group(1)
    config = yaml.safe_load(block)
    config["repos"][0]["repo"] = str(snapshot)
    config["repos"][0]["rev"] = _rev(snapshot)
    return config


def test_documented_args_with_a_baseline(project, home, repo_snapshot):
    config = _documented_config(repo_snapshot)
    assert config["repos"][0]["hooks"][0]["args"] == [
        "--baseline", ".neuron-ready-baseline.json", "--fail-on", "custom-cuda,triton,gpu-library"]
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (project / "kernel.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n", encoding="utf-8")
    w = sh(project, sys.executable, "-m", "neuron_ready", "scan", "--write-baseline", ".neuron-ready-baseline.json",
           "-o", os.devnull)
    assert w.returncode == 0, w.stderr
    sh(project, "git", "add", ".")

    # the kernel is in the baseline and `.cuda()` is below the threshold: passes
    ok = pre_commit(project, home, "run", "--files", "gpu.py", "kernel.cu", "clean.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # a new kernel is at the threshold and not in the baseline: fails, and says which one
    (project / "kernel2.cu").write_text("__global__ void k2(float* y) { y[0] = 2; }\n", encoding="utf-8")
    sh(project, "git", "add", ".")
    bad = pre_commit(project, home, "run", "--files", "kernel.cu", "kernel2.cu")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "kernel2.cu" in bad.stdout and "NR1703" in bad.stdout
    assert "1 new finding, 1 known" in bad.stdout

    # a file neuron-ready does not read passes; so does a commit with no files for the hook at all
    other = pre_commit(project, home, "run", "--files", "README.md")
    assert other.returncode == 0, other.stdout + other.stderr
    sh(project, "git", "rm", "-q", "--cached", "kernel2.cu")
    assert sh(project, "git", "commit", "-q", "-m", "all").returncode == 0
    none = pre_commit(project, home, "run")  # nothing staged
    assert none.returncode == 0 and "(no files to check)Skipped" in none.stdout, none.stdout + none.stderr
    direct = sh(project, sys.executable, "-m", "neuron_ready", "hook")
    assert direct.returncode == 0 and direct.stdout == "" and direct.stderr == ""


def test_hook_manifest_is_what_pre_commit_expects():
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    (hook,) = hooks
    assert hook["id"] == "neuron-ready" and hook["entry"] == "neuron-ready hook"
    assert hook["language"] == "python" and hook["require_serial"] is True
    r = subprocess.run([sys.executable, "-m", "pre_commit", "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
