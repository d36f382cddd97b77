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
