"""`neuron-ready fix`: rewrite the mechanical CUDA plumbing into device-agnostic PyTorch (Ruff's conventions).

Safe fixes apply by default, unsafe ones with --unsafe-fixes. --diff prints a unified diff, writes
nothing and exits 1 when something would change (for CI and pre-commit). Every finding left alone
is listed with the reason.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import click

from ..engine import active_catalog, find_files, make_context
from ..fixes.run import FileFix, notebook_left, plan_file, write_file
from .base import EXIT_FAIL, EXIT_OK
from .scan import build_settings, scan_options


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _diff(fix: FileFix) -> str:
    rel = fix.job.rel
    lines = difflib.unified_diff(
        fix.before.splitlines(keepends=True), fix.after.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


@click.command("fix")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff and write nothing; exit 1 when something would change.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change numerics or behaviour (e.g. FP16 to BF16).")
@scan_options
@click.option("-q", "--quiet", is_flag=True, help="Do not list the findings left alone.")
@click.pass_context
def fix_cmd(ctx, paths, show_diff, unsafe_fixes, target, select, ignore, exclude, config_path, isolated, max_file_size,
            no_gitignore, quiet):
    """Rewrite what `scan` reports into device-agnostic PyTorch, in place (PATHS as for scan)."""
    settings = build_settings(paths, target, select, ignore, exclude, config_path, isolated, max_file_size, no_gitignore)
    catalog = active_catalog(settings)
    found = find_files(settings)
    sctx = make_context(settings, catalog, found)
    fixes = [
        plan_file(job, sctx, unsafe_fixes) if job.kind == "python" else notebook_left(job, sctx)
        for job in found.jobs if job.kind in ("python", "notebook")
    ]
    out = sys.stderr if show_diff else sys.stdout
    diagnostics = [f.diagnostic for f in fixes if f.diagnostic is not None]
    for fix in fixes:
        if not fix.changed:
            continue
        if show_diff:
            click.echo(_diff(fix), nl=False)
            continue
        problem = write_file(fix)
        if problem is not None:
            diagnostics.append(problem)
            fix.left += [(f, "the file was not written") for f in fix.fixed]
            fix.fixed = []
    if not quiet:
        for fix in fixes:
            for f, why in sorted(fix.left, key=lambda pair: pair[0].sort_key()):
                click.echo(f"{f.path}:{f.line}:{f.column}: {f.rule} left: {why}", file=out)
    for d in diagnostics:
        where = f"{d.path}:{d.line}" if d.line else d.path
        click.echo(f"neuron-ready: {where}: {d.message}", err=True)
    fixed = sum(len(f.fixed) for f in fixes)
    files = sum(1 for f in fixes if f.fixed)
    left = sum(len(f.left) for f in fixes)
    verb = "Would fix" if show_diff else "Fixed"
    click.echo(f"{verb} {_plural(fixed, 'finding')} in {_plural(files, 'file')}; {left} left.", file=out)
    ctx.exit(EXIT_FAIL if show_diff and fixed else EXIT_OK)
