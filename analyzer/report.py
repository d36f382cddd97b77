"""From per-file results to the Report: merge findings and diagnostics, decide what lies on the
training path, then tasks, the estimate and (when a workload is configured) the break-even."""

from __future__ import annotations

from pathlib import Path

from . import __version__
from . import breakeven
from .catalog import Catalog
from .config import ConfigError, Settings, display_root, workload_error
from .discover import Discovery
from .effort import estimate
from .model import Diagnostic, Finding, Report
from .reach import FileInfo, Reach, analyse
from .sources import FileResult
from .timebound import ENV_REACH_TIMEOUT, TimeBoundExceeded, reach_timeout, time_bound


def build_report(settings: Settings, catalog: Catalog, found: Discovery, results: list[FileResult]) -> Report:
    findings: list[Finding] = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    diagnostics: list[Diagnostic] = sorted(
        found.diagnostics + [d for r in results for d in r.diagnostics], key=Diagnostic.sort_key
    )
    budget, timed_out = reach_timeout(), False
    try:
        with time_bound(budget):
            reach = analyse(Path(settings.root), [FileInfo(r.rel, r.kind, r.facts) for r in results],
                            settings.entries, explicit_files=settings.files is not None)
    except TimeBoundExceeded:
        # whatever made it slow, the scan ends: every file then counts as on the path (more work, not less)
        reach, timed_out = Reach(mode="library"), True
        diagnostics.append(Diagnostic(".", "too-complex", f"the training-path analysis took longer than {budget:g} s "
                                      f"(${ENV_REACH_TIMEOUT}); every file is counted as on the training path"))
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
    tasks, est = estimate(on_path, catalog, reach)
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
    report.extra["reach"] = reach.to_dict() | ({"timed_out": True} if timed_out else {})
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
