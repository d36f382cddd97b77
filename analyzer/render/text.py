"""Terminal output: findings grouped by file (file:line:col, rule, message, remedy), then a summary."""

from __future__ import annotations

import shutil
import textwrap
from itertools import groupby

import click

from ..model import Finding, Report
from ..numbers import pd as _pd, plural
from . import common, trace_text
from .safe import visible

_CLASS_COLOR = {"days": "green", "weeks": "yellow", "month-plus": "red"}


def _loc(f: Finding) -> str:
    return f"cell {f.cell}:{f.line}:{f.column}" if f.cell is not None else f"{f.line}:{f.column}"


def _link(text: str, url: str) -> str:
    """An OSC 8 terminal hyperlink (terminals without support show the text alone)."""
    return f"\033]8;;{url}\033\\{text}\033]8;;\033\\"


_LIST = 20  # findings listed per section; the JSON has them all
_SECTIONS = (
    ("evaluation", "Evaluation path (not in the estimate)"),
    ("host", "Host-side data loading (runs on the CPU: no cost)"),
    ("neuron-native", "Already on Neuron or XLA (no cost)"),
    ("off-path", "Off the training path (not in the estimate)"),
)


def _line(f: Finding, why: str | None, s) -> str:
    return f"  {visible(f.path)}:{_loc(f)}  {f.rule}  {visible(f.message)}" + (s(f"  [{visible(why)}]", dim=True) if why else "")


def _listing(fs: list[Finding], s, why=lambda f: f.details.get("off_path_reason")) -> list[str]:
    """Up to _LIST items, each with its sites (common.items) on the line below."""
    rows = common.items(fs)
    out = []
    for f, sites in rows[:_LIST]:
        out.append(_line(f, why(f), s))
        if sites:
            out.append("      " + s(visible(common.also_at(sites)), dim=True))
    if len(rows) > _LIST:
        out.append(f"  ... and {len(rows) - _LIST} more (see --format json)")
    return out


def _other_contexts(report: Report, s) -> list[str]:
    """The findings outside the must-port part, by where they run."""
    out: list[str] = []
    if report.opt_in:
        out.append(s(f"Opt-in features ({len(report.opt_in)}, not in the estimate; add with --include-opt-in NAME)", bold=True))
        for p in report.opt_in[:common.OPT_IN_SHOWN]:
            n = len(p.findings)
            out.append(f"  {s(visible(p.name), fg='cyan')}  {visible(p.gate)} · {plural(n, 'finding')} · "
                       f"P50 {_pd(p.estimate.p50)} / P80 {_pd(p.estimate.p80)} person-days")
            out.extend("  " + line for line in _listing([report.off_path[i] for i in p.findings], s, lambda f: None))
        rest = report.opt_in[common.OPT_IN_SHOWN:]
        if rest:
            out.append(f"  ... and {plural(len(rest), 'more feature')} (P50 {_pd(sum(p.estimate.p50 for p in rest))} "
                       "person-days in all; see --format json)")
        out.append("")
    for context, title in _SECTIONS:
        fs = [f for f in report.off_path if (f.context or "off-path") == context]
        if not fs:
            continue
        head = f"{title} · {plural(len(fs), 'finding')}"
        if context == "evaluation" and report.evaluation is not None:
            e = report.evaluation.estimate
            head += f" · P50 {_pd(e.p50)} / P80 {_pd(e.p80)} person-days"
        out.append(s(head, bold=True))
        out.extend(_listing(fs, s, (lambda f: f.details.get("off_path_reason")) if context == "off-path" else (lambda f: None)))
        out.append("")
    return out


def _library_line(reach: dict) -> str:
    programs = [e for e in reach.get("extensions", ()) if e.get("kind") == "program" and e.get("on_path")]
    if programs:
        return "the CUDA training program" + ("s " if len(programs) > 1 else " ") + ", ".join(
            f"{visible(e['id'][8:].split('@')[0])} ({visible(e['build'])}:{e['line']})" for e in programs[:3])
    return "every module (no training entry point found; name one with --entry)"


def _not_costed(report: Report) -> str:
    parts = []
    if report.opt_in:
        p50 = sum(p.estimate.p50 for p in report.opt_in)
        parts.append(f"{plural(len(report.opt_in), 'opt-in feature')} (P50 {_pd(p50)})")
    if report.evaluation is not None:
        parts.append(f"evaluation path (P50 {_pd(report.evaluation.estimate.p50)})")
    counts = report.context_counts()
    for context, label in (("host", "host-side"), ("neuron-native", "already on Neuron"), ("off-path", "off the path")):
        if counts.get(context):
            parts.append(f"{counts[context]} {label}")
    return " · ".join(parts)


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
    for path, group in groupby([] if statistics else common.items(shown), key=lambda row: row[0].path):
        out.append(s(visible(path), bold=True))
        for f, sites in group:
            tag = (" (fallback)" if f.fallback else "") + trace_text.finding_tag(f)
            conf = "" if f.confidence == "high" else s(f" ({f.confidence} confidence)", dim=True)
            out.append(f"  {_loc(f):>10}  {rule(f.rule)}  {visible(f.message)}{s(tag, fg='green')}{conf}")
            if sites:  # further lines of the same edit, counted once
                out.append(f"{indent}{s(visible(common.also_at(sites)), dim=True)}")
            for g in [f] + [x for x in sites if x.rule != f.rule]:  # a site's own rule is explained too
                if g.rule in explained:
                    continue
                explained.add(g.rule)
                label = "fix:" if g is f else f"fix ({g.rule}):"
                fix = textwrap.wrap(visible(g.remedy), width - len(indent) - len(label) - 1) or [""]
                out.append(f"{indent}{s(label, dim=True)} {fix[0]}")
                out.extend(f"{indent}{' ' * (len(label) + 1)}{line}" for line in fix[1:])
        out.append("")
    hidden = len(report.findings) - len(shown)
    if hidden:
        out += [f"{plural(hidden, 'finding')} below {min_confidence} confidence not shown (still in the estimate)", ""]
    out.extend(_other_contexts(report, s))
    if report.diagnostics:
        out.append(s(f"Not analysed ({len(report.diagnostics)})", bold=True))
        for d in report.diagnostics:
            where = f"{d.path}:{d.line}" if d.line else d.path
            out.append(f"  {visible(where)}  [{d.kind}] {visible(d.message)}")
        out.append("")
    out.extend(trace_text.summary_lines(report.extra.get("trace")))
    out.extend(_tasks(report, s))
    est = report.estimate
    sites = report.sites()
    n = len(report.findings) - sites  # items: a site is a further line of an edit counted once
    files = len({f.path for f in report.findings})
    fb = sum(1 for f in report.findings if f.fallback and not f.part_of)
    more = f"{plural(sites, 'more site')} of these edits, " if sites else ""
    out.append(
        f"{plural(n, 'finding')} in {plural(files, 'file')} "
        f"({more}{fb} with a fallback, {report.suppressed} suppressed) · {plural(report.files_scanned, 'file')} scanned · target {report.target}"
        + (f" ({visible(report.extra['target_from'])})" if report.extra.get("target_from") else "")
    )
    if report.fixable_line():
        out.append(report.fixable_line())
    nothing = common.no_analysis(report)
    if nothing:
        out.append(s(nothing, fg="yellow", bold=True))
        return "\n".join(out) + "\n"
    cls = s(est.effort_class, fg=_CLASS_COLOR.get(est.effort_class, "white"), bold=True)
    out.append(
        f"Readiness {common.score_text(report)} · effort: {cls} · P50 {_pd(est.p50)} / P80 {_pd(est.p80)} person-days "
        f"(range {_pd(est.person_days.low)}–{_pd(est.person_days.high)})"
    )
    rest = _not_costed(report)
    if rest:
        out.append("Not in the estimate: " + rest)
    reach = report.extra.get("reach")
    traced_only = "trace" in report.extra and reach.get("mode") == "library" if isinstance(reach, dict) else False
    if isinstance(reach, dict) and reach.get("mode") and not traced_only:  # `trace` has no --entry
        entries = reach.get("entries") or []
        reasons = reach.get("entry_reasons") or {}
        shown = [f"{visible(e)} ({visible(reasons[e])})" if reach.get("detected") and e in reasons else visible(e)
                 for e in entries[:3]]
        symbols = reach.get("entry_symbols") or {}
        if symbols:  # `--entry gsplat:rasterization`: the name the user gave and where it is defined
            entries = list(symbols)
            shown = [f"{visible(name)} ({', '.join(visible(n) for n in symbols[name][:2])})" for name in entries[:3]]
        how = {"entries": f"from {', '.join(shown)}{' …' if len(entries) > 3 else ''}"
                          f"{'' if reach.get('detected') else ' (named)'}",
               "library": _library_line(reach),
               "files": "the files given"}.get(reach["mode"], reach["mode"])
        out.append(f"Training path: {how}")
    be = report.extra.get("breakeven")
    if isinstance(be, dict) and be.get("summary"):
        out.append(visible(be["summary"]))
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
        out.append(f"  {_pd(pd.likely):>6}  {_pd(pd.low) + '–' + _pd(pd.high):>11}  {visible(t.title)}"
                   + (" (fallback)" if t.fallback else ""))
    return out + [""]


def _statistics(findings: list[Finding], rule) -> list[str]:
    """Per-rule counts in place of the listing, as `ruff --statistics` prints them."""
    rows = common.statistics(findings)
    out = [f"  {count:>5}  {rule(rule_id)}  {category:<14}  {confidence}" for rule_id, category, count, confidence in rows]
    return out + [""] if out else []
