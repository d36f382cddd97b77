"""Run a composite action.yml the way the GitHub runner does, for tests: each step's `run` script in
`bash --noprofile --norc -eo pipefail`, with its `env` evaluated from inputs, earlier steps'
outputs and the `github` context, GITHUB_OUTPUT read back after every step, then the action's
outputs. Only `${{ a.b.c }}` lookups and `||` defaults are evaluated; anything else, and any
`${{` inside a run script, is an error: the action must pass untrusted values through env.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class ActionSyntaxError(Exception):
    pass


def lookup(path: str, context: dict) -> str:
    parts = path.split(".")
    value = context
    for i, part in enumerate(parts):
        if not isinstance(value, dict) or part not in value:
            if parts[0] == "steps" and i == 3 and parts[2] == "outputs":
                return ""  # like GitHub: an output the step did not set is empty
            raise ActionSyntaxError(f"unknown context value {path!r}")
        value = value[part]
    return "" if value is None else str(value)


def evaluate(text: str, context: dict) -> str:
    def one(m: re.Match) -> str:
        for alt in (a.strip() for a in m.group(1).split("||")):
            if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", alt):
                raise ActionSyntaxError(f"unsupported expression {m.group(0)!r}")
            value = lookup(alt, context)
            if value:
                return value
        return ""
    return EXPR.sub(one, str(text))


def read_outputs(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and "=" not in line.split("<<", 1)[0]:
            key, delim = line.split("<<", 1)
            value = []
            i += 1
            while lines[i] != delim:
                value.append(lines[i])
                i += 1
            out[key] = "\n".join(value)
        elif "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
        i += 1
    return out


@dataclass
class StepRun:
    id: str
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]


@dataclass
class ActionRun:
    steps: list[StepRun] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def code(self) -> int:
        return self.steps[-1].code if self.steps else 0

    def step(self, step_id: str) -> StepRun:
        return next(s for s in self.steps if s.id == step_id)


def load_action(path: Path) -> dict:
    action = yaml.safe_load(path.read_text(encoding="utf-8"))
    if action.get("runs", {}).get("using") != "composite":
        raise ActionSyntaxError("not a composite action")
    for i, step in enumerate(action["runs"]["steps"]):
        if "run" in step and EXPR.search(step["run"]):
            raise ActionSyntaxError(f"step {step.get('id', i)}: an expression inside a run script")
        if "run" in step and step.get("shell") != "bash":
            raise ActionSyntaxError(f"step {step.get('id', i)}: composite run steps need shell: bash")
    return action


def run_action(action_dir: Path, inputs: dict[str, str], *, workspace: Path, runner_temp: Path, github: dict,
               env: dict[str, str], skip: dict[str, dict[str, str]] | None = None, timeout: int = 600) -> ActionRun:
    """Run action_dir/action.yml in `workspace`. `skip` maps step ids to the outputs to pretend they set."""
    action = load_action(action_dir / "action.yml")
    declared = action.get("inputs", {})
    unknown = set(inputs) - set(declared)
    if unknown:
        raise ActionSyntaxError(f"inputs the action does not declare: {sorted(unknown)}")
    context: dict = {"github": dict(github, action_path=str(action_dir)), "steps": {}, "runner": {"temp": str(runner_temp)}}
    context["inputs"] = {name: inputs.get(name, evaluate(spec.get("default", ""), context)) for name, spec in declared.items()}
    result = ActionRun()
    for i, step in enumerate(action["runs"]["steps"]):
        sid = step.get("id", f"step{i}")
        if skip and sid in skip:
            context["steps"][sid] = {"outputs": dict(skip[sid])}
            continue
        out_file = runner_temp / f"output-{sid}"
        out_file.write_text("", encoding="utf-8")
        script = runner_temp / f"step-{sid}.sh"
        script.write_text(step["run"], encoding="utf-8")
        step_env = dict(os.environ)
        step_env.update(env)
        step_env.update({
            "GITHUB_ACTION_PATH": str(action_dir), "GITHUB_OUTPUT": str(out_file), "RUNNER_TEMP": str(runner_temp),
            "GITHUB_WORKSPACE": str(workspace), "CI": "true", "GITHUB_ACTIONS": "true",
        })
        step_env.update({k: evaluate(v, context) for k, v in (step.get("env") or {}).items()})
        p = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                           env=step_env, capture_output=True, text=True, timeout=timeout)
        outputs = read_outputs(out_file)
        context["steps"][sid] = {"outputs": outputs}
        result.steps.append(StepRun(sid, p.returncode, p.stdout, p.stderr, outputs))
        if p.returncode != 0:
            return result
    result.outputs = {name: evaluate(spec["value"], context) for name, spec in (action.get("outputs") or {}).items()}
    return result
