"""Terminal output: findings grouped by file (file:line:col, rule, message, remedy), then a summary."""

from __future__ import annotations

import shutil
import textwrap
from itertools import groupby

import click

from ..model import Finding, Report
from ..numbers import pd as _pd, plural
from . import common, trace_text

_CLASS_COLOR = {"days": "green", "weeks": "yellow", "month-plus": "red"}


def _loc(f: Finding) -> str:
    return f"cell {f.cell}:{f.line}:{f.column}" if f.cell is not None else f"{f.line}:{f.column}"


def _link(text: str, url: str) -> str:
    """An OSC 8 terminal hyperlink (terminals without support show the text alone)."""
    return f"\033]8;;{url}\033\\{text}\033]8;;\033\\"


def render(report: Report, color: bool = False, width: int | None = None, min_confidence: str | None = None,
           statistics: bool = False) -> str:
    """`color` also turns rule ids into terminal hyperlinks to their docs: both mean "a terminal"."""
    def s(text: str, **kw) -> str:
        return click.style(text, **kw) if color else text

    def rule(rule_id: str) -> str:
        return _link(s(rule_id, fg="cyan"), common.rule_url(rule_id)) if color else rule_id

    width = width or max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))
    indent = " " * 14
    out: list[str] = []
    shown = common.visible(report.findings, min_confidence)
    if statistics:
        out.extend(_statistics(shown, rule))
    explained: set[str] = set()  # a rule's remedy is shown once, at its first finding
    for path, group in groupby([] if statistics else shown, key=lambda f: f.path):
        out.append(s(path, bold=True))
        for f in group:
            tag = (" (fallback)" if f.fallback else "") + trace_text.finding_tag(f)
            conf = "" if f.confidence == "high" else s(f" ({f.confidence} confidence)", dim=True)
            out.append(f"  {_loc(f):>10}  {rule(f.rule)}  {f.message}{s(tag, fg='green')}{conf}")
            if f.rule not in explained:
                explained.add(f.rule)
                fix = textwrap.wrap(f.remedy, width - len(indent) - 5) or [""]
                out.append(f"{indent}{s('fix:', dim=True)} {fix[0]}")
                out.extend(f"{indent}     {line}" for line in fix[1:])
        out.append("")
    hidden = len(report.findings) - len(shown)
    if hidden:
        out += [f"{plural(hidden, 'finding')} below {min_confidence} confidence not shown (still in the estimate)", ""]
    if report.off_path:
        out.append(s(f"Off the training path ({plural(len(report.off_path), 'finding')}, not in the estimate)", bold=True))
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
    out.extend(_tasks(report, s))
    est = report.estimate
    n = len(report.findings)
    files = len({f.path for f in report.findings})
    fb = sum(1 for f in report.findings if f.fallback)
    out.append(
        f"{plural(n, 'finding')} in {plural(files, 'file')} "
        f"({fb} with a fallback, {report.suppressed} suppressed) · {plural(report.files_scanned, 'file')} scanned · target {report.target}"
    )
    nothing = common.no_analysis(report)
    if nothing:
        out.append(s(nothing, fg="yellow", bold=True))
        return "\n".join(out) + "\n"
    cls = s(est.effort_class, fg=_CLASS_COLOR.get(est.effort_class, "white"), bold=True)
    out.append(
        f"Readiness {common.score_text(report)} · effort: {cls} · P50 {_pd(est.p50)} / P80 {_pd(est.p80)} person-days "
        f"(range {_pd(est.person_days.low)}–{_pd(est.person_days.high)})"
    )
    reach = report.extra.get("reach")
    traced_only = "trace" in report.extra and reach.get("mode") == "library" if isinstance(reach, dict) else False
    if isinstance(reach, dict) and reach.get("mode") and not traced_only:  # `trace` has no --entry
        entries = reach.get("entries") or []
        how = {"entries": f"from {', '.join(entries[:3])}{' …' if len(entries) > 3 else ''}"
                          f" ({'detected' if reach.get('detected') else 'named'})",
               "library": "every module (no training entry point found; name one with --entry)",
               "files": "the files given"}.get(reach["mode"], reach["mode"])
        out.append(f"Training path: {how}")
    be = report.extra.get("breakeven")
    if isinstance(be, dict) and be.get("summary"):
        out.append(be["summary"])
    out.append(s(common.explanation(), dim=True))
    return "\n".join(out) + "\n"


def _tasks(report: Report, s) -> list[str]:
    """Every task of the estimate with its person-days, the most expensive first."""
    if not report.tasks:
        return []
    rows = sorted(report.tasks, key=lambda t: (-t.person_days.likely, t.id))
    out = [s(f"Tasks ({len(rows)}; likely person-days, low–high)", bold=True)]
    for t in rows:
        pd = t.person_days
        out.append(f"  {_pd(pd.likely):>6}  {_pd(pd.low) + '–' + _pd(pd.high):>11}  {t.title}"
                   + (" (fallback)" if t.fallback else ""))
    return out + [""]


def _statistics(findings: list[Finding], rule) -> list[str]:
    """Per-rule counts in place of the listing, as `ruff --statistics` prints them."""
    rows = common.statistics(findings)
    out = [f"  {count:>5}  {rule(rule_id)}  {category:<14}  {confidence}" for rule_id, category, count, confidence in rows]
    return out + [""] if out else []
