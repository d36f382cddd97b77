"""A change between two reports (baseline.ReportDiff) as text, JSON or the PR-comment Markdown."""

from __future__ import annotations

import json

from ..baseline import ReportDiff
from ..model import Finding
from ..numbers import pd, plural
from . import common, markdown
from .safe import visible

DIFF_FORMATS = ("text", "json", "markdown")


def _line(f: Finding) -> str:
    where = f"{f.path}:cell {f.cell}:{f.line}:{f.column}" if f.cell is not None else f"{f.path}:{f.line}:{f.column}"
    return f"  {visible(where)}  {f.rule}  {visible(f.message)}{' (fallback)' if f.fallback else ''}"


def _score(score: int | None) -> str:
    return "n/a" if score is None else str(score)


def _score_delta(delta: int | None) -> str:
    return "" if delta is None else f" ({delta:+d})"


def text(diff: ReportDiff) -> str:
    b, h = diff.base.estimate, diff.head.estimate
    change = diff.class_change
    moved = "unchanged" if change == 0 else f"{'up' if change > 0 else 'down'} {plural(abs(change), 'class', 'classes')}"
    out = [
        f"Readiness {_score(b.score)} -> {_score(h.score)}{_score_delta(diff.score_delta)} · effort {b.effort_class} -> {h.effort_class} ({moved})",
        f"P50 {pd(b.p50)} -> {pd(h.p50)} / P80 {pd(b.p80)} -> {pd(h.p80)} person-days",
        f"Findings {len(diff.base.findings)} -> {len(diff.head.findings)}: {len(diff.new)} new, {len(diff.fixed)} fixed, {diff.unchanged} unchanged",
    ]
    bb, hb = markdown.breakeven_line(diff.base), markdown.breakeven_line(diff.head)
    if bb or hb:
        out.append(f"Break-even: {bb or '-'} -> {hb or '-'}")
    for report in (diff.base, diff.head):
        nothing = common.no_analysis(report)
        if nothing:
            out.append(f"{'Base' if report is diff.base else 'Head'}: {nothing}")
    for title, items in (("New", diff.new), ("Fixed", diff.fixed)):
        if items:
            out += ["", f"{title} ({len(items)})"] + [_line(f) for f in items]
    return "\n".join(out) + "\n"


def render(diff: ReportDiff, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(diff.to_dict(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return markdown.render_diff(diff)
    return text(diff)
