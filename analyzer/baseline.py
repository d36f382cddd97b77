"""Finding identity across runs: fingerprints, baseline files, reports read back, and the diff of two.

A fingerprint is rule + path + the matched source (whitespace-normalised) + the occurrence index
among findings with that same triple. Line numbers are not part of it, so code that moves within a
file is not new, and two identical lines stay two findings. Everything here reads Reports only.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .model import EFFORT_CLASSES, SCHEMA_VERSION, Diagnostic, Estimate, Finding, Part, Range, Report, Task

BASELINE_KIND = "neuron-ready-baseline"
FINGERPRINT_VERSION = 1


class ReportFileError(ValueError):
    """A report or baseline file that cannot be used: one line naming the file."""


def normalise(text: str) -> str:
    return " ".join(text.split())


def identity(f: Finding) -> tuple[str, str, str]:
    """What makes two findings the same one: rule, path and what matched (never the line)."""
    what = f.snippet or f.symbol or f.message
    return (f.rule, f.path, normalise(what))


def fingerprints(findings: list[Finding]) -> list[str]:
    """One fingerprint per finding, in order. Identical triples are told apart by occurrence."""
    seen: dict[tuple[str, str, str], int] = {}
    out = []
    for f in findings:
        key = identity(f)
        n = seen.get(key, 0)
        seen[key] = n + 1
        h = hashlib.sha256("\x1f".join((*key, str(n))).encode("utf-8"))
        out.append(h.hexdigest()[:32])
    return out


# ---------------------------------------------------------------------------------------------
# Baseline files


def accepted(report: Report) -> list[Finding]:
    """Every finding a baseline accepts: off the training path too, because a scan of the files
    alone (the pre-commit hook) has no entry points and counts them. Reachability is per file, so
    the occurrence numbers of a file's findings are the same in either list."""
    return report.findings + report.off_path


def baseline_text(report: Report) -> str:
    """The baseline file: the accepted findings with their fingerprints, readable in review."""
    found = accepted(report)
    rows = [
        {"fingerprint": fp, "rule": f.rule, "path": f.path, "line": f.line, "snippet": normalise(f.snippet)}
        for fp, f in zip(fingerprints(found), found)
    ]
    doc = {
        "kind": BASELINE_KIND,
        "schema_version": SCHEMA_VERSION,
        "fingerprint_version": FINGERPRINT_VERSION,
        "tool": {"name": "neuron-ready", "version": report.tool_version},
        "target": report.target,
        "findings": rows,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _finite(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{text} is not a finite number")
    return x


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _read_json(path: Path | str) -> dict[str, Any]:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise ReportFileError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ReportFileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        doc = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ReportFileError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    except ValueError as e:
        raise ReportFileError(f"{path}: not valid JSON: {e}") from None
    except RecursionError:
        raise ReportFileError(f"{path}: not valid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise ReportFileError(f"{path}: expected a JSON object")
    return doc


def load_baseline(path: Path | str) -> set[str]:
    """Fingerprints from a baseline file, or from a full JSON report used as a baseline."""
    doc = _read_json(path)
    if doc.get("kind") == BASELINE_KIND:
        if doc.get("fingerprint_version") != FINGERPRINT_VERSION:
            raise ReportFileError(
                f"{path}: baseline fingerprint version {doc.get('fingerprint_version')!r} is not "
                f"{FINGERPRINT_VERSION}; write it again with --write-baseline"
            )
        rows = doc.get("findings")
        if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("fingerprint"), str) for r in rows):
            raise ReportFileError(f"{path}: 'findings' must be a list of objects with a 'fingerprint'")
        return {r["fingerprint"] for r in rows}
    return set(fingerprints(accepted(report_from_dict(doc, path))))


def split_by_baseline(findings: list[Finding], known: set[str]) -> tuple[list[int], list[int]]:
    """(indices of new findings, indices of findings already in the baseline)."""
    new, old = [], []
    for i, fp in enumerate(fingerprints(findings)):
        (old if fp in known else new).append(i)
    return new, old


def only_findings(report: Report, keep: list[int], note: dict[str, Any]) -> Report:
    """The report restricted to some findings, the estimate and its tasks left whole (a task's
    finding indices point at the kept findings only). `note` goes to extra["baseline"]: it tells
    the reader the list is partial and why.
    """
    where = {old: new for new, old in enumerate(keep)}
    tasks = [replace(t, findings=[where[i] for i in t.findings if i in where]) for t in report.tasks]
    extra = dict(report.extra)
    extra["baseline"] = note
    return replace(report, findings=[report.findings[i] for i in keep], tasks=tasks, extra=extra)


def apply_baseline(report: Report, known: set[str]) -> Report:
    """The report listing only findings not in the baseline; the estimate stays the whole scan's."""
    new, old = split_by_baseline(report.findings, known)
    return only_findings(report, new, {"new": len(new), "known": len(old)})


# ---------------------------------------------------------------------------------------------
# Reports read back from JSON (the contract of render/json.py)


_EFFORT_KEYS = {"class", "person_days", "p50", "p80", "drivers"}
_TOP_LEVEL = {"schema_version", "tool", "target", "root", "summary", "findings", "off_path", "tasks", "diagnostics",
              "opt_in", "evaluation"}


def report_from_dict(doc: dict[str, Any], source: Path | str = "report") -> Report:
    """A Report from `scan --format json` output. Unknown top-level keys are kept in `extra`."""
    try:
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ReportFileError(
                f"{source}: not a neuron-ready JSON report of schema version {SCHEMA_VERSION} "
                f"(schema_version is {doc.get('schema_version')!r})"
            )
        summary = doc["summary"]
        eff = summary["effort"]
        pd = eff.get("person_days") or {}
        more = {k: v for k, v in eff.items() if k not in _EFFORT_KEYS}
        estimate = Estimate(
            effort_class=eff["class"],
            person_days=Range(float(pd.get("low", 0)), float(pd.get("likely", 0)), float(pd.get("high", 0))),
            p50=float(eff.get("p50", pd.get("likely", 0))),
            p80=float(eff.get("p80", pd.get("high", 0))),
            score=None if summary["score"] is None else int(summary["score"]),
            drivers=list(eff.get("drivers", [])),
            # an effort model that adds keys keeps them in `details` (when its Estimate has one)
            **({"details": more} if more and "details" in {f.name for f in fields(Estimate)} else {}),
        )
        if estimate.effort_class not in EFFORT_CLASSES:
            raise ReportFileError(f"{source}: unknown effort class {estimate.effort_class!r}")
        tasks = [_task_from_dict(t) for t in doc.get("tasks", [])]
        evaluation = doc.get("evaluation")
        report = Report(
            tool_version=str(doc.get("tool", {}).get("version", "")),
            target=str(doc.get("target", "native")),
            root=str(doc.get("root", ".")),
            files_scanned=int(summary.get("files_scanned", 0)),
            files_analysed=None if summary.get("files_analysed") is None else int(summary["files_analysed"]),
            findings=_check_texts([Finding.from_dict(f) for f in doc["findings"]], source),
            diagnostics=[Diagnostic(d["path"], d["kind"], d.get("message", ""), d.get("line")) for d in doc.get("diagnostics", [])],
            tasks=tasks,
            estimate=estimate,
            off_path=_check_texts([Finding.from_dict(f) for f in doc.get("off_path", [])], source),
            suppressed=int(summary.get("suppressed", 0)),
            extra={k: v for k, v in doc.items() if k not in _TOP_LEVEL},
        )
        report.opt_in = [_part_from_dict(p) for p in doc.get("opt_in") or []]
        report.evaluation = _part_from_dict(evaluation) if isinstance(evaluation, dict) else None
        return report
    except ReportFileError:
        raise
    except KeyError as e:
        raise ReportFileError(f"{source}: not a neuron-ready JSON report (missing {e.args[0]!r})") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise ReportFileError(f"{source}: not a neuron-ready JSON report ({e})") from None


def _check_texts(findings: list[Finding], source: Path | str) -> list[Finding]:
    """What fingerprints and renderers read as text must be text (a baseline is a file anyone may write)."""
    for f in findings:
        for name in ("rule", "category", "path", "message", "remedy", "symbol", "snippet", "scope"):
            if not isinstance(getattr(f, name), str):
                raise ReportFileError(f"{source}: not a neuron-ready JSON report (finding {name} is not a string)")
    return findings


_TASK_KEYS = {"id", "title", "category", "kind", "person_days", "fallback", "rules", "findings", "remedy"}


def _part_from_dict(p: dict[str, Any]) -> Part:
    pd = p.get("person_days") or {}
    est = Estimate(effort_class=str(p.get("class", "days")),
                   person_days=Range(float(pd.get("low", 0)), float(pd.get("likely", 0)), float(pd.get("high", 0))),
                   p50=float(p.get("p50", 0)), p80=float(p.get("p80", 0)), score=0, drivers=list(p.get("drivers", [])))
    return Part(str(p["name"]), str(p.get("gate", "")), [int(i) for i in p.get("findings", [])],
                [_task_from_dict(t) for t in p.get("tasks", [])], est)


def _task_from_dict(t: dict[str, Any]) -> Task:
    pd = t.get("person_days") or {}
    return Task(
        id=t["id"], title=t.get("title", t["id"]), category=t.get("category", ""), kind=t.get("kind", ""),
        person_days=Range(float(pd.get("low", 0)), float(pd.get("likely", 0)), float(pd.get("high", 0))),
        findings=[int(i) for i in t.get("findings", [])], fallback=bool(t.get("fallback", False)),
        remedy=t.get("remedy", ""), rules=list(t.get("rules", [])),
        details={k: v for k, v in t.items() if k not in _TASK_KEYS},
    )


def load_report(path: Path | str) -> Report:
    return report_from_dict(_read_json(path), path)


# ---------------------------------------------------------------------------------------------
# The diff of two reports


@dataclass
class ReportDiff:
    base: Report
    head: Report
    new: list[Finding] = field(default_factory=list)  # in head, not in base
    fixed: list[Finding] = field(default_factory=list)  # in base, not in head
    new_fingerprints: list[str] = field(default_factory=list)
    fixed_fingerprints: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def score_delta(self) -> int | None:
        """None when either side analysed nothing (it has no score)."""
        b, h = self.base.estimate.score, self.head.estimate.score
        return None if b is None or h is None else h - b

    @property
    def class_change(self) -> int:
        """+1 per class the port moved up (days -> weeks is +1), negative when it moved down."""
        b, h = self.base.estimate.effort_class, self.head.estimate.effort_class
        return EFFORT_CLASSES.index(h) - EFFORT_CLASSES.index(b)

    def to_dict(self) -> dict[str, Any]:
        def side(r: Report) -> dict[str, Any]:
            e = r.estimate
            d = {"score": e.score, "class": e.effort_class, "p50": round(e.p50, 2), "p80": round(e.p80, 2),
                 "findings": len(r.findings)}
            if isinstance(r.extra.get("breakeven"), dict):
                d["breakeven"] = r.extra["breakeven"]
            return d

        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "neuron-ready-diff",
            "base": side(self.base),
            "head": side(self.head),
            "score_delta": self.score_delta,
            "class_change": self.class_change,
            "new": [dict(f.to_dict(), fingerprint=fp) for f, fp in zip(self.new, self.new_fingerprints)],
            "fixed": [dict(f.to_dict(), fingerprint=fp) for f, fp in zip(self.fixed, self.fixed_fingerprints)],
            "unchanged": self.unchanged,
        }


def diff_reports(base: Report, head: Report) -> ReportDiff:
    base_fps = fingerprints(base.findings)
    head_fps = fingerprints(head.findings)
    in_base, in_head = set(base_fps), set(head_fps)
    new = [(f, fp) for f, fp in zip(head.findings, head_fps) if fp not in in_base]
    fixed = [(f, fp) for f, fp in zip(base.findings, base_fps) if fp not in in_head]
    return ReportDiff(
        base, head,
        new=[f for f, _ in new], fixed=[f for f, _ in fixed],
        new_fingerprints=[fp for _, fp in new], fixed_fingerprints=[fp for _, fp in fixed],
        unchanged=len(head.findings) - len(new),
    )
