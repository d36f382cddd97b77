"""SARIF 2.1.0 for GitHub code scanning and other SARIF readers.

Conventions GitHub relies on: `ruleId` is the stable catalog id; artifact URIs are relative to the
directory neuron-ready ran in (the repository root in CI) under `uriBaseId` %SRCROOT%; results carry
`partialFingerprints` (the baseline fingerprint, which ignores line numbers) so an alert follows
code that moves. A site of an edit another finding counts (`part_of`) is not a result of its own but a
`relatedLocation` of that finding's result. Levels: a finding on a fallback path is a note; a rule whose likely effort is a
person-day or more (kernels, libraries, rewrites) is an error; the mechanical swaps are warnings.
"""

from __future__ import annotations

import functools
import json
import posixpath
from typing import Any
from urllib.parse import quote

from ..baseline import fingerprints
from ..catalog import Catalog, Rule, load_catalog
from ..model import Finding, Report
from .common import items
from .rulepage import rule_markdown

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
ERROR_FROM_PERSON_DAYS = 1.0


def rule_level(rule: Rule | None) -> str:
    if rule is not None and rule.effort.likely >= ERROR_FROM_PERSON_DAYS:
        return "error"
    return "warning"


def artifact_uri(report: Report, path: str) -> str:
    """The finding's path relative to the working directory, when the scanned root lies inside it."""
    root = report.root
    if root and root not in (".", "") and not posixpath.isabs(root) and not root.startswith(".."):
        path = posixpath.normpath(posixpath.join(root, path))
    return quote(path, safe="/")


@functools.lru_cache(maxsize=1)
def _builtin_rules() -> dict[str, Rule]:
    return dict(load_catalog().rules)


def _ours(rule: Rule) -> bool:
    """A rule of the catalog we ship. An extra catalog comes from the scanned tree's configuration,
    which a pull request can change: its text is never handed to a Markdown renderer."""
    return _builtin_rules().get(rule.id) == rule


def _descriptor(rule_id: str, rule: Rule | None, example: Finding) -> dict[str, Any]:
    if rule is None:  # a rule from a catalog this render was not given: describe it from its finding
        return {
            "id": rule_id,
            "shortDescription": {"text": f"{rule_id} ({example.category})"},
            "fullDescription": {"text": example.message},
            "help": {"text": example.remedy},  # plain text: its catalog is not ours
            "defaultConfiguration": {"level": "warning"},
            "properties": {"tags": [example.category, "trainium"]},
        }
    e = rule.effort
    return {
        "id": rule.id,
        "name": rule.id,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.why},
        "help": {"text": f"{rule.why}\n\nRemedy: {rule.remedy}\n\nSource: {rule.source}",
                 **({"markdown": rule_markdown(rule)} if _ours(rule) else {})},
        "helpUri": rule.source,  # an http(s) link: the catalog loader accepts nothing else
        "defaultConfiguration": {"level": rule_level(rule)},
        "properties": {
            "tags": [rule.category, "trainium"],
            "precision": {"high": "high", "medium": "medium", "low": "low"}.get(rule.confidence, "medium"),
            "category": rule.category,
            "targets": list(rule.targets),
            "effort": {"low": e.low, "likely": e.likely, "high": e.high, "per": e.per},
        },
    }


def _location(report: Report, f: Finding) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(report, f.path), "uriBaseId": SRCROOT}}
    if f.cell is None:  # a notebook's line counts within its cell, which no SARIF region can say
        region: dict[str, Any] = {"startLine": f.line, "startColumn": f.column}
        if f.snippet:
            region["snippet"] = {"text": f.snippet}
        location["region"] = region
    return location


def _result(report: Report, f: Finding, index: int, rule: Rule | None, fp: str, task: Any,
            sites: list[Finding] = ()) -> dict[str, Any]:
    text = f.message if f.cell is None else f"{f.message} (notebook cell {f.cell}, line {f.line})"
    if f.remedy:
        text += f"\nFix: {f.remedy}"
    location = _location(report, f)
    props: dict[str, Any] = {
        "category": f.category,
        "confidence": f.confidence,
        "fallback": f.fallback,
        "effortClass": report.estimate.effort_class,
    }
    if task is not None:
        props["task"] = task.id
        props["taskPersonDays"] = task.person_days.to_dict()
    if f.scope:
        props["scope"] = f.scope
    if f.context:
        props["context"] = f.context
    if f.gate:
        props["gate"] = f.gate
    result = {
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": "note" if f.fallback else rule_level(rule),
        "message": {"text": text},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {"primaryLocationLineHash": fp, "neuronReady/v1": fp},
        "properties": props,
    }
    if sites:  # further lines of this edit (`part_of`): shown with it, not as results of their own
        result["relatedLocations"] = [
            {"id": n, "physicalLocation": _location(report, x),
             "message": {"text": f"{x.rule}: {x.message} (a site of this edit)"}}
            for n, x in enumerate(sites, 1)]
    return result


def render(report: Report, catalog: Catalog | None = None) -> str:
    catalog = catalog if catalog is not None else load_catalog()
    rows = items(report.findings)  # a site is a relatedLocation of its primary's result
    used = sorted({f.rule for f, _ in rows})
    first = {}
    for f, _ in rows:
        first.setdefault(f.rule, f)
    index = {rule_id: i for i, rule_id in enumerate(used)}
    task_of = {i: t for t in report.tasks for i in t.findings}
    at = {id(f): (i, fp) for i, (f, fp) in enumerate(zip(report.findings, fingerprints(report.findings)))}
    results = [
        _result(report, f, index[f.rule], catalog.get(f.rule), at[id(f)][1], task_of.get(at[id(f)][0]), sites)
        for f, sites in rows
    ]
    notifications = [
        {
            "level": "warning",
            "message": {"text": f"{d.kind}: {d.message}"},
            "descriptor": {"id": d.kind},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": artifact_uri(report, d.path), "uriBaseId": SRCROOT},
                **({"region": {"startLine": d.line}} if d.line else {}),
            }}],
        }
        for d in report.diagnostics
    ]
    est = report.estimate
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "neuron-ready",
            "version": report.tool_version,
            "semanticVersion": report.tool_version,
            "rules": [_descriptor(r, catalog.get(r), first[r]) for r in used],
        }},
        "originalUriBaseIds": {SRCROOT: {"description": {"text": "The directory neuron-ready ran in (the repository root in CI)."}}},
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        "results": results,
        "properties": {
            "target": report.target,
            "score": est.score,
            "effortClass": est.effort_class,
            "p50PersonDays": round(est.p50, 2),
            "p80PersonDays": round(est.p80, 2),
            "filesScanned": report.files_scanned,
            "contexts": report.context_counts(),
            "optIn": [{"feature": p.name, "gate": p.gate, "p50PersonDays": round(p.estimate.p50, 2),
                       "p80PersonDays": round(p.estimate.p80, 2), "findings": len(p.findings)} for p in report.opt_in],
            **({"evaluationP50PersonDays": round(report.evaluation.estimate.p50, 2)} if report.evaluation else {}),
        },
    }
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
