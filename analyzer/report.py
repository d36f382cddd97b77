"""From per-file results to the Report: merge findings and diagnostics, decide what lies on the
training path, then tasks, the estimate and (when a workload is configured) the break-even."""

from __future__ import annotations

import os
from pathlib import Path

from . import __version__
from . import breakeven
from .catalog import Catalog
from .config import ConfigError, Settings, workload_error
from .discover import Discovery
from .effort import estimate
from .model import Diagnostic, Finding, Report
from .reach import FileInfo, analyse
from .sources import FileResult


def display_root(settings: Settings) -> str:
    """The root as the user named it, relative to the working directory when inside it."""
    root = os.path.abspath(settings.root)
    rel = os.path.relpath(root)
    return (rel if not rel.startswith("..") else root).replace(os.sep, "/")


def build_report(settings: Settings, catalog: Catalog, found: Discovery, results: list[FileResult]) -> Report:
    findings: list[Finding] = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    diagnostics: list[Diagnostic] = sorted(
        found.diagnostics + [d for r in results for d in r.diagnostics], key=Diagnostic.sort_key
    )
    reach = analyse(Path(settings.root), [FileInfo(r.rel, r.kind, r.facts) for r in results],
                    settings.entries, explicit_files=settings.files is not None)
    on_path: list[Finding] = []
    off_path: list[Finding] = []
    for f in findings:
        why = reach.reason(f.path, f.line)
        f.on_path = not why
        if why:
            f.details["off_path_reason"] = why
            off_path.append(f)
        else:
            on_path.append(f)
    tasks, est = estimate(on_path, catalog, reach, assume_fixed=settings.assume_fixed)
    report = Report(
        tool_version=__version__,
        target=settings.target,
        root=display_root(settings),
        files_scanned=len(found.jobs),
        findings=on_path,
        diagnostics=diagnostics,
        tasks=tasks,
        estimate=est,
        off_path=off_path,
        suppressed=sum(r.suppressed for r in results),
    )
    report.extra["reach"] = reach.to_dict()
    if breakeven.configured(settings.workload):
        # the effort as the JSON reports it, so `breakeven --report` on this report gives the same numbers
        try:
            workload = breakeven.workload_from(settings.workload)
        except ConfigError as e:
            raise workload_error(settings, e) from None
        result = breakeven.compute(workload, round(est.p50, 2), round(est.p80, 2))
        result["summary"] = breakeven.summary_line(result)
        report.extra["breakeven"] = result
    return report
