"""The pull-request comment (and job summary): score, class, P50/P80, break-even, drivers, findings.

GitHub caps a comment at 65,536 characters; bodies stay under LIMIT and drop table rows, with a
note, when they would not. Text that comes from the scanned code (names, paths, messages) goes
through render/safe.py, so a pull request cannot inject HTML, close a table or mention people.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..baseline import ReportDiff
from ..model import Diagnostic, Finding, Report
from ..numbers import pd as _pd, pd_delta, plural as _plural
from . import trace_text
from .common import EFFORT_DOCS, MEANING, OPT_IN_SHOWN, also_at, items, no_analysis, rule_url, score_text
from .safe import code, inline  # noqa: F401 - inline and code are this module's API too

LIMIT = 65_000
TITLE = "### neuron-ready · Trainium port readiness"


def _loc(f: Finding) -> str:
    where = f"{f.path}:cell {f.cell}:{f.line}" if f.cell is not None else f"{f.path}:{f.line}"
    return code(where)


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
        f"**Readiness {score_text(report)}** · effort **{est.effort_class}** · "
        f"P50 **{_pd(est.p50)}** / P80 **{_pd(est.p80)}** person-days · "
        f"{_counted(report.findings)} in {_plural(files, 'file')} · target `{report.target}`"
    )


def _counted(findings: list[Finding]) -> str:
    """"12 findings" counting items; the sites of their edits, if any, in brackets."""
    rows = items(findings)
    sites = sum(len(s) for _, s in rows)
    return _plural(len(rows), "finding") + (f" (+{_plural(sites, 'site')} of their edits)" if sites else "")


def drivers(report: Report) -> list[str]:
    by_id = {t.id: t for t in report.tasks}
    rows = [by_id[d] for d in report.estimate.drivers if d in by_id]
    if not rows:
        return []
    return ["**Top drivers**", ""] + [
        f"{i}. {inline(t.title)} — {_pd(t.person_days.likely)} person-days" for i, t in enumerate(rows, 1)
    ]


_ELSEWHERE = (("host", "host-side (data loading on the CPU)"), ("neuron-native", "already Neuron or XLA code"),
              ("off-path", "off the training path"))


def not_in_estimate(report: Report) -> list[Block]:
    """The opt-in features (each with its switch and cost), the evaluation path, and what costs
    nothing: the estimate above is the must-port part only."""
    out: list[Block] = []
    if report.opt_in:
        rows = [f"| {code(p.name)} | {inline(p.gate)} | {len(p.findings)} | {_pd(p.estimate.p50)} / {_pd(p.estimate.p80)} |"
                for p in report.opt_in[:OPT_IN_SHOWN]]
        rest = report.opt_in[OPT_IN_SHOWN:]
        if rest:
            rows.append(f"| … {len(rest)} more | | {sum(len(p.findings) for p in rest)} | "
                        f"{_pd(sum(p.estimate.p50 for p in rest))} (P50 in all) |")
        out.append(Table(f"Opt-in features, not in the estimate ({len(report.opt_in)}; "
                         "<code>--include-opt-in NAME</code> adds one)", rows,
                         header=("| Feature | Turned on | Findings | P50 / P80 person-days |", "|---|---|---:|---:|")))
    counts = report.context_counts()
    parts = []
    if report.evaluation is not None:
        e = report.evaluation.estimate
        parts.append(f"evaluation path {_plural(counts.get('evaluation', 0), 'finding')} (P50 {_pd(e.p50)} person-days)")
    parts += [f"{_plural(counts[c], 'finding')} {label}" for c, label in _ELSEWHERE if counts.get(c)]
    if parts:
        out.append("Also not in the estimate: " + "; ".join(parts) + ".")
    return out


# ---------------------------------------------------------------------------------------------
# Fitting under the limit


@dataclass
class Table:
    summary: str  # the <details> summary; a count of rows is appended
    rows: list[str]
    open: bool = False
    header: tuple[str, str] = ("| Location | Rule | Finding | Fix |", "|---|---|---|---|")
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
    """One row per finding, the rule linked to its docs; a rule's remedy at its first row only (a
    site's rule that no row explains yet: in the row of the item it is a site of)."""
    rows, explained = [], set()
    for f, sites in items(findings):  # a site of an item's edit is named in the item's row
        fix = "" if f.rule in explained else inline(f.remedy)
        explained.add(f.rule)
        for x in sites:  # a site's rule no row has explained yet: its remedy here, with its link
            if x.rule not in explained:
                explained.add(x.rule)
                fix += f"{' · ' if fix else ''}[{x.rule}]({rule_url(x.rule)}): {inline(x.remedy)}"
        conf = "" if f.confidence == "high" else f" _({f.confidence} confidence)_"
        also = f" · {also_at(sites, _loc)}" if sites else ""
        rows.append(f"| {_loc(f)} | [{f.rule}]({rule_url(f.rule)}) | {inline(f.message)}"
                    f"{' _(fallback)_' if f.fallback else ''}{conf}{also} | {fix} |")
    return rows


def diagnostic_rows(diagnostics: list[Diagnostic]) -> list[str]:
    return [f"| {code(f'{d.path}:{d.line}' if d.line else d.path)} | {d.kind} | {inline(d.message)} |" for d in diagnostics]


def not_analysed(diagnostics: list[Diagnostic], summary: str = "Not analysed", open: bool = False) -> Table:
    """Files whose findings are unknown: a reviewer must see them, or a change could hide code."""
    return Table(f"{summary} ({len(diagnostics)})", diagnostic_rows(diagnostics), open=open,
                 header=("| File | Kind | Reason |", "|---|---|---|"))


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
    return (f"<sub>neuron-ready {report.tool_version} · {MEANING} · effort is an estimate with "
            f"[documented assumptions]({EFFORT_DOCS}), not a quote · `neuron-ready rules NR1001` explains a rule</sub>")


def render(report: Report) -> str:
    blocks: list[Block] = [TITLE, headline(report)]
    nothing = no_analysis(report)
    if nothing:
        blocks.append(f"**{nothing}**")
    be = breakeven_line(report)
    if be:
        blocks.append(be)
    d = drivers(report)
    if d:
        blocks.append("\n".join(d))
    t = trace_text.summary_lines(report.extra.get("trace"))
    if t:
        blocks.append("**Trace**\n\n" + "\n".join(f"- {inline(line.strip())}" for line in t if line.strip()))
    blocks.extend(not_in_estimate(report))
    note = report.extra.get("baseline")
    if isinstance(note, dict) and "known" in note:
        blocks.append(f"Only findings that are not in the baseline are listed ({note['known']} known ones are not).")
    if report.findings:
        files = len({f.path for f in report.findings})
        blocks.append(Table(f"{_counted(report.findings)} in {_plural(files, 'file')}", finding_rows(report.findings)))
        if report.fixable_line():
            blocks.append(report.fixable_line())
    elif not nothing:
        blocks.append("No findings: nothing here stands in the way of a Trainium port.")
    if report.diagnostics:
        blocks.append(not_analysed(report.diagnostics))
    blocks.append(_footer(report))
    return assemble(blocks)


def _delta(x: float, fmt: str = "{:+.1f}") -> str:
    return "±0" if abs(x) < 1e-9 else fmt.format(x).replace("-", "−")


def _class_arrow(change: int) -> str:
    if change == 0:
        return "unchanged"
    classes = _plural(abs(change), "class", "classes")
    return f"▲ {classes} more work" if change > 0 else f"▼ {classes} less work"


def comparison_table(diff: ReportDiff) -> str:
    b, h, head = diff.base.estimate, diff.head.estimate, diff.head
    rows = [
        "| | Base | This change | Change |",
        "|---|---:|---:|---:|",
        f"| Readiness | {score_text(diff.base)} | **{score_text(head)}** | "
        f"{'—' if diff.score_delta is None else _delta(diff.score_delta, '{:+d}')} |",
        f"| Effort class | {b.effort_class} | **{h.effort_class}** | {_class_arrow(diff.class_change)} |",
        f"| P50 person-days | {_pd(b.p50)} | {_pd(h.p50)} | {pd_delta(h.p50 - b.p50)} |",
        f"| P80 person-days | {_pd(b.p80)} | {_pd(h.p80)} | {pd_delta(h.p80 - b.p80)} |",
        f"| Findings | {len(diff.base.findings)} | {len(diff.head.findings)} | +{len(diff.new)} / −{len(diff.fixed)} |",
    ]
    bb, hb = breakeven_line(diff.base), breakeven_line(diff.head)
    if bb or hb:
        rows.append(f"| Break-even | {bb or '—'} | {hb or '—'} | |")
    return "\n".join(rows)


def render_diff(diff: ReportDiff, lost: list[Diagnostic] = ()) -> str:
    """`lost`: files the base analysed that this change made unreadable (their findings are unknown)."""
    head = diff.head
    blocks: list[Block] = [TITLE, comparison_table(diff)]
    nothing = no_analysis(head)
    if nothing:
        blocks.append(f"**{nothing}**")
    if lost:
        blocks.append(f"**{_plural(len(lost), 'file')} analysed in the base could not be analysed after this change: "
                      "what they contain is not in this comparison.**")
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
        blocks.append(Table(f"All {_counted(head.findings)} in {_plural(files, 'file')} after this change",
                            finding_rows(head.findings)))
    if lost:
        blocks.append(not_analysed(list(lost), "No longer analysed", open=True))
    rest = [d for d in head.diagnostics if d not in lost]
    if rest:
        blocks.append(not_analysed(rest))
    blocks.append(_footer(head))
    return assemble(blocks)

