"""Every option of every command, given a malformed value, ends in one clear line and exit 2.

The walk comes from click's own command tree: a new option is covered automatically. Typed
options get a malformed value from their type; a free-text option needs an entry in TEXT (the
test fails until it has one), so nobody adds an option without deciding what a bad value is.
"""

from __future__ import annotations

import json
import subprocess

import click
import pytest

from cli import run_cli
from neuron_ready.cli import main

BAD = "no/such/thing"

# (command, option) -> a malformed value for options whose type is plain text.
TEXT = {
    ("breakeven", "--gpu-instance"): "no-such-gpu",
    ("breakeven", "--trainium-instance"): "no-such-trn",
    ("ci", "--base-ref"): "no-such-ref",
    ("ci", "--entry"): BAD,
    ("ci", "--event"): BAD,
    ("ci", "--fail-on"): "soon",
    ("ci", "--outputs"): "train.py/out",
    ("ci", "--path"): BAD,
    ("ci", "--repo"): "no-slash",
    ("ci", "--sarif"): "train.py/out.sarif",
    ("ci", "--summary"): "train.py/summary.md",
    ("ci", "--api-url"): "ftp://example.com",
    ("comment", "--api-url"): "not a url",
    ("comment", "--repo"): "no-slash",
    ("comment", "--token-env"): "NR_NO_SUCH_TOKEN",
    ("comment", "--valid-at"): "yesterday",
    ("diff", "--fail-on"): "NR99",
    ("hook", "--fail-on"): "soon",
    ("rules", "rule_id"): "NR9999",
    ("trace", "factory"): "no_colon_here",
    ("trace", "--scan"): BAD,
    ("scan", "paths"): BAD,
    ("hook", "files"): BAD,
    ("trace", "--inputs"): "int64[",
    ("trace", "--fail-on"): "NR1099",
}
for _cmd in ("scan", "hook", "trace"):
    TEXT.update({
        (_cmd, "--select"): "NR1099", (_cmd, "--ignore"): "devise", (_cmd, "--exclude"): "**/[z-a]",
        (_cmd, "--max-file-size"): "0", (_cmd, "--entry"): BAD,
    })
for _cmd in ("scan", "trace", "diff", "rules", "breakeven"):
    TEXT[(_cmd, "--output")] = "train.py/report.txt"  # a folder that is a file
for _cmd in ("fix",):
    TEXT.update({
        (_cmd, "paths"): BAD, (_cmd, "--select"): "NR1099", (_cmd, "--ignore"): "devise",
        (_cmd, "--exclude"): "**/[z-a]", (_cmd, "--max-file-size"): "0",
    })
# An opt-in feature the scan does not have: a selector like the others (exit 2, naming the features).
TEXT[("scan", "--include-opt-in")] = "no_such_feature"
TEXT[("breakeven", "--include-opt-in")] = "no_such_feature"  # (with --report: see BASES)
TEXT[("scan", "--fail-on")] = "soon"
TEXT[("scan", "--write-baseline")] = "train.py/baseline.json"
# Text any value of which is valid (a marker name, a list of names); said here, not skipped silently.
FREE = {("ci", "--tag"), ("comment", "--tag")}


def _bad_value(cmd: str, param: click.Parameter, work) -> str | None:
    t = param.type
    key = (cmd, _name(param))
    if key in TEXT:
        return TEXT[key]
    if isinstance(t, click.Choice):
        return "no-such-choice"
    if isinstance(t, click.IntRange):
        return "-7"
    if isinstance(t, (click.types.IntParamType, click.types.FloatParamType)):
        return "lots"
    if isinstance(t, click.Path):
        if t.exists:
            return BAD
        if not t.file_okay:
            return str(work / "train.py")  # a file where a folder must be
        if not t.dir_okay:
            return str(work)  # a folder where a file must be
    return None


def _name(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return param.name
    return max(param.opts, key=len)


def _cases():
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        for param in command.params:
            if getattr(param, "is_flag", False) or _name(param) in ("--help", "--version"):
                continue
            yield pytest.param(name, param, id=f"{name} {_name(param)}")


def test_the_walk_covers_every_command():
    names = {c.values[0] for c in _cases()}
    assert names == {"scan", "rules", "diff", "ci", "comment", "hook", "trace", "breakeven", "fix"}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A git repository with a finding, its JSON report, a Markdown body and a tiny model factory."""
    w = tmp_path_factory.mktemp("walk")
    (w / "train.py").write_text("import torch\nx = torch.ones(2).cuda()\n", encoding="utf-8")
    (w / "model.py").write_text("import torch\n\ndef build():\n    return torch.nn.Linear(2, 2), (torch.ones(1, 2),)\n")
    (w / "body.md").write_text("hello\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=w, check=True, capture_output=True)
    r = run_cli("scan", ".", "--format", "json", "-o", "report.json", cwd=w)
    assert r.code == 0, r.err
    json.loads((w / "report.json").read_text())
    return w


# A valid invocation per command: its arguments (by name) and its options; the one under test
# replaces its own entry.
BASES = {
    "scan": ({"paths": "."}, {"--isolated": None}),
    "rules": ({}, {}),
    "diff": ({"base": "report.json", "head": "report.json"}, {}),
    "hook": ({"files": "train.py"}, {"--isolated": None}),
    "trace": ({"factory": "model.py:build"}, {"--no-graph-breaks": None, "--isolated": None}),
    "breakeven": ({}, {"--person-days": "5", "--gpu-price": "10", "--trainium-price": "5", "--gpu-hours-per-run": "10"}),
    "comment": ({"body_file": "body.md"}, {"--repo": "a/b", "--pr": "1", "--api-url": "http://127.0.0.1:9",
                                          "--valid-at": "2026-01-01T00:00:00Z"}),
    "ci": ({}, {"--no-comment": None, "--repo": "a/b", "--pr": "1", "--base-ref": "HEAD"}),
    "fix": ({"paths": "train.py"}, {"--diff": None, "--isolated": None}),
}


# An option that makes the one under test irrelevant (a price given makes an instance name a label).
DROP = {"--gpu-instance": "--gpu-price", "--trainium-instance": "--trainium-price"}


def _args(cmd: str, name: str, value: str) -> list[str]:
    positionals, options = BASES[cmd]
    options = {k: v for k, v in options.items() if k != DROP.get(name)}
    args = [cmd] + [value if arg == name else v for arg, v in positionals.items()]
    if name not in positionals and not name.startswith("-"):
        args.append(value)  # an optional argument (rules ID)
    for opt, v in options.items():
        if opt != name:
            args += [opt] if v is None else [opt, v]
    return args + ([name, value] if name.startswith("-") else [])


@pytest.mark.parametrize("cmd,param", list(_cases()))
def test_malformed_value_is_one_line_and_exit_2(work, cmd, param):
    name = _name(param)
    if (cmd, name) in FREE:
        pytest.skip("free text: every value is valid")
    value = _bad_value(cmd, param, work)
    assert value is not None, f"{cmd} {name}: add a malformed value to TEXT in {__file__}"
    args = _args(cmd, name, value)
    env = {"GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": "", "GITHUB_EVENT_PATH": "", "GITHUB_STEP_SUMMARY": "",
           "GITHUB_OUTPUT": "", "GITHUB_API_URL": "", "NO_COLOR": "1"}
    r = run_cli(*args, cwd=work, env=env, timeout=600)
    assert r.code == 2, (args, r.code, r.out[-500:], r.err)
    assert "Traceback" not in r.err and "internal error" not in r.err, r.err
    lines = [x for x in r.err.splitlines() if x.strip() and not x.startswith(("Usage:", "Try "))]
    assert len(lines) == 1, r.err
    assert name.lstrip("-") in r.err or value in r.err or name in ("factory", "rule_id"), r.err
