"""--fail-on: does a report cross the user's threshold? (effort class, rule ids/prefixes, categories, any)"""

from __future__ import annotations

from .catalog import selector_matches
from .model import EFFORT_CLASSES, Finding, Report


def fail_reasons(report: Report, fail_on: list[str], findings: list[Finding] | None = None) -> list[str]:
    """Why the threshold is met (empty: it is not). `findings` defaults to the report's own."""
    findings = report.findings if findings is None else findings
    reasons = []
    for item in fail_on:
        if item in EFFORT_CLASSES:
            if EFFORT_CLASSES.index(report.estimate.effort_class) >= EFFORT_CLASSES.index(item):
                reasons.append(f"effort class {report.estimate.effort_class} is at or above {item}")
        elif item == "any":
            if findings:
                reasons.append(f"{len(findings)} finding(s)")
        else:
            hits = [f for f in findings if selector_matches(item, f.rule, f.category)]
            if hits:
                reasons.append(f"{len(hits)} finding(s) of {item}")
    return reasons


def diff_fail_reasons(diff, fail_on: list[str]) -> list[str]:
    """--fail-on for a change (a baseline.ReportDiff): the findings it adds, and an effort class
    it moves the port into; a port already in that class before the change does not fail it."""
    rest = [x for x in fail_on if x not in EFFORT_CLASSES]
    reasons = fail_reasons(diff.head, rest, findings=diff.new)
    before = EFFORT_CLASSES.index(diff.base.estimate.effort_class)
    after = EFFORT_CLASSES.index(diff.head.estimate.effort_class)
    for item in (x for x in fail_on if x in EFFORT_CLASSES):
        if before < EFFORT_CLASSES.index(item) <= after:
            reasons.append(f"effort class rose from {EFFORT_CLASSES[before]} to {EFFORT_CLASSES[after]}, at or above {item}")
    return reasons
