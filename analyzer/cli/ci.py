"""`neuron-ready ci`: what the GitHub Action runs. Scan the head and the base ref, post the diff as
one sticky comment, write the job summary and SARIF. Every option also reads an environment
variable, which is how action.yml passes its inputs (never spliced into a script)."""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path

import click

from ..action import ActionError, ActionInputs, run_action
from ..engine import run_scan
from ..model import TARGETS
from .base import UserError, check_api_url, check_file, check_repo, exit_on_fail, split_list
from .diff import parse_fail_on
from .scan import build_settings


@click.command("ci")
@click.option("--path", "path", default=".", envvar="NEURON_READY_PATH", show_default=True, help="Directory to scan, inside the repository.")
@click.option("--target", type=click.Choice(TARGETS), envvar="NEURON_READY_TARGET", help="native (default) or xla.")
@click.option("--entry", multiple=True, envvar="NEURON_READY_ENTRY", metavar="FILE_OR_MODULE", help="Training entry points, for the effort model's reachability.")
@click.option("--fail-on", multiple=True, envvar="NEURON_READY_FAIL_ON", metavar="THRESHOLD", help="Exit 1 when the change adds such findings or moves the port into such an effort class.")
@click.option("--comment/--no-comment", default=True, envvar="NEURON_READY_COMMENT", show_default=True, help="Create or update the sticky pull-request comment.")
@click.option("--base-ref", default="", envvar="NEURON_READY_BASE_REF", metavar="REF", help="Compare with this ref or commit (default: the pull request's base commit).")
@click.option("--sarif", default="", envvar="NEURON_READY_SARIF", metavar="FILE", help="Also write SARIF here (for github/codeql-action/upload-sarif).")
@click.option("--tag", default="neuron-ready", envvar="NEURON_READY_TAG", show_default=True, help="Marker that identifies this job's comment.")
@click.option("--summary", default="", envvar="GITHUB_STEP_SUMMARY", metavar="FILE", help="Append the Markdown report here (default: $GITHUB_STEP_SUMMARY).")
@click.option("--outputs", default="", envvar="GITHUB_OUTPUT", metavar="FILE", help="Append step outputs here (default: $GITHUB_OUTPUT).")
@click.option("--repo", default="", envvar="GITHUB_REPOSITORY", metavar="OWNER/NAME", callback=check_repo, help="Repository (default: $GITHUB_REPOSITORY).")
@click.option("--pr", type=int, envvar="NEURON_READY_PR", help="Pull-request number (default: from $GITHUB_EVENT_PATH).")
@click.option("--api-url", default="", envvar="GITHUB_API_URL", callback=check_api_url, help="GitHub API URL (default: $GITHUB_API_URL or https://api.github.com).")
@click.option("--event", "event_path", default="", envvar="GITHUB_EVENT_PATH", metavar="FILE", callback=check_file, help="The event payload (default: $GITHUB_EVENT_PATH).")
@click.pass_context
def ci_cmd(ctx, path, target, entry, fail_on, comment, base_ref, sarif, tag, summary, outputs, repo, pr, api_url, event_path):
    """Scan a pull request's head and base, comment the difference, write summary and SARIF.

    The token comes from $GITHUB_TOKEN (never a flag, so it stays out of process lists).
    """
    entries = split_list(entry)

    def scan(directory: Path):
        settings = build_settings((directory,), target, (), (), (), None, False, None, False)
        if entries:
            settings.entries = entries
        return run_scan(settings)

    inputs = ActionInputs(
        path=path, base_ref=base_ref.strip(), fail_on=parse_fail_on(fail_on), comment=comment, sarif=sarif, tag=tag,
        summary=summary, outputs=outputs, repo=repo, pr=pr, api_url=api_url,
        token=os.environ.get("GITHUB_TOKEN", ""), event_path=event_path,
    )
    with workflow_commands_stopped():
        try:
            result = run_action(inputs, scan)
        except ActionError as e:
            raise UserError(str(e)) from None
        except OSError as e:  # --sarif, --summary or --outputs cannot be written
            flag = next((f"--{k} {v}: " for k, v in (("sarif", sarif), ("summary", summary), ("outputs", outputs))
                         if v and str(e.filename) in v), "")
            raise UserError(f"{flag}cannot write {e.filename}: {e.strerror or e}") from None
        click.echo(result.body, nl=False)
        if result.comment is not None:
            click.echo(f"neuron-ready: {result.comment.message}", err=True)
        for note in result.notes:
            click.echo(f"neuron-ready: {note}", err=True)
    exit_on_fail(ctx, result.reasons, inputs.fail_on, result.head.analysed)


@contextmanager
def workflow_commands_stopped():
    """On GitHub Actions, the runner reads any output line starting with `::` as a command. What
    this command prints echoes the pull request's file names and text (neutralised, but twice
    safe is the point): stop command processing with a token nobody can guess, resume after."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        yield
        return
    token = secrets.token_hex(16)
    click.echo(f"::stop-commands::{token}")
    try:
        yield
    finally:
        click.echo(f"::{token}::")
