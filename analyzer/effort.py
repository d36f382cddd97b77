"""Findings -> port tasks -> person-days, effort class and readiness score.

A first, simple model: one task per rule; a per-task rule costs its effort once, a per-occurrence
rule grows sub-linearly with its call sites (n ** 0.6), a fallback costs a tenth. The effort-model
work replaces this with kernel-size-aware tasks, reachability and a Monte Carlo P50/P80.
"""

from __future__ import annotations

from .catalog import Catalog
from .model import EFFORT_CLASSES, Estimate, Finding, Range, Task

FALLBACK_SHARE = 0.1
CLASS_LIMITS = ((5.0, "days"), (20.0, "weeks"))  # P50 person-days below the limit -> class


def effort_class(p50: float) -> str:
    for limit, name in CLASS_LIMITS:
        if p50 < limit:
            return name
    return EFFORT_CLASSES[-1]


def readiness_score(p50: float) -> int:
    """100 = runs as-is; halves at 5 person-days; never rises when effort rises."""
    return int(round(100.0 / (1.0 + p50 / 5.0)))


def estimate(findings: list[Finding], catalog: Catalog) -> tuple[list[Task], Estimate]:
    by_rule: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_rule.setdefault(f.rule, []).append(i)
    tasks: list[Task] = []
    for rule_id in sorted(by_rule):
        idxs = by_rule[rule_id]
        rule = catalog.get(rule_id)
        if rule is None:
            continue
        full = [i for i in idxs if not findings[i].fallback]
        n_full, n_fb = len(full), len(idxs) - len(full)
        e = rule.effort
        scale = (n_full ** 0.6 if e.per == "occurrence" else (1.0 if n_full else 0.0))
        scale += FALLBACK_SHARE * (n_fb ** 0.6 if e.per == "occurrence" else (1.0 if n_fb else 0.0))
        tasks.append(
            Task(
                id=f"T-{rule_id}",
                title=rule.title,
                category=rule.category,
                kind="rule",
                person_days=Range(e.low * scale, e.likely * scale, e.high * scale),
                findings=idxs,
                fallback=n_full == 0,
                remedy=rule.remedy,
                rules=[rule_id],
            )
        )
    low = sum(t.person_days.low for t in tasks)
    likely = sum(t.person_days.likely for t in tasks)
    high = sum(t.person_days.high for t in tasks)
    p50 = likely
    p80 = likely + 0.5 * (high - likely)
    drivers = [t.id for t in sorted(tasks, key=lambda t: (-t.person_days.likely, t.id))[:3]]
    est = Estimate(effort_class(p50), Range(low, likely, high), p50, p80, readiness_score(p50), drivers)
    return tasks, est
