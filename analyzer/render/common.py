"""Wording every renderer shares: the hosted docs and rule links, what P50/P80 and the score mean,
the no-analysis statement and the per-rule statistics. Numbers themselves read through ..numbers."""

from __future__ import annotations

from ..model import CONFIDENCES, Finding, Report
from ..numbers import plural

# The hosted docs (the wheel carries no docs/ folder); pyproject's [project.urls] names the same.
DOCS_URL = "https://github.com/neuron-ready/neuron-ready/blob/main/docs"
EFFORT_DOCS = f"{DOCS_URL}/effort-model.md"


def rule_url(rule_id: str) -> str:
    """The rule's section of the catalog page (GitHub anchors headings in lower case)."""
    return f"{DOCS_URL}/rules.md#{rule_id.lower()}"


MEANING = "P50/P80: person-days the port takes with a 50%/80% chance; readiness 100/100 means nothing to port"


def explanation() -> str:
    return f"{MEANING}. How they are computed: {EFFORT_DOCS}"


def score_text(report: Report) -> str:
    score = report.estimate.score
    return "n/a" if score is None else f"{score}/100"


def no_analysis(report: Report) -> str | None:
    """The statement a report that read no code carries instead of an all-clear, or None."""
    if report.analysed:
        return None
    why = f"{plural(report.files_scanned, 'file')} found, none readable as code" if report.files_scanned else "no file found"
    return (f"Nothing analysed: no Python, notebook or native source was scanned ({why}), "
            "so there is no readiness score and no estimate.")


def statistics(findings: list[Finding]) -> list[tuple[str, str, int, str]]:
    """(rule, category, count, confidence) per rule, most frequent first, as `ruff --statistics`."""
    counts: dict[str, list] = {}
    for f in findings:
        row = counts.setdefault(f.rule, [f.rule, f.category, 0, f.confidence])
        row[2] += 1
    return sorted((tuple(r) for r in counts.values()), key=lambda r: (-r[2], r[0]))  # type: ignore[misc]


def items(findings: list[Finding]) -> list[tuple[Finding, list[Finding]]]:
    """Each finding to act on with its sites: a finding whose `part_of` names another of the list is
    shown under it, not as an item of its own (one whose primary is not in the list stays an item)."""
    named: dict[str, Finding] = {}
    for f in findings:
        if not f.part_of:
            named.setdefault(f.site_name, f)
    sites: dict[int, list[Finding]] = {}
    out: list[tuple[Finding, list[Finding]]] = []
    for f in findings:
        primary = named.get(f.part_of) if f.part_of else None
        if primary is not None:
            sites.setdefault(id(primary), []).append(f)
        else:
            out.append((f, sites.setdefault(id(f), [])))
    return out


SITES_SHOWN = 8  # a library imported in 70 files lists the first few; the JSON and SARIF keep them all


def also_at(sites: list[Finding], loc=lambda f: f"{f.path}:{f.line}") -> str:
    """"also at a.py:3 (NR1802), a.py:9 (NR1803)": the sites of an item, for the listings; past
    SITES_SHOWN, "and N more"."""
    if not sites:
        return ""
    shown = ", ".join(f"{loc(f)} ({f.rule})" for f in sites[:SITES_SHOWN])
    more = len(sites) - SITES_SHOWN
    return f"also at {shown}" + (f" and {more} more" if more > 0 else "")


def visible(findings: list[Finding], min_confidence: str | None) -> list[Finding]:
    """Findings at or above the confidence asked for (None: all of them)."""
    if min_confidence is None:
        return findings
    keep = CONFIDENCES[: CONFIDENCES.index(min_confidence) + 1]
    return [f for f in findings if f.confidence in keep]


OPT_IN_SHOWN = 10  # a library offers dozens of alternatives: the costliest are listed, then a count
