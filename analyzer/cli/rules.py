"""`neuron-ready rules [ID]`: the catalog as a table, or one rule's page (what, why, example, remedy, source)."""

from __future__ import annotations

import json
import textwrap

import click

from ..catalog import Catalog, Rule, load_catalog, not_a_selector, selector_problem, valid_selector
from ..fixes import CODEMODS
from ..model import CATEGORIES, TARGETS
from ..render.rulepage import rule_markdown
from .base import UserError, write_output


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
    out += ["", "Source" + (f" (as of {rule.source_date})" if rule.source_date else ""), f"  {rule.source}"] + [f"  {s}" for s in rule.see_also]
    kinds = sorted({m.kind for m in rule.match})
    out += ["", f"Matches: {', '.join(kinds)}    Defined in: {rule.origin}"]
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
        "source_date": rule.source_date,
        "see_also": list(rule.see_also),
        "matches": sorted({m.kind for m in rule.match}),
        "fallback": rule.fallback,
        "fix": rule.fix or None,
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


@click.command("rules")
@click.argument("rule_id", required=False)
@click.option("--category", type=click.Choice(CATEGORIES), help="Only rules of this category.")
@click.option("--target", type=click.Choice(TARGETS), help="Only rules that apply to this target.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@click.option("--catalog", "extra", multiple=True, type=click.Path(exists=True, dir_okay=False), help="An extra catalog file to include.")
def rules_cmd(rule_id, category, target, fmt, output, extra):
    """List the rule catalog, or explain one rule (like `neuron-ready rules NR1001`); a prefix
    (NR17) or a category lists the rules it selects."""
    catalog = load_catalog(extra)
    selectors = [category] if category else []
    if rule_id and catalog.get(rule_id) is None:
        problem = selector_problem(catalog, rule_id) if valid_selector(rule_id) else not_a_selector(rule_id)
        if problem:
            raise UserError(f"no rule {rule_id!r}: {problem}")
        selectors, rule_id = selectors + [rule_id], None  # a prefix or category: the rules it selects
    if rule_id:
        rule = catalog.get(rule_id)
        if fmt == "markdown":
            text = rule_markdown(rule)
        else:
            text = json.dumps(rule_dict(rule), indent=2) + "\n" if fmt == "json" else rule_page(rule)
        write_output(text, output)
        return
    sel = catalog.select(target=target)
    for s in selectors:  # every selector must hold: --category device NR10 is the device rules in NR10
        sel = sel.select(select=[s])
    if fmt == "json":
        text = json.dumps([rule_dict(r) for r in sel], indent=2) + "\n"
    elif fmt == "markdown":
        text = rules_markdown(sel)
    else:
        text = rules_table(sel)
    write_output(text, output)
