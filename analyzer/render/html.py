"""One self-contained HTML page: score, class, P50/P80, top drivers, the break-even chart, tasks and
findings. Inline CSS, the chart an inline PNG, no scripts and no external URLs: it opens offline and
can be attached to a ticket. Every text that comes from the scanned code is escaped."""

from __future__ import annotations

import re
from html import escape

from .. import breakeven
from ..model import Finding, Report
from ..numbers import money as _money, pd as _pd, plural
from . import chart, common, trace_text
from .safe import visible

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2733;margin:0;background:#f5f7fa}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 10px}
.sub{color:#5b6775;margin:0 0 18px}
.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:12px 16px;min-width:150px}
.card .k{color:#5b6775;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:26px;font-weight:650}
.days{color:#1e8449}.weeks{color:#b9770e}.month-plus{color:#c0392b}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #dde3ea;font-size:13px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e8edf2;vertical-align:top;overflow-wrap:anywhere}
p,li,.note{overflow-wrap:anywhere}a{color:#1f5fa8}
th{background:#eef2f6;font-weight:600}td.n{text-align:right;white-space:nowrap}
table.compact{width:auto;min-width:480px}table.compact th:not(:first-child){text-align:right}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef2f6;padding:1px 4px;border-radius:3px;word-break:break-all}
.note{background:#fff8e1;border:1px solid #f0d98c;border-radius:6px;padding:8px 12px}
img.chart{max-width:100%;background:#fff;border:1px solid #dde3ea;border-radius:8px}
.tag{font-size:11px;background:#e3f1e6;color:#1e6b34;border-radius:3px;padding:0 4px}
footer{color:#5b6775;font-size:12px;margin-top:32px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:10px 12px;font-size:12px}
"""


def _e(text) -> str:
    return escape(visible(text), quote=True)  # one line each: no raw control characters either


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _rich(text) -> str:
    """Escaped text whose Markdown code spans (messages and remedies use them) become <code>."""
    return _CODE_SPAN.sub(lambda m: f"<code>{m.group(2).strip()}</code>", _e(text))


def _loc(f: Finding) -> str:
    where = f"{f.path}:cell {f.cell}:{f.line}" if f.cell is not None else f"{f.path}:{f.line}"
    return f"<code>{_e(where)}</code>"


def _card(key: str, value: str, cls: str = "") -> str:
    return f'<div class="card"><div class="k">{_e(key)}</div><div class="v {cls}">{value}</div></div>'


def _table(head: list[str], rows: list[list[str]], numeric: tuple[int, ...] = (), cls: str = "") -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _summary(report: Report) -> list[str]:
    est = report.estimate
    files = len({f.path for f in report.findings})
    sites = report.sites()
    return [
        '<div class="cards">',
        _card("Readiness", common.score_text(report)),
        _card("Effort class", _e(est.effort_class), _e(est.effort_class)),
        _card("P50 / P80", f"{_pd(est.p50)} / {_pd(est.p80)} <small>person-days</small>"),
        _card("Range", f"{_pd(est.person_days.low)}–{_pd(est.person_days.high)}"),
        _card("Findings", f"{len(report.findings) - sites} <small>in {plural(files, 'file')}"
                          + (f", +{plural(sites, 'site')} of their edits" if sites else "") + "</small>"),
        "</div>",
    ]


def _drivers(report: Report) -> list[str]:
    by_id = {t.id: t for t in report.tasks}
    rows = [by_id[d] for d in report.estimate.drivers if d in by_id]
    if not rows:
        return []
    items = "".join(f"<li>{_rich(t.title)} — {_pd(t.person_days.likely)} person-days likely</li>" for t in rows)
    return ["<h2>Top drivers</h2>", f"<ol>{items}</ol>"]


def _breakeven(report: Report) -> list[str]:
    be = report.extra.get("breakeven")
    out = ["<h2>Break-even</h2>"]
    if not isinstance(be, dict) or "gpu_cost_per_run" not in be:
        out.append('<p class="note">No workload configured: add <code>[tool.neuron-ready.workload]</code> '
                   "(GPU hours per run, instances or prices, relative throughput, runs per month) to see "
                   "when the port pays back; README.md shows an example.</p>")
        return out
    w = be.get("inputs", {})
    gpu_label = w.get("gpu_instance") or "GPU"
    trn_label = w.get("trainium_instance") or "Trainium"
    if be.get("summary"):
        out.append(f"<p><strong>{_e(be['summary'])}</strong></p>")
    png = chart.png_base64(breakeven.cumulative(be, points=121), str(gpu_label), str(trn_label))
    if png is None:
        out.append(f'<p class="note">The chart needs matplotlib: <code>{_e(chart.INSTALL_HINT)}</code>.</p>')
    else:
        out.append(f'<img class="chart" alt="Cumulative cost against training runs: {_e(gpu_label)} and '
                   f'{_e(trn_label)} with the port cost" src="data:image/png;base64,{png}">')
    p80 = be.get("p80", {})

    def runs(r):
        return "never" if r is None else f"{r:,.1f}"

    def months(m):
        return "—" if m is None else f"{m:,.1f}"

    rows = [
        ["GPU cost per run", _e(_money(be["gpu_cost_per_run"])), ""],
        ["Trainium cost per run", _e(_money(be["trainium_cost_per_run"])), ""],
        ["Saving per run", _e(_money(be["saving_per_run"])), ""],
        ["Port cost", _e(_money(be["port_cost"])), _e(_money(p80.get("port_cost", 0.0)))],
        ["Break-even runs", runs(be["breakeven_runs"]), runs(p80.get("breakeven_runs"))],
        ["Break-even months", months(be["breakeven_months"]), months(p80.get("breakeven_months"))],
        ["Verdict", _e(be.get("verdict_text") or be["verdict"]), _e(p80.get("verdict_text") or p80.get("verdict", ""))],
    ]
    out.append(_table(["", "P50", "P80"], rows, numeric=(1, 2), cls="compact"))
    out.extend(_sensitivity(be.get("sensitivity")))
    if w:
        out.append(f'<p class="sub">Inputs: {_e(gpu_label)} ×{_e(w.get("gpu_instances"))} vs {_e(trn_label)} '
                   f'×{_e(w.get("trainium_instances"))} ({_e(w.get("pricing"))}), {_e(w.get("gpu_hours_per_run"))} GPU hours '
                   f'per run, relative throughput {_e(w.get("relative_throughput"))}, day rate {_e(_money(w.get("day_rate", 0.0)))}. '
                   f'Prices: {_e(w.get("gpu_price_source", ""))}; {_e(w.get("trainium_price_source", ""))}.</p>')
    return out


def _trace(report: Report) -> list[str]:
    """`trace` mode: op counts, the support percentage, graph breaks, as the text report says them."""
    lines = trace_text.summary_lines(report.extra.get("trace"))
    if not lines:
        return []
    return ["<h2>Trace</h2>", f"<pre>{_e(chr(10).join(line for line in lines if line))}</pre>"]


def _sensitivity(sens) -> list[str]:
    """Break-even months at P50 over relative throughput (rows) and runs per month (columns)."""
    if not isinstance(sens, dict) or not sens.get("rows"):
        return []
    head = ["Relative throughput \\ runs per month"] + [f"{k:g}" for k in sens["runs_per_month"]]
    rows = [[f"{row['relative_throughput']:g}"] + ["never" if m is None else f"{m:,.1f}" for m in row["breakeven_months"]]
            for row in sens["rows"]]
    return [f"<h3>Sensitivity: break-even months at P50 ({_pd(sens['person_days'])} person-days)</h3>",
            _table(head, rows, numeric=tuple(range(1, len(head))), cls="compact")]


def _tasks(report: Report) -> list[str]:
    if not report.tasks:
        return []
    rows = [
        [_rich(t.title) + (' <span class="tag">fallback</span>' if t.fallback else ""), _e(t.kind), _e(t.category),
         _pd(t.person_days.likely), f"{_pd(t.person_days.low)}–{_pd(t.person_days.high)}", str(len(t.findings)),
         _rich(t.remedy)]
        for t in report.tasks
    ]
    return ["<h2>Tasks</h2>", _table(["Task", "Kind", "Category", "Likely", "Range", "Findings", "Remedy"], rows,
                                     numeric=(3, 4, 5))]


def _findings(title: str, findings: list[Finding], reason: bool = False) -> list[str]:
    if not findings:
        return []
    rows = []
    for f, sites in common.items(findings):  # a site of an item's edit is named in the item's row
        msg = _rich(f.message) + (' <span class="tag">fallback</span>' if f.fallback else "")
        if sites:
            msg += f"<br><small>{_e(common.also_at(sites))}</small>"
        row = [_loc(f), f'<a href="{_e(common.rule_url(f.rule))}">{_e(f.rule)}</a>', _e(f.category), msg, _e(f.confidence)]
        if reason:
            row.append(_e(f.details.get("off_path_reason", "")))
        rows.append(row)
    head = ["Location", "Rule", "Category", "Finding", "Confidence"] + (["Why it is not in the estimate"] if reason else [])
    return [f"<h2>{_e(title)}</h2>", _table(head, rows)]


def _opt_in(report: Report) -> list[str]:
    if not report.opt_in:
        return []
    rows = [[f"<code>{_e(p.name)}</code>", _e(p.gate), str(len(p.findings)), _pd(p.estimate.p50), _pd(p.estimate.p80)]
            for p in report.opt_in]
    return ["<h2>Opt-in features (not in the estimate; <code>--include-opt-in NAME</code> adds one)</h2>",
            _table(["Feature", "Turned on", "Findings", "P50", "P80"], rows, numeric=(2, 3, 4))]


_CONTEXT_TITLES = (
    ("opt-in", "Opt-in findings"), ("evaluation", "Evaluation path"), ("host", "Host-side data loading (no cost)"),
    ("neuron-native", "Already Neuron or XLA (no cost)"), ("off-path", "Off the training path"),
)


def _context_findings(report: Report) -> list[str]:
    out: list[str] = []
    for context, title in _CONTEXT_TITLES:
        fs = [f for f in report.off_path if (f.context or "off-path") == context]
        if context == "evaluation" and fs and report.evaluation is not None:
            title += f" (P50 {_pd(report.evaluation.estimate.p50)} person-days)"
        out += _findings(f"{title} ({len(fs)})", fs, reason=True)
    return out


def render(report: Report) -> str:
    root = report.root or "."
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>neuron-ready: {_e(root)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>Trainium port readiness: <code>{_e(root)}</code></h1>",
        f'<p class="sub">{plural(report.files_scanned, "file")} scanned · target {_e(report.target)} · '
        f"{plural(len(report.off_path), 'finding')} outside the must-port estimate (opt-in, evaluation, host-side, "
        "already Neuron, off the path)</p>",
        *([f'<p class="note">{_e(common.no_analysis(report))}</p>'] if common.no_analysis(report) else []),
        *_summary(report),
        *_drivers(report),
        *_trace(report),
        *_breakeven(report),
        *_tasks(report),
        *_findings(f"Must-port findings: the training step in the default configuration ({len(report.findings) - report.sites()})",
                   report.findings),
        *([f"<p>{_e(report.fixable_line('neuron-ready fix'))}</p>"] if report.fixable_line() else []),
        *_opt_in(report),
        *_context_findings(report),
    ]
    if report.diagnostics:
        rows = [[f"<code>{_e(d.path)}{':' + str(d.line) if d.line else ''}</code>", _e(d.kind), _e(d.message)]
                for d in report.diagnostics]
        parts += [f"<h2>Not analysed ({len(report.diagnostics)})</h2>", _table(["File", "Kind", "Why"], rows)]
    parts += [
        f"<footer>neuron-ready {_e(report.tool_version)} · {_e(common.MEANING)}. Effort is an "
        f'estimate with <a href="{_e(common.EFFORT_DOCS)}">documented assumptions</a>, not a quote · '
        "<code>neuron-ready rules NR1001</code> explains a rule</footer>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"
