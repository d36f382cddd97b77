"""`neuron-ready diff BASE.json HEAD.json`: what a change adds and removes, and how the estimate moves."""

from __future__ import annotations

from pathlib import Path

import click

from ..baseline import diff_reports, load_report
from ..catalog import check_selectors, load_catalog
from ..config import check_fail_on
from ..gate import diff_fail_reasons
from ..model import EFFORT_CLASSES
from ..render.diff import DIFF_FORMATS, render
from .base import exit_on_fail, split_list, write_output


def parse_fail_on(values: tuple[str, ...]) -> list[str]:
    try:
        checks = check_fail_on(split_list(values))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--fail-on") from None
    rules = [s for s in checks if s not in EFFORT_CLASSES and s != "any"]
    if rules:
        check_selectors(load_catalog(), "--fail-on", rules)
    return checks


@click.command("diff")
@click.argument("base", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("head", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(DIFF_FORMATS), default="text", show_default=True, help="Output format.")
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@click.option("--fail-on", multiple=True, metavar="THRESHOLD",
              help="Exit 1 when the change adds a finding of a rule, prefix or category (or 'any'), or moves the port into an effort class at or above the one named.")
@click.pass_context
def diff_cmd(ctx, base, head, fmt, output, fail_on):
    """Compare two JSON reports (`neuron-ready scan --format json`): new and fixed findings,
    the score delta and the change of effort class. Findings match by rule, path and matched
    source, so code that only moved is neither new nor fixed."""
    diff = diff_reports(load_report(base), load_report(head))
    write_output(render(diff, fmt), output)
    checks = parse_fail_on(fail_on)
    exit_on_fail(ctx, diff_fail_reasons(diff, checks), checks, diff.head.analysed)
