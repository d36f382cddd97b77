"""`neuron-ready rules [ID]`: the catalog as a table, or one rule's page (what, why, example, remedy, source);
`rules --test FILE.toml` runs a catalog's examples through the scanner."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..catalog import load_catalog, not_a_selector, selector_problem, valid_selector
from ..model import CATEGORIES, TARGETS
from ..render.rulepage import rule_markdown
from ..render.rules import example_failures, rule_dict, rule_page, rules_markdown, rules_table
from .base import EXIT_FAIL, UserError, write_output


@click.command("rules")
@click.argument("rule_id", required=False)
@click.option("--category", type=click.Choice(CATEGORIES), help="Only rules of this category.")
@click.option("--target", type=click.Choice(TARGETS), help="Only rules that apply to this target.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@click.option("--catalog", "extra", multiple=True, type=click.Path(exists=True, dir_okay=False), help="An extra catalog file to include.")
@click.option("--test", "test_file", metavar="FILE.toml", type=click.Path(exists=True, dir_okay=False),
              help="Run the valid and invalid examples of the rules in FILE.toml through the scanner; exit 1 if one fails.")
def rules_cmd(rule_id, category, target, fmt, output, extra, test_file):
    """List the rule catalog, or explain one rule (like `neuron-ready rules NR1001`); a prefix
    (NR17) or a category lists the rules it selects."""
    if test_file:
        if rule_id or category or target or extra or fmt != "text":
            raise UserError("--test FILE.toml takes no rule id, --category, --target, --catalog or --format")
        from ..ruletest import check_rules, load_file  # the scanner loads only for --test

        rules = load_file(Path(test_file))
        ran, failures = check_rules(rules)
        write_output(example_failures(failures, ran, len(rules), test_file), output)
        if failures:
            click.get_current_context().exit(EXIT_FAIL)
        return
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

