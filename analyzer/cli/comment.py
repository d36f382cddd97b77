"""`neuron-ready comment BODY.md`: create or update the one sticky pull-request comment, from any CI."""

from __future__ import annotations

import os
import sys
import click

from ..action import ActionError, commit_time, read_event
from ..github import GitHubClient, GitHubError, parse_time, upsert_comment
from .base import UserError, check_api_url, check_repo


@click.command("comment")
@click.argument("body_file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--repo", default="", envvar="GITHUB_REPOSITORY", metavar="OWNER/NAME", callback=check_repo, help="Repository (default: $GITHUB_REPOSITORY).")
@click.option("--pr", type=int, envvar="NEURON_READY_PR", help="Pull-request number (default: from $GITHUB_EVENT_PATH).")
@click.option("--tag", default="neuron-ready", show_default=True, help="Marker that identifies this job's comment.")
@click.option("--valid-at", metavar="TIME", help="ISO 8601 time the body is valid at; a comment valid at a later time is never overwritten. Default: the time of the HEAD commit, when run in a git checkout.")
@click.option("--api-url", default="", envvar="GITHUB_API_URL", callback=check_api_url, help="GitHub API URL (default: $GITHUB_API_URL or https://api.github.com).")
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True, metavar="NAME", help="Environment variable holding the token.")
def comment_cmd(body_file, repo, pr, tag, valid_at, api_url, token_env):
    """Create or update this tool's one comment on a pull request with the Markdown in BODY_FILE
    ('-' reads standard input), e.g. the output of `neuron-ready diff --format markdown`."""
    token = os.environ.get(token_env, "")
    if not token:
        raise UserError(f"no token: set ${token_env}")
    if not repo or "/" not in repo:
        raise UserError("no repository: pass --repo OWNER/NAME or set $GITHUB_REPOSITORY")
    if pr is None:
        try:
            pr = read_event(os.environ.get("GITHUB_EVENT_PATH", "")).number
        except ActionError as e:
            raise UserError(str(e)) from None
    if pr is None:
        raise UserError("no pull request: pass --pr N (or run on a pull_request event)")
    try:
        when = commit_time("HEAD", ".")
    except ActionError:  # not a git checkout, or no git: the comment then carries no time
        when = None
    if valid_at:
        when = parse_time(valid_at)
        if when is None:
            raise click.BadParameter(f"{valid_at!r} is not an ISO 8601 time", param_hint="--valid-at")
    try:
        body = sys.stdin.read() if body_file == "-" else open(body_file, encoding="utf-8").read()
    except OSError as e:
        raise UserError(f"cannot read {body_file}: {e.strerror or e}") from None
    try:
        outcome = upsert_comment(GitHubClient(token, api_url or None), repo, pr, body, tag, when)
    except GitHubError as e:
        raise UserError(f"GitHub API: {e}") from None
    click.echo(f"neuron-ready: {outcome.message}", err=True)
