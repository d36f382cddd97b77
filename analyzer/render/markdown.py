"""The pull-request comment (and job summary): score, class, P50/P80, break-even, drivers, findings.

GitHub caps a comment at 65,536 characters; bodies stay under LIMIT and drop table rows, with a
note, when they would not. Text that comes from the scanned code (names, paths) is escaped so a
pull request cannot inject HTML, close a table or mention people through its identifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Union

from ..baseline import ReportDiff
from ..model import Finding, Report

LIMIT = 65_000
TITLE = "### neuron-ready · Trainium port readiness"
# A code span as CommonMark reads it: a backtick run closed by the next run of the same length.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")


def code(text: str) -> str:
    """An inline code span that backticks inside `text` cannot end early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def inline(text: str) -> str:
    """Text for one table cell or line: code spans kept, HTML and mentions neutralised outside them."""
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_plain(text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_plain(text[pos:]))
    return "".join(out).replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def _plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub("@\u200b", text)


def _pd(x: float) -> str:
    return f"{x:.1f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _loc(f: Finding) -> str:
    where = f"{f.path}:cell {f.cell}:{f.line}" if f.cell is not None else f"{f.path}:{f.line}"
    return code(where).replace("|", "\\|")  # a table cell: GitHub reads \| as a pipe inside code too


def breakeven_line(report: Report) -> str | None:
    be = report.extra.get("breakeven")
    if not isinstance(be, dict):
        return None
    if be.get("summary"):
        return inline(str(be["summary"]))
    months, runs = be.get("breakeven_months"), be.get("breakeven_runs")
    if runs is None and months is None:
        return "Break-even: never at these prices (the port saves nothing per run)." if "breakeven_runs" in be else None
    parts = []
    if runs is not None:
        parts.append(f"after {float(runs):.1f} runs")
    if months is not None:
        parts.append(f"{float(months):.1f} months")
    verdict = f" · verdict: {be['verdict']}" if be.get("verdict") else ""
    return "Break-even " + " / ".join(parts) + verdict


def headline(report: Report) -> str:
    est = report.estimate
    files = len({f.path for f in report.findings})
    return (
        f"**Readiness {est.score}/100** · effort **{est.effort_class}** · "
        f"P50 **{_pd(est.p50)}** / P80 **{_pd(est.p80)}** person-days · "
        f"{_plural(len(report.findings), 'finding')} in {_plural(files, 'file')} · target `{report.target}`"
    )


def drivers(report: Report) -> list[str]:
    by_id = {t.id: t for t in report.tasks}
    rows = [by_id[d] for d in report.estimate.drivers if d in by_id]
    if not rows:
        return []
    return ["**Top drivers**", ""] + [
        f"{i}. {inline(t.title)} — {_pd(t.person_days.likely)} person-days" for i, t in enumerate(rows, 1)
    ]


# ---------------------------------------------------------------------------------------------
# Fitting under the limit


@dataclass
class Table:
    summary: str  # the <details> summary; a count of rows is appended
    rows: list[str]
    open: bool = False
    header: tuple[str, str] = ("| Location | Rule | Finding |", "|---|---|---|")
    shown: int = field(default=-1)

    def render(self) -> str:
        n = len(self.rows) if self.shown < 0 else self.shown
        parts = [f"<details{' open' if self.open else ''}><summary>{self.summary}</summary>", "", *self.header, *self.rows[:n]]
        if n < len(self.rows):
            parts += ["", f"_… and {len(self.rows) - n} more not shown: this comment stays under {LIMIT:,} characters; "
                          "the full list is in `neuron-ready scan --format json` and the SARIF output._"]
        parts += ["", "</details>"]
        return "\n".join(parts)


Block = Union[str, Table]


def finding_rows(findings: list[Finding]) -> list[str]:
    return [
        f"| {_loc(f)} | {f.rule} | {inline(f.message)}{' _(fallback)_' if f.fallback else ''} |"
        for f in findings
    ]


def assemble(blocks: list[Block], limit: int = LIMIT) -> str:
    """Join blocks with blank lines; when too long, show as many table rows as fit, in order."""
    def joined() -> str:
        return "\n\n".join(b.render() if isinstance(b, Table) else b for b in blocks) + "\n"

    text = joined()
    if len(text) <= limit:
        return text
    tables = [b for b in blocks if isinstance(b, Table)]
    for t in tables:
        t.shown = 0
    budget = limit - len(joined())
    for t in tables:
        for row in t.rows:
            if len(row) + 1 > budget:
                break
            budget -= len(row) + 1
            t.shown += 1
    text = joined()
    if len(text) > limit:  # the fixed text alone is too long (it never is in practice): cut it
        note = "\n\n_… cut: this comment stays under the size GitHub accepts._\n"
        text = text[: limit - len(note)] + note
    return text


# ---------------------------------------------------------------------------------------------
# Bodies


def _footer(report: Report) -> str:
    return (f"<sub>neuron-ready {report.tool_version} · `neuron-ready rules NR1001` explains a rule · "
            "effort is an estimate with documented assumptions, not a quote</sub>")


def render(report: Report) -> str:
    blocks: list[Block] = [TITLE, headline(report)]
    be = breakeven_line(report)
    if be:
        blocks.append(be)
    d = drivers(report)
    if d:
        blocks.append("\n".join(d))
    if report.off_path:
        blocks.append(f"{_plural(len(report.off_path), 'finding')} off the training path "
                      "(no training entry point reaches them) are not in the estimate.")
    note = report.extra.get("baseline")
    if isinstance(note, dict) and "known" in note:
        blocks.append(f"Only findings that are not in the baseline are listed ({note['known']} known ones are not).")
    if report.findings:
        files = len({f.path for f in report.findings})
        blocks.append(Table(f"{_plural(len(report.findings), 'finding')} in {_plural(files, 'file')}", finding_rows(report.findings)))
        if report.fixable_line():
            blocks.append(report.fixable_line())
    else:
        blocks.append("No findings: nothing here stands in the way of a Trainium port.")
    blocks.append(_footer(report))
    return assemble(blocks)


def _delta(x: float, fmt: str = "{:+.1f}") -> str:
    return "±0" if abs(x) < 1e-9 else fmt.format(x).replace("-", "−")


def _class_arrow(change: int) -> str:
    if change == 0:
        return "unchanged"
    classes = f"{abs(change)} class{'es' if abs(change) > 1 else ''}"
    return f"▲ {classes} more work" if change > 0 else f"▼ {classes} less work"


def comparison_table(diff: ReportDiff) -> str:
    b, h = diff.base.estimate, diff.head.estimate
    rows = [
        "| | Base | This change | Change |",
        "|---|---:|---:|---:|",
        f"| Readiness | {b.score}/100 | **{h.score}/100** | {_delta(diff.score_delta, '{:+d}')} |",
        f"| Effort class | {b.effort_class} | **{h.effort_class}** | {_class_arrow(diff.class_change)} |",
        f"| P50 person-days | {_pd(b.p50)} | {_pd(h.p50)} | {_delta(h.p50 - b.p50)} |",
        f"| P80 person-days | {_pd(b.p80)} | {_pd(h.p80)} | {_delta(h.p80 - b.p80)} |",
        f"| Findings | {len(diff.base.findings)} | {len(diff.head.findings)} | +{len(diff.new)} / −{len(diff.fixed)} |",
    ]
    bb, hb = breakeven_line(diff.base), breakeven_line(diff.head)
    if bb or hb:
        rows.append(f"| Break-even | {bb or '—'} | {hb or '—'} | |")
    return "\n".join(rows)


def render_diff(diff: ReportDiff) -> str:
    head = diff.head
    blocks: list[Block] = [TITLE, comparison_table(diff)]
    if diff.new or diff.fixed:
        blocks.append(f"**This change adds {_plural(len(diff.new), 'finding')} and removes {len(diff.fixed)}.**")
    else:
        blocks.append("**This change adds and removes no findings.**")
    if diff.new:
        blocks.append(Table(f"Added ({len(diff.new)})", finding_rows(diff.new), open=True))
    if diff.fixed:
        blocks.append(Table(f"Removed ({len(diff.fixed)})", finding_rows(diff.fixed)))
    d = drivers(head)
    if d:
        blocks.append("\n".join(d))
    if head.findings:
        files = len({f.path for f in head.findings})
        blocks.append(Table(f"All {_plural(len(head.findings), 'finding')} in {_plural(files, 'file')} after this change",
                            finding_rows(head.findings)))
    blocks.append(_footer(head))
    return assemble(blocks)

