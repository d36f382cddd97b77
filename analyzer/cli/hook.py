"""`neuron-ready hook FILES...`: the pre-commit entry point. Scans only the files given (none: pass),
lists what is not in the baseline, and fails on findings at or above the threshold."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..engine import run_scan
from ..gate import fail_reasons
from ..render import render
from .base import exit_on_fail, use_color, write_output
from .scan import baseline_option, build_settings, color_option, scan_options, with_baseline


class FilesStayFiles(click.Command):
    """pre-commit runs `entry args... files...`: a committed file named `--ignore=NR1001` or
    `--config=evil.toml` would be read as an option and pass over a real finding. pre-commit only
    passes paths that exist, so an argument that looks like an option but names an existing path
    is a file: it goes after `--`. (`--` cannot be in the hook's entry: the user's args follow it.)"""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            head, tail = args[:cut], args[cut:]
        else:
            head, tail = list(args), ["--"]
        files = [a for a in head if a.startswith("-") and a != "-" and os.path.lexists(a)]
        if files:
            head = [a for a in head if a not in files]
            args = head + tail + files
        return super().parse_args(ctx, args)


@click.command("hook", cls=FilesStayFiles)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--fail-on", multiple=True, metavar="THRESHOLD",
              help="Fail (exit 1) when met: an effort class, a rule id/prefix/category, or 'any'. Default: fail-on from the configuration, else any.")
@baseline_option
@scan_options
@color_option
@click.pass_context
def hook_cmd(ctx, files, fail_on, baseline_path, target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore, color):
    """Scan the FILES pre-commit passes; with no files, do nothing and pass.

    Only findings that are not in --baseline count. An effort-class threshold judges the
    estimate of the files being committed, not of the whole repository.
    """
    if not files:
        return
    settings = build_settings(files, target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore, fail_on)
    if not settings.fail_on:
        settings.fail_on = ["any"]
    outcome = run_scan(settings)
    report = with_baseline(outcome.report, baseline_path)
    reasons = fail_reasons(report, settings.fail_on)
    if report.findings or report.diagnostics or reasons:
        colour = use_color(color, None)
        write_output(render(report, "text", color=colour), None, color=colour)
    exit_on_fail(ctx, reasons)
