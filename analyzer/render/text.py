"""Terminal output: findings grouped by file (file:line:col, rule, message, remedy), then a summary."""

from __future__ import annotations

import shutil
import textwrap
from itertools import groupby

import click

from ..model import Finding, Report
from . import trace_text

_CLASS_COLOR = {"days": "green", "weeks": "yellow", "month-plus": "red"}


def _loc(f: Finding) -> str:
    return f"cell {f.cell}:{f.line}:{f.column}" if f.cell is not None else f"{f.line}:{f.column}"


def _pd(x: float) -> str:
    return f"{x:.1f}"


def render(report: Report, color: bool = False, width: int | None = None) -> str:
    def s(text: str, **kw) -> str:
        return click.style(text, **kw) if color else text

    width = width or max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))
    indent = " " * 14
    out: list[str] = []
    explained: set[str] = set()  # a rule's remedy is shown once, at its first finding
    for path, group in groupby(report.findings, key=lambda f: f.path):
        out.append(s(path, bold=True))
        for f in group:
            tag = (" (fallback)" if f.fallback else "") + trace_text.finding_tag(f)
            out.append(f"  {_loc(f):>10}  {s(f.rule, fg='cyan')}  {f.message}{s(tag, fg='green')}")
            if f.rule not in explained:
                explained.add(f.rule)
                fix = textwrap.wrap(f.remedy, width - len(indent) - 5) or [""]
                out.append(f"{indent}{s('fix:', dim=True)} {fix[0]}")
                out.extend(f"{indent}     {line}" for line in fix[1:])
        out.append("")
    if report.off_path:
        out.append(s(f"Off the training path ({len(report.off_path)} findings, not in the estimate)", bold=True))
        for f in report.off_path[:20]:
            why = f.details.get("off_path_reason")
            out.append(f"  {f.path}:{_loc(f)}  {f.rule}  {f.message}" + (s(f"  [{why}]", dim=True) if why else ""))
        if len(report.off_path) > 20:
            out.append(f"  ... and {len(report.off_path) - 20} more (see --format json)")
        out.append("")
    if report.diagnostics:
        out.append(s(f"Not analysed ({len(report.diagnostics)})", bold=True))
        for d in report.diagnostics:
            where = f"{d.path}:{d.line}" if d.line else d.path
            out.append(f"  {where}  [{d.kind}] {d.message}")
        out.append("")
    out.extend(trace_text.summary_lines(report.extra.get("trace")))
    est = report.estimate
    n = len(report.findings)
    files = len({f.path for f in report.findings})
    fb = sum(1 for f in report.findings if f.fallback)
    out.append(
        f"{n} finding{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''} "
        f"({fb} with a fallback, {report.suppressed} suppressed) · {report.files_scanned} files scanned · target {report.target}"
    )
    if report.fixable_line():
        out.append(report.fixable_line())
    cls = s(est.effort_class, fg=_CLASS_COLOR.get(est.effort_class, "white"), bold=True)
    out.append(
        f"Readiness {est.score}/100 · effort: {cls} · P50 {_pd(est.p50)} / P80 {_pd(est.p80)} person-days "
        f"(range {_pd(est.person_days.low)}–{_pd(est.person_days.high)})"
    )
    if est.drivers:
        by_id = {t.id: t for t in report.tasks}
        names = [f"{by_id[d].title} ({_pd(by_id[d].person_days.likely)} d)" for d in est.drivers if d in by_id]
        out.append("Top drivers: " + "; ".join(names))
    reach = report.extra.get("reach")
    if isinstance(reach, dict) and reach.get("mode"):
        entries = reach.get("entries") or []
        how = {"entries": f"from {', '.join(entries[:3])}{' …' if len(entries) > 3 else ''}"
                          f" ({'detected' if reach.get('detected') else 'named'})",
               "library": "every module (no training entry point found; name one with --entry)",
               "files": "the files given"}.get(reach["mode"], reach["mode"])
        out.append(f"Training path: {how}")
    be = report.extra.get("breakeven")
    if isinstance(be, dict) and be.get("summary"):
        out.append(be["summary"])
    return "\n".join(out) + "\n"
