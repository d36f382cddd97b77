"""The GitHub Action end to end: action.yml's own steps run against a real git repository (base and
head commits), real scans, a real diff, and a real HTTP server on 127.0.0.1 speaking GitHub's API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actionrunner import ActionSyntaxError, evaluate, load_action, run_action
from conftest import REPO
from github_server import FakeGitHub, Failure
from neuron_ready.github import marker

OWNER_REPO = "acme/trainer"

BASE_TRAIN = """\
import torch

model = torch.nn.Linear(8, 8).cuda()
batch = torch.zeros(4, 8, device="cuda")
"""
KERNEL = "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n"
SETUP = "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('scale', ['kernels/scale.cu'])\n"


def git(cwd: Path, *args: str, date: str = "2026-01-01T10:00:00Z") -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="dev", GIT_AUTHOR_EMAIL="dev@example.com", GIT_COMMITTER_NAME="dev",
               GIT_COMMITTER_EMAIL="dev@example.com", GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    p = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture
def pr(tmp_path):
    """A repository whose base has two findings in train.py and a CUDA kernel; the head moves the
    code down (not new), adds `torch.cuda.synchronize()` (new) and deletes the kernel (fixed)."""
    repo = tmp_path / "work"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(BASE_TRAIN, encoding="utf-8")
    (repo / "kernels").mkdir()
    (repo / "kernels" / "scale.cu").write_text(KERNEL, encoding="utf-8")
    (repo / "setup.py").write_text(SETUP, encoding="utf-8")  # a build compiles the kernel: on the training path
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "train.py").write_text('"""Training."""\n\n' + BASE_TRAIN + "torch.cuda.synchronize()\n", encoding="utf-8")
    (repo / "kernels" / "scale.cu").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "head", date="2026-01-02T10:00:00Z")
    return repo, base, git(repo, "rev-parse", "HEAD")


def event_file(tmp_path: Path, base: str, head: str, number: int = 7, fork: bool = False) -> Path:
    head_repo = "someone/trainer" if fork else OWNER_REPO
    ev = {"action": "synchronize", "number": number, "pull_request": {
        "number": number, "title": "$(touch /tmp/pwned) `id`",  # never reaches a shell
        "base": {"sha": base, "ref": "main", "repo": {"full_name": OWNER_REPO}},
        "head": {"sha": head, "ref": "feature", "repo": {"full_name": head_repo}},
    }}
    path = tmp_path / f"event-{number}-{head[:7]}.json"
    path.write_text(json.dumps(ev), encoding="utf-8")
    return path


def run(repo: Path, tmp_path: Path, gh: FakeGitHub, event: Path, token: str = "write-token", **inputs: str):
    temp = tmp_path / "runner-temp"
    temp.mkdir(exist_ok=True)
    summary = tmp_path / "summary.md"
    env = {"GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": OWNER_REPO, "GITHUB_API_URL": gh.url,
           "GITHUB_STEP_SUMMARY": str(summary), "NEURON_READY_CACHE_DIR": str(tmp_path / "cache")}
    return run_action(REPO, inputs, workspace=repo, runner_temp=temp, github={"token": token}, env=env,
                      skip={"install": {"python": sys.executable}})


def test_pull_request_comment_created_then_updated(pr, tmp_path):
    repo, base, head = pr
    with FakeGitHub() as gh:
        gh.add_comment(OWNER_REPO, 7, "Looks good to me")
        first = run(repo, tmp_path, gh, event_file(tmp_path, base, head), sarif="reports/nr.sarif")
        scan = first.step("scan")
        assert first.code == 0, scan.stderr
        assert first.outputs["comment"] == "created"
        assert first.outputs["new-findings"] == "1" and first.outputs["fixed-findings"] == "1"
        assert first.outputs["effort-class"] in ("days", "weeks", "month-plus") and first.outputs["score"].isdigit()

        bodies = gh.bodies(OWNER_REPO, 7)
        assert len(bodies) == 2 and bodies[0] == "Looks good to me"
        body = bodies[1]
        assert body.startswith(marker("neuron-ready") + "\n<!-- neuron-ready-valid-at: 2026-01-02T10:00:00Z -->\n")
        assert "**This change adds 1 finding and removes 1.**" in body
        assert "| `train.py:7` | [NR1007](" in body  # the new one, at its new line
        assert "| `kernels/scale.cu:1` | [NR1703](" in body.split("Removed (1)")[1]
        summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
        assert summary in body and summary.startswith("### neuron-ready")

        sarif = json.loads((repo / "reports" / "nr.sarif").read_text(encoding="utf-8"))
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]}
        assert uris == {"train.py", "setup.py"}  # the head: the build stays, the kernel is gone
        assert git(repo, "worktree", "list").count("\n") == 0  # the base worktree is gone again
        assert git(repo, "status", "--porcelain") == "?? reports/"

        # a second push adds another finding: the same comment is edited in place
        (repo / "train.py").write_text((repo / "train.py").read_text() + "x = batch.cpu().cuda()\n", encoding="utf-8")
        git(repo, "commit", "-q", "-am", "more", date="2026-01-03T10:00:00Z")
        head2 = git(repo, "rev-parse", "HEAD")
        second = run(repo, tmp_path, gh, event_file(tmp_path, base, head2))
        assert second.code == 0, second.step("scan").stderr
        assert second.outputs["comment"] == "updated" and second.outputs["new-findings"] == "2"
        assert len(gh.bodies(OWNER_REPO, 7)) == 2 and len(gh.calls("PATCH")) == 1
        assert "**This change adds 2 findings and removes 1.**" in gh.bodies(OWNER_REPO, 7)[1]
        assert "valid-at: 2026-01-03T10:00:00Z" in gh.bodies(OWNER_REPO, 7)[1]

        # the same run again: the body is identical, so nothing is written
        again = run(repo, tmp_path, gh, event_file(tmp_path, base, head2))
        assert again.outputs["comment"] == "unchanged" and len(gh.calls("PATCH")) == 1

        # the first push's run finishing late must not overwrite the newer comment
        git(repo, "checkout", "-q", head)
        late = run(repo, tmp_path, gh, event_file(tmp_path, base, head))
        assert late.outputs["comment"] == "newer-exists" and len(gh.calls("PATCH")) == 1
        assert "adds 2 findings" in gh.bodies(OWNER_REPO, 7)[1]
        assert not Path("/tmp/pwned").exists()


def test_fork_with_read_only_token_writes_the_summary_and_passes(pr, tmp_path):
    repo, base, head = pr
    with FakeGitHub() as gh:
        r = run(repo, tmp_path, gh, event_file(tmp_path, base, head, fork=True), token="read-token")
        assert r.code == 0, r.step("scan").stderr
        assert r.outputs["comment"] == "forbidden" and gh.bodies(OWNER_REPO, 7) == []
        summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
        assert "**This change adds 1 finding and removes 1.**" in summary
        assert "pull requests from forks get a read-only token" in summary


def test_fail_on_fails_the_step_after_reporting(pr, tmp_path):
    repo, base, head = pr
    with FakeGitHub() as gh:
        r = run(repo, tmp_path, gh, event_file(tmp_path, base, head), **{"fail-on": "device"})
        assert r.code == 1
        assert "neuron-ready: --fail-on met: 1 finding of device" in r.step("scan").stderr
        assert len(gh.bodies(OWNER_REPO, 7)) == 1 and (tmp_path / "summary.md").exists()
        ok = run(repo, tmp_path, gh, event_file(tmp_path, base, head), **{"fail-on": "custom-cuda,month-plus", "comment": "false"})
        assert ok.code == 0 and ok.outputs["comment"] == "none"


def test_github_down_still_writes_the_summary_then_fails(pr, tmp_path):
    repo, base, head = pr
    with FakeGitHub() as gh:
        gh.fail_next(*[Failure(502, {"Retry-After": "0"}, "Bad Gateway")] * 5)
        r = run(repo, tmp_path, gh, event_file(tmp_path, base, head))
        err = r.step("scan").stderr
        assert r.code == 2 and "502 Bad Gateway (gave up after 5 attempts)" in err and "Traceback" not in err
        summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
        assert "**This change adds 1 finding and removes 1.**" in summary
        assert "> The pull-request comment could not be posted: GitHub API:" in summary


def test_shallow_checkout_fetches_the_base(pr, tmp_path):
    origin, base, head = pr
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", "--branch", "feature", f"file://{origin}", str(clone))
    assert subprocess.run(["git", "cat-file", "-e", base], cwd=clone).returncode != 0
    with FakeGitHub() as gh:
        r = run(clone, tmp_path, gh, event_file(tmp_path, base, head), comment="false")
        assert r.code == 0, r.step("scan").stderr
        assert r.outputs["new-findings"] == "1" and r.outputs["fixed-findings"] == "1"


def test_bad_base_ref_is_one_line(pr, tmp_path):
    repo, base, head = pr
    with FakeGitHub() as gh:
        r = run(repo, tmp_path, gh, event_file(tmp_path, base, head), **{"base-ref": "--upload-pack=touch /tmp/x"})
        assert r.code == 2 and r.step("scan").stderr.strip() == "neuron-ready: error: invalid ref '--upload-pack=touch /tmp/x'"
        r = run(repo, tmp_path, gh, event_file(tmp_path, base, head), **{"base-ref": "no-such-branch"})
        assert r.code == 2 and "base ref 'no-such-branch' is not in this checkout" in r.step("scan").stderr


def test_without_a_pull_request_it_reports_the_head(pr, tmp_path):
    repo, _, _ = pr
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main"}), encoding="utf-8")
    with FakeGitHub() as gh:
        r = run(repo, tmp_path, gh, push)
        assert r.code == 0 and r.outputs["comment"] == "none"
        assert "**Readiness" in (tmp_path / "summary.md").read_text(encoding="utf-8")
        assert "no pull request in this event" in r.step("scan").stderr


def test_runner_refuses_expressions_in_scripts(tmp_path):
    bad = tmp_path / "action.yml"
    bad.write_text("runs:\n  using: composite\n  steps:\n    - shell: bash\n      run: echo ${{ github.event.pull_request.title }}\n")
    with pytest.raises(ActionSyntaxError, match="expression inside a run script"):
        load_action(bad)
    with pytest.raises(ActionSyntaxError, match="unsupported expression"):
        evaluate("${{ format('{0}', github.token) }}", {"github": {"token": "t"}})
    assert load_action(REPO / "action.yml")["runs"]["using"] == "composite"


def plant_shadows(root: Path, sentinel: Path, modules=("pip", "venv", "ensurepip", "neuron_ready")) -> None:
    """Packages named like what the action runs with `python -m`: each records that it ran."""
    for name in modules:
        (root / name).mkdir(parents=True, exist_ok=True)
        code = f"open({str(sentinel)!r}, 'a').write({name!r} + '\\n')\n"
        (root / name / "__init__.py").write_text(code, encoding="utf-8")
        (root / name / "__main__.py").write_text(code, encoding="utf-8")


@pytest.mark.slow
def test_install_step_installs_the_action_for_real(tmp_path, repo_snapshot):
    """The install step itself: a venv in RUNNER_TEMP and pip install of the action's directory,
    in a workspace whose `pip/` and `venv/` packages would run in their place without -I."""
    from actionrunner import run_action as run_steps

    temp = tmp_path / "temp"
    temp.mkdir()
    workspace = tmp_path / "workspace"
    sentinel = tmp_path / "shadows-ran"
    plant_shadows(workspace, sentinel)
    r = run_steps(repo_snapshot, {}, workspace=workspace, runner_temp=temp, github={"token": "t"}, env={},
                  skip={"scan": {}}, timeout=900)
    install = r.step("install")
    assert install.code == 0, install.stderr[-2000:]
    assert not sentinel.exists(), sentinel.read_text()
    python = install.outputs["python"]
    assert python == str(temp / "neuron-ready-venv" / "bin" / "python")
    v = subprocess.run([python, "-I", "-m", "neuron_ready", "--version"], cwd=workspace, capture_output=True, text=True)
    assert v.returncode == 0 and "neuron-ready, version" in v.stdout
    assert not sentinel.exists()


HOSTILE_NAME = ("a\n::error file=train.py,line=1,title=Injected::PWNED\n\n# Injected heading\n\n<img src=x.png> @octocat"
                "\n\n<!-- neuron-ready-comment: other -->\n.py")


@pytest.fixture
def hostile_pr(tmp_path):
    """A pull request written to attack the action: file names with newlines and a lone CR,
    `pip`/`venv`/`neuron_ready` packages that would run in place of ours, a 2.2 MB line that makes
    train.py unreadable, and a committed .gitignore that would hide models/ from the scan."""
    repo = tmp_path / "work"
    (repo / "models").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(BASE_TRAIN, encoding="utf-8")
    (repo / "models" / "net.py").write_text("import torch\nnet = torch.nn.Linear(2, 2).cuda()\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / HOSTILE_NAME).write_text("import torch\ntorch.cuda.synchronize()\n", encoding="utf-8")
    (repo / "b\r::warning::CR.py").write_text("import torch\nx = torch.zeros(1).cuda()\n", encoding="utf-8")
    plant_shadows(repo, tmp_path / "shadows-ran")
    with open(repo / "train.py", "a", encoding="utf-8") as fh:
        fh.write("x = '" + "A" * 2_200_000 + "'\n")
    (repo / "models" / ".gitignore").write_text("*\n", encoding="utf-8")
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", "head", date="2026-01-02T10:00:00Z")
    return repo, base, git(repo, "rev-parse", "HEAD")


def test_a_hostile_pull_request_changes_nothing_it_should_not(hostile_pr, tmp_path):
    from commonmark import live_markup, to_html
    from neuron_ready.github import comment_body, parse_time

    repo, base, head = hostile_pr
    with FakeGitHub() as gh:
        forged = gh.add_comment(OWNER_REPO, 7, comment_body("all clear", "neuron-ready", parse_time("2099-01-01T00:00:00Z")),
                                login="mallory")
        r = run(repo, tmp_path, gh, event_file(tmp_path, base, head), **{"fail-on": "month-plus"})
        scan = r.step("scan")

        # train.py was analysed in the base and is not now: the step fails and says why
        assert r.code == 1, scan.stderr
        assert "1 file(s) analysed in the base could not be analysed after this change" in scan.stderr

        # the log: command processing is stopped around everything that echoes the pull request
        lines = scan.stdout.splitlines()
        token = lines[0].removeprefix("::stop-commands::")
        assert len(token) == 32 and lines[-1] == f"::{token}::"
        assert [line for line in lines[1:-1] if line.lstrip().startswith(("::", "##["))] == []

        # the comment: a new one of ours; the forged marker is neither edited nor obeyed
        assert scan.outputs["comment"] == "created" and not gh.calls("PATCH")
        assert gh.bodies(OWNER_REPO, 7)[0] == forged["body"]
        body = gh.bodies(OWNER_REPO, 7)[1]
        summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
        for text in (body, summary):
            html = to_html(text)
            assert live_markup(html, ours=2 if text is body else 0) == [], text
            assert "PWNED" in html and "No longer analysed (1)" in html
            assert "<code>train.py</code></td>\n<td>too-large</td>" in html
        # the .gitignore of `*` hid nothing: models/net.py's finding is not "removed"
        # nor are train.py's findings "removed": they are unknown
        assert "Removed (" not in body and scan.outputs["fixed-findings"] == "0"
        assert "`models/net.py:2`" in body

        # nothing from the pull request ran
        assert not (tmp_path / "shadows-ran").exists()
