"""`neuron-ready scan`: findings, the port's effort class and the readiness score."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..baseline import apply_baseline, baseline_text, load_baseline
from ..config import check_fail_on, glob_problem, load_settings, parse_size
from ..engine import run_scan
from ..gate import fail_reasons
from ..model import CONFIDENCES, TARGETS
from ..numbers import plural
from ..progress import for_terminal
from ..render import FORMATS, render
from ..target_pin import pinned_target
from .base import UserError, exit_on_fail, split_list, use_color, write_output


def resolve_paths(paths: tuple[Path, ...]) -> tuple[Path, list[Path] | None]:
    """(root, explicit paths or None). One directory is walked; anything else is a file list
    (as pre-commit passes it) reported relative to the working directory."""
    for p in paths:
        if not p.exists() and not p.is_symlink():
            raise UserError(f"no such file or directory: {p}")
    if not paths:
        return Path("."), None
    if len(paths) == 1 and paths[0].is_dir():
        return paths[0], None
    cwd = os.path.abspath(".")
    absolute = [os.path.abspath(p) for p in paths]
    if all(a == cwd or a.startswith(cwd + os.sep) for a in absolute):
        return Path("."), list(paths)
    common = os.path.commonpath([a if os.path.isdir(a) else os.path.dirname(a) for a in absolute])
    return Path(common), [Path(a) for a in absolute]


def scan_options(f):
    """Options shared by every command that scans (scan, and later diff/comment helpers)."""
    options = [
        click.option("--target", type=click.Choice(TARGETS), help="native = TorchNeuron on Trn2/Trn3 (default); xla = torch-neuronx <= 2.9."),
        click.option("--select", multiple=True, metavar="RULES", help="Only these rule ids, prefixes (NR10) or categories; repeatable or comma-separated."),
        click.option("--ignore", multiple=True, metavar="RULES", help="Skip these rule ids, prefixes or categories."),
        click.option("--exclude", multiple=True, metavar="GLOB", help="Skip paths matching this gitignore-style pattern (repeatable)."),
        click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), help="Config file (default: nearest pyproject.toml with [tool.neuron-ready], or neuron-ready.toml)."),
        click.option("--isolated", is_flag=True, help="Ignore configuration files."),
        click.option("--max-file-size", metavar="SIZE", help="Skip larger files with a diagnostic (default 2MiB)."),
        click.option("--no-gitignore", is_flag=True, help="Scan files that .gitignore excludes."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def report_options(f):
    """--format, -o and --fail-on: the options of every command that writes a scan report."""
    options = [
        click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="text", show_default=True, help="Output format."),
        click.option("-o", "--output", metavar="FILE", help="Write the report to FILE instead of standard output (missing folders are created)."),
        click.option("--fail-on", multiple=True, metavar="THRESHOLD", help="Exit 1 when met: an effort class (days, weeks, month-plus: any port work at or above it), a rule id/prefix/category, or 'any'. Exit 2 when nothing was analysed."),
        click.option("--statistics", is_flag=True, help="Text: per-rule finding counts instead of the listing."),
        click.option("--min-confidence", type=click.Choice(CONFIDENCES), help="Text: hide findings below this confidence (the estimate still counts them)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


color_option = click.option("--color/--no-color", default=None,
                            help="Colour text output, even into a pipe (default: on a terminal, unless $NO_COLOR; $FORCE_COLOR forces it).")


def emit_report(ctx: click.Context, report, settings, fmt: str, output: str | None, color: bool | None, catalog=None,
                min_confidence: str | None = None, statistics: bool = False) -> None:
    """Write the report (colour only for text on a terminal, unless told), then apply --fail-on:
    a report that analysed nothing cannot pass a gate, so it is a usage error (exit 2)."""
    colour = use_color(color, output) and fmt == "text"
    text = render(report, fmt, color=colour, catalog=catalog, min_confidence=min_confidence, statistics=statistics)
    write_output(text, output, color=colour)
    exit_on_fail(ctx, fail_reasons(report, settings.fail_on), settings.fail_on, report.analysed)


def run_options(f):
    """How a scan runs (not what it finds): workers, the cache, progress."""
    options = [
        click.option("-j", "--jobs", type=click.IntRange(min=0), metavar="N", help="Worker processes (default: all cores; 0 = all cores). --jobs 1 scans in this process."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
        click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), help="Cache directory (default: $XDG_CACHE_HOME/neuron-ready, else ~/.cache/neuron-ready; env NEURON_READY_CACHE_DIR)."),
        click.option("-q", "--quiet", is_flag=True, help="No progress display and no warnings on stderr."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def apply_run_options(settings, jobs, no_cache, cache_dir) -> None:
    if jobs is not None:
        settings.jobs, settings.jobs_from_config = jobs, False
    if no_cache:
        settings.cache = False
    if cache_dir is not None:
        settings.cache_dir = cache_dir


def run_with_progress(settings, quiet: bool):
    """run_scan with a progress display on a terminal; warnings (e.g. an unwritable cache) and,
    with NEURON_READY_DEBUG, where the results came from, on stderr."""
    progress = for_terminal(quiet)
    try:
        outcome = run_scan(settings, progress=progress)
    finally:
        progress.close()
    stats = outcome.stats
    if stats is not None and not quiet:
        for warning in stats.warnings:
            click.echo(f"neuron-ready: warning: {warning}", err=True)
    if stats is not None and os.environ.get("NEURON_READY_DEBUG"):
        click.echo(f"neuron-ready: {stats.files} files: {stats.cached} from the cache, {stats.scanned} scanned "
                   f"({stats.workers} worker processes); cache: {stats.cache_dir or 'off'}; {stats.hashed} read "
                   f"and hashed; report: {'from the cache' if stats.report_cached else 'built'}", err=True)
    return outcome


def build_settings(paths, target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore, fail_on=()):
    root, files = resolve_paths(paths)
    settings = load_settings(root, config_path, isolated)
    settings.files = files
    if target:
        settings.target, settings.target_from = target, "--target"
    elif not settings.target_from and (pinned := pinned_target(root)):
        settings.target, settings.target_from = pinned  # the project's own torch-neuronx pin
    if select:
        settings.select = split_list(select)
    if ignore:
        settings.ignore = split_list(ignore)
    problem = glob_problem(list(exclude))
    if problem:
        raise click.BadParameter(problem, param_hint="--exclude")
    settings.exclude = settings.exclude + list(exclude)
    if max_file_size:
        try:
            settings.max_file_size = parse_size(max_file_size)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--max-file-size") from None
    if no_gitignore:
        settings.respect_gitignore = False
    if fail_on:
        try:
            settings.fail_on = check_fail_on(split_list(fail_on))
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--fail-on") from None
    from ..catalog import not_a_selector, valid_selector

    for s in settings.select + settings.ignore:
        if not valid_selector(s):
            raise UserError(not_a_selector(s))
    return settings


baseline_option = click.option(
    "--baseline", "baseline_path", metavar="FILE", type=click.Path(path_type=Path, dir_okay=False),
    help="List, and count toward --fail-on, only findings not in FILE (a baseline or a JSON report).")


def with_baseline(report, baseline_path: Path | None, write_baseline: Path | None = None):
    """Write the baseline first (from every finding), then keep only what the given baseline lacks."""
    if write_baseline is not None:
        write_output(baseline_text(report), str(write_baseline))
    if baseline_path is None:
        return report
    if not baseline_path.exists():
        raise UserError(f"baseline file not found: {baseline_path} (create it with --write-baseline)")
    report = apply_baseline(report, load_baseline(baseline_path))
    note = report.extra["baseline"]
    click.echo(f"neuron-ready: baseline {baseline_path}: {plural(note['new'], 'new finding')}, {note['known']} known", err=True)
    return report


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@report_options
@baseline_option
@click.option("--write-baseline", metavar="FILE", type=click.Path(path_type=Path, dir_okay=False),
              help="Write every finding's fingerprint to FILE: they are accepted from now on.")
@click.option("--assume-fixed", is_flag=True, help="Cost the findings `neuron-ready fix` rewrites (safe fixes) as already done.")
@click.option("--entry", "entries", multiple=True, metavar="FILE_OR_MODULE", help="A training entry point (repeatable); default: detected (launch commands, scripts that train).")
@click.option("--include-opt-in", "include_opt_in", multiple=True, metavar="FEATURE,...|all",
              help="Cost these opt-in features (or all) with the must-port part: the ones you will keep.")
@scan_options
@run_options
@color_option
@click.pass_context
def scan(ctx, paths, fmt, output, fail_on, statistics, min_confidence, baseline_path, write_baseline, assume_fixed, entries, include_opt_in, target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore,
         jobs, no_cache, cache_dir, quiet, color):
    """Scan PATHS (default: the current directory) for what a Trainium port must change.

    One directory is walked (honouring .gitignore); several paths or files are scanned as given
    and reported relative to the working directory.
    """
    settings = build_settings(paths, target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore, fail_on)
    if entries:
        settings.entries = list(entries)
    if include_opt_in:
        settings.include_opt_in = split_list(include_opt_in)
    settings.assume_fixed = assume_fixed
    apply_run_options(settings, jobs, no_cache, cache_dir)
    outcome = run_with_progress(settings, quiet)
    unknown = sorted(set(settings.include_opt_in) - {"all"} - set(outcome.report.extra.get("included_opt_in", ())))
    if unknown:  # a selector like --select: a typo is an error, never a silent no-op
        known = ", ".join(p.name for p in outcome.report.opt_in) or "none"
        raise UserError(f"--include-opt-in: no opt-in feature named {', '.join(unknown)} (this scan's features: {known})")
    report = with_baseline(outcome.report, baseline_path, write_baseline)
    # only SARIF describes rules: a report read from the cache does not load the catalog otherwise
    emit_report(ctx, report, settings, fmt, output, color, outcome.catalog if fmt == "sarif" else None,
                min_confidence, statistics)
