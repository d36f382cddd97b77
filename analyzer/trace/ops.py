"""What the trace saw, judged by the catalog: aten ops -> supported / restricted / unsupported, op
counts in the style of `torch_neuronx.analyze`, and findings at the user's source lines.

Op names. An op is named by its packet and overload as PyTorch's schema spells them, with the
default overload left out: `aten::nonzero` (overload `default`), `aten::sort.stable`,
`aten::repeat_interleave.Tensor`. A catalog entry without an overload (`aten::sort`) matches every
overload of that packet; an entry with one (`aten::sort.stable`) matches only that overload;
`*` and `?` are wildcards (`aten::*`); the `aten::` prefix may be left out. In-place variants are
their own packets (`aten::scatter_reduce_`): the trace records ops as they run, before
functionalisation, so rules list both forms where both occur.

Precedence. When a wildcard clause (`aten::*` with `when = "float64"`) and a rule that names the
op both match one call in the same category, the named rule wins (boolean-mask indexing is
reported as NR1504, not also as the generic data-dependent-size rule NR1514). Rules of different
categories all apply: an FP64 `sort` is both an unsupported op and an FP64 tensor.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass

import pathspec

from ..catalog import Catalog, Match, Rule, selector_matches
from ..model import Finding
from ..suppress import Suppressions
from .data import OpUse, Site, TraceEvent, TraceResult

# Conditions, as the op-count report words them.
WHEN_TEXT = {
    "integer": "on integer inputs",
    "integer_or_bool": "on integer or bool inputs",
    "float64": "with float64 tensors",
    "complex": "with complex tensors",
    "dynamic": "with a data-dependent output size",
}
# Conditions of rules that apply whenever the op runs, by category.
CATEGORY_TEXT = {
    "dynamic-shape": "data-dependent output size",
    "host-sync": "reads a tensor value on the host",
}
SNIPPET_CHARS = 80
MESSAGE_CHARS = 160


def _normal(pattern: str) -> str:
    return pattern if "::" in pattern else f"aten::{pattern}"


def op_matches(pattern: str, op: str) -> bool:
    """Does a catalog op pattern match a normalised op name (see the module docstring)?"""
    pattern = _normal(pattern)
    if "." in pattern.split("::", 1)[1]:
        return fnmatch.fnmatchcase(op, pattern)
    return fnmatch.fnmatchcase(op.split(".", 1)[0], pattern)


def condition_holds(when: str, facts: frozenset[str]) -> bool:
    if when == "always":
        return True
    if when == "integer_or_bool":
        return "integer" in facts or "bool" in facts
    return when in facts


def _is_wildcard(m: Match) -> bool:
    return any("*" in p or "?" in p for p in m.ops)


class OpJudge:
    """The catalog's aten and trace clauses, indexed for the ops and events of one trace."""

    def __init__(self, catalog: Catalog):
        self.aten: list[tuple[Rule, Match]] = [(r, m) for r in catalog for m in r.match if m.kind == "aten"]
        self.events: dict[str, list[Rule]] = {}
        for r in catalog:
            for m in r.match:
                if m.kind == "trace":
                    for e in m.events:
                        self.events.setdefault(e, []).append(r)
        self._by_op: dict[str, list[tuple[Rule, Match]]] = {}

    def clauses_for(self, op: str) -> list[tuple[Rule, Match]]:
        hit = self._by_op.get(op)
        if hit is None:
            hit = self._by_op[op] = [(r, m) for r, m in self.aten if any(op_matches(p, op) for p in m.ops)]
        return hit

    def rules_for(self, use: OpUse) -> list[tuple[Rule, Match]]:
        """The rules one op call triggers, after precedence (one clause per rule)."""
        hits: dict[str, tuple[Rule, Match]] = {}
        for r, m in self.clauses_for(use.op):
            if condition_holds(m.when, use.facts) and (r.id not in hits or _is_wildcard(hits[r.id][1])):
                hits[r.id] = (r, m)
        named = {r.category for r, m in hits.values() if not _is_wildcard(m)}
        return [(r, m) for r, m in hits.values() if not (_is_wildcard(m) and r.category in named)]


def status_of(op: str, matched: list[tuple[Rule, Match]]) -> str:
    """supported, restricted (a rule applies under a condition this call meets), unsupported
    (an unsupported-op rule that applies always), or custom (not an aten op: the project's own)."""
    if not op.startswith("aten::"):
        return "custom"
    if any(r.category == "unsupported-op" and m.when == "always" for r, m in matched):
        return "unsupported"
    return "restricted" if matched else "supported"


def _condition(r: Rule, m: Match) -> str:
    return WHEN_TEXT.get(m.when) or CATEGORY_TEXT.get(r.category, r.category)


def op_report(result: TraceResult, judge: OpJudge) -> dict:
    """Op counts like torch_neuronx.analyze (support percentage, supported and unsupported ops
    with counts), plus restricted ops with their conditions and the sites of every problem op."""
    per_op: dict[str, dict] = {}
    total = {"forward": 0, "backward": 0}
    supported_calls = 0
    for use, n in result.uses.items():
        total[use.phase] = total.get(use.phase, 0) + n
        matched = judge.rules_for(use)
        status = status_of(use.op, matched)
        if status == "supported":
            supported_calls += n
        entry = per_op.setdefault(use.op, {"count": 0, "statuses": {}, "rules": {}, "calls": set()})
        entry["count"] += n
        entry["statuses"][status] = entry["statuses"].get(status, 0) + n
        for r, m in matched:
            entry["rules"][r.id] = _condition(r, m)
        if status != "supported" and use.site is not None:
            entry["calls"].add(str(use.site))
    calls = sum(total.values())
    out: dict = {
        "calls": calls,
        "forward_calls": total.get("forward", 0),
        "backward_calls": total.get("backward", 0),
        "distinct": len(per_op),
        "support_percentage": round(100.0 * supported_calls / calls, 2) if calls else 100.0,
        "supported_operators": {},
        "restricted_operators": [],
        "unsupported_operators": [],
        "custom_operators": {},
    }
    for op in sorted(per_op):
        e = per_op[op]
        st = e["statuses"]
        if st.get("supported"):
            out["supported_operators"][op] = st["supported"]
        if st.get("custom"):
            out["custom_operators"][op] = st["custom"]
        for status, key in (("restricted", "restricted_operators"), ("unsupported", "unsupported_operators")):
            if st.get(status):
                rules = {rid: cond for rid, cond in sorted(e["rules"].items())}
                out[key].append({
                    "op": op,
                    "count": st[status],
                    "rules": sorted(rules),
                    "conditions": sorted(set(rules.values())),
                    "calls": sorted(e["calls"], key=_site_sort),
                })
    return out


def _site_sort(text: str) -> tuple:
    path, _, line = text.rpartition(":")
    return (path, int(line) if line.isdigit() else 0)


# ------------------------------------------------------------------------------------------ findings


@dataclass
class _Group:
    rule: Rule
    site: Site
    ops: dict[str, int]
    phases: set[str]
    conditions: set[str]


class SourceLines:
    """Lines of the user's files, read once, for snippets and suppression comments."""

    def __init__(self, root: str):
        self.root = root
        self._text: dict[str, str | None] = {}

    def text(self, path: str) -> str | None:
        if path not in self._text:
            try:
                with open(os.path.join(self.root, path), encoding="utf-8") as fh:
                    self._text[path] = fh.read()
            except (OSError, UnicodeDecodeError):
                self._text[path] = None
        return self._text[path]

    def line(self, site: Site) -> str:
        text = self.text(site.path) if site.user else None
        lines = text.splitlines() if text else []
        return lines[site.line - 1].strip() if 0 < site.line <= len(lines) else ""


def trace_findings(result: TraceResult, judge: OpJudge, target: str, root: str,
                   per_path_ignores: dict[str, list[str]] | None = None) -> tuple[list[Finding], int]:
    """One finding per (rule, source line): ops grouped by the line that called them (backward
    ops under the forward line that created them), plus one per event. Honours
    `# neuron-ready: ignore` comments and per-path ignores. Returns (findings, suppressed)."""
    groups: dict[tuple[str, str, int], _Group] = {}
    for use, n in sorted(result.uses.items(), key=lambda kv: (kv[0].site or Site("", 0), kv[0].op, kv[0].phase)):
        if use.site is None:
            continue
        for r, m in judge.rules_for(use):
            # one finding per rule and line: the first column on the line stands for all
            g = groups.setdefault((r.id, use.site.path, use.site.line), _Group(r, use.site, {}, set(), set()))
            g.ops[use.op] = g.ops.get(use.op, 0) + n
            g.phases.add(use.phase)
            if m.when != "always":
                g.conditions.add(WHEN_TEXT[m.when])
    sources = SourceLines(root)
    findings: list[Finding] = []
    for g in groups.values():
        site = g.site
        symbol = max(g.ops, key=lambda op: (g.ops[op], op))
        details = {"ops": dict(sorted(g.ops.items())), "phases": sorted(g.phases)}
        if g.conditions:
            details["condition"] = "; ".join(sorted(g.conditions))
        findings.append(_finding(g.rule, site, symbol, target, sources, details))
    for ev in result.events:
        if ev.site is None:
            continue
        for r in judge.events.get(ev.kind, []):
            line = _clip(sources.line(ev.site), SNIPPET_CHARS)
            symbol = line if ev.kind == "data-dependent-branch" else _clip(ev.message, MESSAGE_CHARS)
            details = {"event": ev.kind, "count": ev.count}
            if ev.detail:
                details["detail"] = ev.detail
            findings.append(_finding(r, ev.site, symbol or ev.message, target, sources, details))
    return _filter(findings, sources, per_path_ignores or {})


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + "..."


def _finding(rule: Rule, site: Site, symbol: str, target: str, sources: SourceLines, details: dict) -> Finding:
    return Finding(
        rule=rule.id, category=rule.category, path=site.path, line=site.line, column=site.column,
        message=rule.render_message(symbol, details), remedy=rule.remedy_for(target),
        confidence=rule.confidence, symbol=symbol, snippet=" ".join(sources.line(site).split()),
        scope=site.function, details=details, origin="trace",
    )


def _filter(findings: list[Finding], sources: SourceLines, per_path_ignores: dict[str, list[str]]) -> tuple[list[Finding], int]:
    specs = [(pathspec.GitIgnoreSpec.from_lines([p]), sels) for p, sels in sorted(per_path_ignores.items())]
    kept: list[Finding] = []
    suppressed = 0
    marks: dict[str, Suppressions] = {}
    for f in sorted(findings, key=Finding.sort_key):
        if f.path not in marks:
            marks[f.path] = Suppressions(sources.text(f.path) or "")
        ignored = any(spec.match_file(f.path) and any(selector_matches(s, f.rule, f.category) for s in sels)
                      for spec, sels in specs)
        if ignored or marks[f.path].covers(f.rule, f.category, f.line):
            suppressed += 1
        else:
            kept.append(f)
    return kept, suppressed


def event_report(events: list[TraceEvent]) -> list[dict]:
    out = []
    for ev in sorted(events, key=lambda e: (e.kind, str(e.site), e.message)):
        d = {"kind": ev.kind, "message": ev.message, "count": ev.count}
        if ev.site is not None:
            d.update(path=ev.site.path, line=ev.site.line, function=ev.site.function)
        if ev.detail:
            d["detail"] = ev.detail
        out.append(d)
    return out


def trace_summary(result: TraceResult, judge: OpJudge) -> dict:
    """Report.extra["trace"]: what was traced, op counts, events, and --dynamic shape guards."""
    graphs = {"status": result.graph_breaks}
    if result.graph_breaks == "ran":
        graphs.update(graphs=result.graph_count,
                      breaks=sum(e.count for e in result.events if e.kind == "graph-break"))
    out = {
        "target": result.target,
        "model": result.model,
        "parameters": result.parameters,
        "inputs": list(result.inputs),
        "mode": "forward+backward" if result.train else "forward",
        "dynamic": result.dynamic,
        "forward": result.forward_done,
        "backward": result.backward_done if result.train else None,
        "complete": result.forward_done and (result.backward_done or not result.train),
        "stopped": event_report([result.stopped])[0] if result.stopped else None,
        "graph_breaks": graphs,
        "ops": op_report(result, judge),
        "events": event_report(result.events),
    }
    if result.dynamic:
        out["shape_guards"] = sorted(result.shape_guards, key=lambda g: (g.get("path", ""), g.get("line", 0), g["guard"]))
    return out
