"""What the GitHub Action runs (`neuron-ready ci`): scan the pull request's head and its base (checked
out with `git worktree`), diff them, write the job summary and SARIF, and keep one sticky comment.

Every input arrives as a value (the CLI reads them from flags or environment variables); nothing
from the event is ever spliced into a shell. Reading the event file is the only GitHub-specific
step, so the same command works in any CI that sets the variables.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from .baseline import ReportDiff, diff_reports
from .engine import ScanOutcome
from .gate import diff_fail_reasons, fail_reasons
from .github import GitHubClient, GitHubError, Outcome, parse_time, upsert_comment
from .model import Diagnostic, Report
from .render import markdown, sarif


class ActionError(Exception):
    """A problem with the job's set-up (git, refs, event): one line."""


@dataclass
class PullRequest:
    number: int | None = None
    base_sha: str = ""
    head_sha: str = ""
    fork: bool = False


@dataclass
class ActionInputs:
    path: str = "."
    base_ref: str = ""  # empty: the pull request's base commit from the event
    fail_on: list[str] = field(default_factory=list)
    comment: bool = True
    sarif: str = ""  # write SARIF here
    tag: str = "neuron-ready"
    summary: str = ""  # $GITHUB_STEP_SUMMARY
    outputs: str = ""  # $GITHUB_OUTPUT
    repo: str = ""  # owner/name
    pr: int | None = None
    api_url: str = ""
    token: str = ""
    event_path: str = ""


@dataclass
class ActionResult:
    head: Report
    diff: ReportDiff | None
    body: str
    comment: Outcome | None
    reasons: list[str]
    notes: list[str] = field(default_factory=list)


def read_event(path: str) -> PullRequest:
    if not path or not os.path.isfile(path):
        return PullRequest()
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ActionError(f"cannot read the event file {path}: {e}") from None
    pr = event.get("pull_request") if isinstance(event, dict) else None
    if not isinstance(pr, dict):
        return PullRequest()
    base, head = pr.get("base") or {}, pr.get("head") or {}
    base_repo = (base.get("repo") or {}).get("full_name")
    head_repo = (head.get("repo") or {}).get("full_name")
    return PullRequest(
        number=pr.get("number") if isinstance(pr.get("number"), int) else None,
        base_sha=str(base.get("sha") or ""),
        head_sha=str(head.get("sha") or ""),
        fork=bool(base_repo and head_repo and base_repo != head_repo),
    )


def git(*args: str, cwd: str | Path = ".", check: bool = True) -> str:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise ActionError("git is not installed") from None
    if check and p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise ActionError(f"git {' '.join(args)}: {msg}")
    return p.stdout.strip() if p.returncode == 0 else ""


def has_commit(ref: str, cwd: str | Path) -> bool:
    if ref.startswith("-"):  # never let a ref be read as an option
        raise ActionError(f"invalid ref {ref!r}")
    return bool(git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=cwd, check=False))


def ensure_commit(ref: str, cwd: str | Path) -> str:
    """The commit id of `ref`, fetching it from origin when the checkout is shallow."""
    if not has_commit(ref, cwd):
        git("fetch", "--no-tags", "--depth=1", "origin", ref, cwd=cwd, check=False)
        if not has_commit(ref, cwd) and has_commit("FETCH_HEAD", cwd):
            ref = "FETCH_HEAD"
    if not has_commit(ref, cwd):
        raise ActionError(f"base ref {ref!r} is not in this checkout and could not be fetched "
                          "(check out with fetch-depth: 0, or set base-ref)")
    return git("rev-parse", f"{ref}^{{commit}}", cwd=cwd)


def commit_time(ref: str, cwd: str | Path) -> datetime | None:
    if not ref or not has_commit(ref, cwd):
        return None
    return parse_time(git("show", "-s", "--format=%cI", ref, cwd=cwd, check=False))


def scan_base(repo_root: Path, commit: str, rel_path: str, scan: Callable[[Path], ScanOutcome]) -> Report:
    """Check the base commit out in a temporary worktree (outside the repository) and scan it."""
    tmp = Path(tempfile.mkdtemp(prefix="neuron-ready-base-"))
    tree = tmp / "tree"
    try:
        git("worktree", "add", "--detach", str(tree), commit, cwd=repo_root)
        target = tree / rel_path
        if not target.is_dir():  # the scanned directory is new in this change: the base has nothing
            target = tmp / "empty"
            target.mkdir()
        return scan(target).report
    finally:
        git("worktree", "remove", "--force", str(tree), cwd=repo_root, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        git("worktree", "prune", cwd=repo_root, check=False)


def lost_files(repo_root: Path, commit: str, rel_path: str, base: Report, head: Report) -> list[Diagnostic]:
    """Head diagnostics for files the base had and analysed: a change that makes a file unreadable
    (a huge line, a syntax error) must not pass as "adds 0 findings"."""
    in_base = {d.path for d in base.diagnostics}
    prefix = "" if rel_path in (".", "") else rel_path.rstrip("/") + "/"
    return [d for d in head.diagnostics
            if d.kind != "symlink" and d.path not in in_base
            and _in_commit(repo_root, commit, prefix + d.path)]


def _in_commit(repo_root: Path, commit: str, path: str) -> bool:
    p = subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=repo_root, capture_output=True)
    return p.returncode == 0


def write_outputs(path: str, values: dict[str, object]) -> None:
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for k, v in values.items():
            fh.write(f"{k}={v}\n")


def append_summary(path: str, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")


def run_action(inputs: ActionInputs, scan: Callable[[Path], ScanOutcome]) -> ActionResult:
    """`scan(directory)` scans one tree with the job's settings (the CLI builds them)."""
    pr = read_event(inputs.event_path)
    number = inputs.pr if inputs.pr is not None else pr.number
    repo_root = Path(git("rev-parse", "--show-toplevel", cwd="."))
    scan_dir = Path(inputs.path)
    if not scan_dir.is_dir():
        raise ActionError(f"path {inputs.path!r} is not a directory")
    rel_path = os.path.relpath(os.path.realpath(scan_dir), os.path.realpath(repo_root))
    if rel_path.startswith(".."):
        raise ActionError(f"path {inputs.path!r} is outside the repository {repo_root}")

    head_outcome = scan(scan_dir)
    head = head_outcome.report
    base_ref = inputs.base_ref or pr.base_sha
    diff, lost = None, []
    if base_ref:
        commit = ensure_commit(base_ref, repo_root)
        base = scan_base(repo_root, commit, rel_path, scan)
        diff = diff_reports(base, head)
        lost = lost_files(repo_root, commit, rel_path, base, head)
        unknown = {d.path for d in lost}  # their findings are not known to be gone: not "removed"
        kept = [i for i, f in enumerate(diff.fixed) if f.path not in unknown]
        diff.fixed = [diff.fixed[i] for i in kept]
        diff.fixed_fingerprints = [diff.fixed_fingerprints[i] for i in kept]
    body = markdown.render_diff(diff, lost) if diff is not None else markdown.render(head)
    reasons = diff_fail_reasons(diff, inputs.fail_on) if diff is not None else fail_reasons(head, inputs.fail_on)
    if lost and inputs.fail_on:
        reasons.append(f"{len(lost)} file(s) analysed in the base could not be analysed after this change")

    notes: list[str] = []
    if inputs.sarif:
        Path(inputs.sarif).parent.mkdir(parents=True, exist_ok=True)
        Path(inputs.sarif).write_text(sarif.render(head, head_outcome.catalog), encoding="utf-8")
    outcome, api_error = None, ""
    if inputs.comment:
        if number is None:
            notes.append("no pull request in this event: no comment posted")
        elif not inputs.token or not inputs.repo:
            notes.append("no token or repository given: no comment posted")
        else:
            client = GitHubClient(inputs.token, inputs.api_url or None)
            valid_at = commit_time(pr.head_sha, repo_root) or commit_time("HEAD", repo_root)
            try:
                outcome = upsert_comment(client, inputs.repo, number, body, inputs.tag, valid_at)
            except GitHubError as e:  # the summary is still written; the step fails afterwards
                api_error = f"GitHub API: {e}"
                notes.append(f"The pull-request comment could not be posted: {api_error}")
            if outcome is not None and outcome.action == "forbidden":
                notes.append("The pull-request comment could not be posted: this token may not write to the "
                             "pull request (pull requests from forks get a read-only token). This summary has the report.")
    summary = body
    if notes:
        summary += "\n" + "\n".join(f"> {n}" for n in notes) + "\n"
    append_summary(inputs.summary, summary)
    write_outputs(inputs.outputs, {
        "score": "" if head.estimate.score is None else head.estimate.score,  # none: nothing analysed
        "effort-class": head.estimate.effort_class,
        "findings": len(head.findings),
        "new-findings": len(diff.new) if diff else len(head.findings),
        "fixed-findings": len(diff.fixed) if diff else 0,
        "comment": outcome.action if outcome else "none",
        "comment-url": outcome.url if outcome else "",
    })
    if api_error:
        raise ActionError(api_error)
    return ActionResult(head, diff, body, outcome, reasons, notes)
