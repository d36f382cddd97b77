"""Trace mode in the terminal report: a tag on each finding and a block of op counts."""

from __future__ import annotations

from ..model import Finding
from ..numbers import plural

STATUS_TAGS = {"confirmed": "confirmed by trace", "not-traced": "not traced"}
MAX_LISTED = 8


def finding_tag(f: Finding) -> str:
    if f.origin == "trace":
        return " [trace]"
    tag = STATUS_TAGS.get(f.status or "")
    return f" [{tag}]" if tag else ""


def _n(x: int) -> str:
    return f"{x:,}"


def _ops(entries: list[dict], with_conditions: bool) -> list[str]:
    out = []
    for e in entries[:MAX_LISTED]:
        cond = f" {'; '.join(e['conditions'])}" if with_conditions and e["conditions"] else ""
        calls = e["calls"]
        where = f" at {', '.join(calls[:3])}{' ...' if len(calls) > 3 else ''}" if calls else ""
        out.append(f"    {e['op']} ×{_n(e['count'])} ({', '.join(e['rules'])}{cond}){where}")
    if len(entries) > MAX_LISTED:
        out.append(f"    ... and {len(entries) - MAX_LISTED} more (see --format json)")
    return out


def summary_lines(trace: dict | None) -> list[str]:
    if not isinstance(trace, dict):
        return []
    ops = trace["ops"]
    params = f" ({_n(trace['parameters'])} parameters)" if trace.get("parameters") else ""
    inputs = " ".join(trace.get("inputs") or []) or "none"
    mode = "forward + backward" if trace["mode"] == "forward+backward" else "forward only"
    out = [
        f"Trace of {trace['target']}: {trace['model']}{params}, {mode}{', dynamic batch/sequence' if trace.get('dynamic') else ''}, inputs {inputs}",
        f"  {_n(ops['calls'])} aten calls ({_n(ops['forward_calls'])} forward, {_n(ops['backward_calls'])} backward), "
        f"{ops['distinct']} distinct ops · "
        + (f"{ops['support_percentage']:g}% supported" if ops["calls"] else "nothing traced, nothing judged"),
    ]
    if ops["unsupported_operators"]:
        out.append("  Unsupported:")
        out += _ops(ops["unsupported_operators"], with_conditions=False)
    if ops["restricted_operators"]:
        out.append("  Restricted:")
        out += _ops(ops["restricted_operators"], with_conditions=True)
    if ops.get("custom_operators"):
        out.append("  Not aten (custom ops): " + ", ".join(f"{k} ×{_n(v)}" for k, v in ops["custom_operators"].items()))
    gb = trace["graph_breaks"]
    parts = []
    if gb["status"] == "ran":
        parts.append(f"graph breaks: {gb['breaks']} ({plural(gb['graphs'], 'graph')})")
    else:
        parts.append(f"graph breaks: {gb['status']}")
    branches = sum(e["count"] for e in trace["events"] if e["kind"] == "data-dependent-branch")
    if branches:
        parts.append(f"branches on tensor data: {branches}")
    if not trace["complete"]:
        stop = trace.get("stopped")
        where = f" at {stop['path']}:{stop['line']}" if stop and "path" in stop else ""
        message = stop["message"] if stop else "stopped"
        parts.append(f"incomplete: {message if len(message) <= 100 else message[:97] + '...'}{where}")
    out.append("  " + " · ".join(parts))
    counts = trace.get("findings") or {}
    if any(counts.get(k) for k in ("confirmed", "traced", "not-traced")):
        out.append(
            f"  Static findings: {counts['confirmed']} confirmed, {counts['traced']} traced without a twin, "
            f"{counts['not-traced']} not traced; {counts['trace-only']} found by the trace only"
        )
    guards = trace.get("shape_guards") or []
    if guards:
        shown = "; ".join(f"{g['guard']}" + (f" ({g['path']}:{g['line']})" if "path" in g else "") for g in guards[:MAX_LISTED])
        out.append(f"  Shape guards on the dynamic dimensions: {shown}{' ...' if len(guards) > MAX_LISTED else ''}")
    return out + [""]
