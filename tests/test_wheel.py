"""The real wheel, installed in a fresh virtual environment, run from another directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True, timeout=600,
    )
    (whl,) = out.glob("neuron_ready-*.whl")
    return whl


def test_wheel_ships_the_catalog(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "neuron_ready/cli/__init__.py" in names
    assert "neuron_ready/rules/device.toml" in names
    assert "neuron_ready/rules/__init__.py" in names
    assert "neuron_ready/pricing.toml" in names  # breakeven's dated prices
    assert not any(n.startswith(("tests/", "fixtures/", "analyzer/")) for n in names)
    # every package under analyzer/ is found (setup.py), none listed by hand
    for init in (REPO / "analyzer").rglob("__init__.py"):
        assert "neuron_ready/" + init.relative_to(REPO / "analyzer").as_posix() in names, init
    assert "neuron_ready/trace/ops.py" in names and "neuron_ready/ruletest.py" in names


@pytest.mark.slow
def test_wheel_in_fresh_venv_scans_from_another_directory(wheel, tmp_path, fixtures):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    # Dependencies come from the package index (or the local wheel cache); the project itself from the wheel.
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=900)
    work = tmp_path / "elsewhere"
    work.mkdir()
    repo = work / "repo"
    shutil.copytree(fixtures / "cuda_extension", repo)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    exe = env_dir / "bin" / "neuron-ready"
    r = subprocess.run([str(exe), "scan", "repo", "--format", "json"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["summary"]["effort"]["class"] == "month-plus"
    assert {f["category"] for f in report["findings"]} >= {"custom-cuda", "triton"}
    r = subprocess.run([str(exe), "rules", "NR1001"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "NR1001" in r.stdout
    # the base install has no torch: trace says what to install, in one line
    r = subprocess.run([str(exe), "trace", "repo/model.py:ScanLM"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "neuron-ready: error: `neuron-ready trace` needs PyTorch: pip install 'neuron-ready[trace]'\n"
    # the pricing catalog ships: instance names resolve to their dated prices
    r = subprocess.run([str(exe), "breakeven", "--person-days", "10", "--gpu-instance", "p5.48xlarge", "--trainium-instance",
                        "trn1.32xlarge", "--gpu-hours-per-run", "100", "--format", "json", "--isolated"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu_cost_per_run"] == 5504.0 and json.loads(r.stdout)["port_cost"] == 12000.0
    # the base install has no matplotlib: the HTML page is written, without the chart, saying how to get it
    (repo / "pyproject.toml").write_text('[tool.neuron-ready.workload]\ngpu-price = 55.04\ntrainium-price = 21.5\n'
                                         "gpu-hours-per-run = 100\n", encoding="utf-8")
    r = subprocess.run([str(exe), "scan", "repo", "--format", "html"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "<img" not in r.stdout and "neuron-ready[html]" in r.stdout, r.stderr
    # the installed package is the wheel's, not this checkout's
    where = subprocess.run([str(py), "-c", "import neuron_ready, sys; print(neuron_ready.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert str(env_dir) in where
