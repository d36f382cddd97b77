"""One self-contained HTML page: score, class, P50/P80, top drivers, the break-even chart, tasks and
findings. Inline CSS, the chart an inline PNG, no scripts and no external URLs: it opens offline and
can be attached to a ticket. Every text that comes from the scanned code is escaped."""

from __future__ import annotations

import re
from html import escape

from .. import breakeven
from ..model import Finding, Report
from . import chart

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
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e8edf2;vertical-align:top}
th{background:#eef2f6;font-weight:600}td.n{text-align:right;white-space:nowrap}
table.compact{width:auto;min-width:480px}table.compact th:not(:first-child){text-align:right}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef2f6;padding:1px 4px;border-radius:3px;word-break:break-all}
.note{background:#fff8e1;border:1px solid #f0d98c;border-radius:6px;padding:8px 12px}
img.chart{max-width:100%;background:#fff;border:1px solid #dde3ea;border-radius:8px}
.tag{font-size:11px;background:#e3f1e6;color:#1e6b34;border-radius:3px;padding:0 4px}
footer{color:#5b6775;font-size:12px;margin-top:32px}
"""


def _e(text) -> str:
    return escape(str(text), quote=True)


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _rich(text) -> str:
    """Escaped text whose Markdown code spans (messages and remedies use them) become <code>."""
    return _CODE_SPAN.sub(lambda m: f"<code>{m.group(2).strip()}</code>", _e(text))


def _pd(x: float) -> str:
    return f"{x:.1f}"


def _money(x: float) -> str:
    return f"${x:,.0f}" if abs(x) >= 100 else f"${x:,.2f}"


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
    return [
        '<div class="cards">',
        _card("Readiness", f"{est.score}/100"),
        _card("Effort class", _e(est.effort_class), _e(est.effort_class)),
        _card("P50 / P80", f"{_pd(est.p50)} / {_pd(est.p80)} <small>person-days</small>"),
        _card("Range", f"{_pd(est.person_days.low)}–{_pd(est.person_days.high)}"),
        _card("Findings", f"{len(report.findings)} <small>in {files} files</small>"),
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
        ["Verdict", _e(be["verdict"]), _e(p80.get("verdict", ""))],
    ]
    out.append(_table(["", "P50", "P80"], rows, numeric=(1, 2), cls="compact"))
    if w:
        out.append(f'<p class="sub">Inputs: {_e(gpu_label)} ×{_e(w.get("gpu_instances"))} vs {_e(trn_label)} '
                   f'×{_e(w.get("trainium_instances"))} ({_e(w.get("pricing"))}), {_e(w.get("gpu_hours_per_run"))} GPU hours '
                   f'per run, relative throughput {_e(w.get("relative_throughput"))}, day rate {_e(_money(w.get("day_rate", 0.0)))}. '
                   f'Prices: {_e(w.get("gpu_price_source", ""))}; {_e(w.get("trainium_price_source", ""))}.</p>')
    return out


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
    for f in findings:
        msg = _rich(f.message) + (' <span class="tag">fallback</span>' if f.fallback else "")
        row = [_loc(f), _e(f.rule), _e(f.category), msg]
        if reason:
            row.append(_e(f.details.get("off_path_reason", "")))
        rows.append(row)
    head = ["Location", "Rule", "Category", "Finding"] + (["Why off the path"] if reason else [])
    return [f"<h2>{_e(title)}</h2>", _table(head, rows)]


def render(report: Report) -> str:
    root = report.root or "."
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>neuron-ready: {_e(root)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>Trainium port readiness: <code>{_e(root)}</code></h1>",
        f'<p class="sub">{report.files_scanned} files scanned · target {_e(report.target)} · '
        f"{len(report.off_path)} findings off the training path, not in the estimate</p>",
        *_summary(report),
        *_drivers(report),
        *_breakeven(report),
        *_tasks(report),
        *_findings(f"Findings on the training path ({len(report.findings)})", report.findings),
        *([f"<p>{_e(report.fixable_line('neuron-ready fix'))}</p>"] if report.fixable_line() else []),
        *_findings(f"Off the training path ({len(report.off_path)})", report.off_path, reason=True),
    ]
    if report.diagnostics:
        rows = [[f"<code>{_e(d.path)}{':' + str(d.line) if d.line else ''}</code>", _e(d.kind), _e(d.message)]
                for d in report.diagnostics]
        parts += [f"<h2>Not analysed ({len(report.diagnostics)})</h2>", _table(["File", "Kind", "Why"], rows)]
    parts += [
        f"<footer>neuron-ready {_e(report.tool_version)} · effort is an estimate with documented assumptions "
        "(docs/effort-model.md), not a quote · <code>neuron-ready rules NR1001</code> explains a rule</footer>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"
