"""The rule catalog as a terminal table, JSON or a Markdown table, one rule's terminal page, and the
report of `rules --test` (one rule's Markdown page is rulepage.py)."""

from __future__ import annotations

import textwrap

from ..catalog import Catalog, Rule
from ..fixes import CODEMODS
from ..numbers import plural


def rule_page(rule: Rule) -> str:
    e = rule.effort
    out = [
        f"{rule.id}: {rule.title}",
        "",
        f"Category: {rule.category}    Targets: {', '.join(rule.targets)}    Confidence: {rule.confidence}    Evidence: {rule.evidence}",
        f"Effort: {e.low:g} / {e.likely:g} / {e.high:g} person-days (low / likely / high) per {e.per}"
        + ("; a fallback path costs far less" if rule.fallback else ""),
        "",
        "What it finds",
        *textwrap.wrap(rule.title + ".", 96, initial_indent="  ", subsequent_indent="  "),
        "",
        "Why it matters on Trainium",
        *textwrap.wrap(rule.why, 96, initial_indent="  ", subsequent_indent="  "),
    ]
    if rule.invalid:
        out += ["", "Example (flagged)"] + [textwrap.indent(x.rstrip("\n"), "    ") for x in rule.invalid[:2]]
    if rule.valid:
        out += ["", "Not flagged"] + [textwrap.indent(x.rstrip("\n"), "    ") for x in rule.valid[:2]]
    out += ["", "Remedy", *textwrap.wrap(rule.remedy, 96, initial_indent="  ", subsequent_indent="  ")]
    if rule.fix:
        how = "" if rule.fix == "safe" else " with --unsafe-fixes"
        out += ["", f"Fix ({rule.fix}): `neuron-ready fix`{how} rewrites it: {CODEMODS[rule.codemod]}"]
    if rule.remedy_xla:
        out += ["", "Remedy on the XLA path (torch-neuronx <= 2.9)", *textwrap.wrap(rule.remedy_xla, 96, initial_indent="  ", subsequent_indent="  ")]
    out += ["", "Source", f"  {rule.source}"] + [f"  {s}" for s in rule.see_also]
    kinds = sorted({m.kind for m in rule.match})
    costing = f"    Costing: {rule.costing}" if rule.costing != "catalog" else ""
    out += ["", f"Matches: {', '.join(kinds)}{costing}    Defined in: {rule.origin}"]
    return "\n".join(out) + "\n"


def rule_dict(rule: Rule) -> dict:
    return {
        "id": rule.id,
        "title": rule.title,
        "category": rule.category,
        "targets": list(rule.targets),
        "confidence": rule.confidence,
        "evidence": rule.evidence,
        "effort": {"low": rule.effort.low, "likely": rule.effort.likely, "high": rule.effort.high, "per": rule.effort.per},
        "remedy": rule.remedy,
        "remedy_xla": rule.remedy_xla,
        "why": rule.why,
        "source": rule.source,
        "see_also": list(rule.see_also),
        "matches": sorted({m.kind for m in rule.match}),
        "fallback": rule.fallback,
        "fix": rule.fix or None,
        "costing": rule.costing,
    }


def rules_table(catalog: Catalog) -> str:
    rows = [("ID", "CATEGORY", "TARGETS", "EFFORT", "FIX", "TITLE")]
    for r in catalog:
        eff = f"{r.effort.likely:g}d/{'occ' if r.effort.per == 'occurrence' else 'task'}"
        rows.append((r.id, r.category, ",".join(r.targets), eff, r.fix or "-", r.title))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(row[i].ljust(widths[i]) for i in range(5)) + "  " + row[5] for row in rows]
    lines.append(f"\n{len(catalog)} rules. `neuron-ready rules NR1001` explains one.")
    return "\n".join(lines) + "\n"


def rules_markdown(catalog: Catalog) -> str:
    out = ["| ID | Category | Targets | Effort (likely, per) | Fix | Title |", "|---|---|---|---|---|---|"]
    for r in catalog:
        title = r.title.replace("|", "\\|")
        out.append(f"| {r.id} | {r.category} | {', '.join(r.targets)} | {r.effort.likely:g} d / {r.effort.per} | {r.fix or ''} | {title} |")
    return "\n".join(out) + "\n"


def example_failures(failures, ran: int, rules: int, origin: str) -> str:
    """`rules --test`: each failing example under its rule id, then one summary line."""
    out = []
    for f in failures:
        out += [f"FAIL {f.rule} {f.kind} example {f.index + 1}: {f.problem}",
                textwrap.indent(f.example.rstrip("\n"), "    "), ""]
    what = f"{plural(ran, 'example')} of {plural(rules, 'rule')} in {origin}"
    out.append(f"{what}: {len(failures)} failed" if failures else f"{what}: all pass")
    return "\n".join(out) + "\n"
