"""--fail-on: does a report cross the user's threshold? (effort class, rule ids/prefixes, categories, any)"""

from __future__ import annotations

from .catalog import selector_matches
from .model import EFFORT_CLASSES, Finding, Report
from .numbers import plural


def class_index(report: Report) -> int:
    """The effort class as an index, -1 when there is no port work at all: `--fail-on days` means
    "any port work", and an estimate of zero tasks is in no class."""
    return EFFORT_CLASSES.index(report.estimate.effort_class) if report.tasks else -1


def fail_reasons(report: Report, fail_on: list[str], findings: list[Finding] | None = None) -> list[str]:
    """Why the threshold is met (empty: it is not). `findings` defaults to the report's own."""
    findings = report.findings if findings is None else findings
    reasons = []
    for item in fail_on:
        if item in EFFORT_CLASSES:
            if class_index(report) >= EFFORT_CLASSES.index(item):
                reasons.append(f"effort class {report.estimate.effort_class} is at or above {item}")
        elif item == "any":
            if findings:
                reasons.append(plural(len(findings), "finding"))
        else:
            hits = [f for f in findings if selector_matches(item, f.rule, f.category)]
            if hits:
                reasons.append(f"{plural(len(hits), 'finding')} of {item}")
    return reasons


def diff_fail_reasons(diff, fail_on: list[str]) -> list[str]:
    """--fail-on for a change (a baseline.ReportDiff): the findings it adds, and an effort class
    it moves the port into; a port already in that class before the change does not fail it."""
    rest = [x for x in fail_on if x not in EFFORT_CLASSES]
    reasons = fail_reasons(diff.head, rest, findings=diff.new)
    before, after = class_index(diff.base), class_index(diff.head)
    for item in (x for x in fail_on if x in EFFORT_CLASSES):
        if before < EFFORT_CLASSES.index(item) <= after:
            was = EFFORT_CLASSES[before] if before >= 0 else "no port work"
            reasons.append(f"effort class rose from {was} to {EFFORT_CLASSES[after]}, at or above {item}")
    return reasons
