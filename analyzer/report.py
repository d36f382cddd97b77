"""From per-file results to the Report: merge findings and diagnostics, then tasks and estimate."""

from __future__ import annotations

import os

from . import __version__
from .catalog import Catalog
from .config import Settings
from .discover import Discovery
from .effort import estimate
from .model import Diagnostic, Finding, Report
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
    tasks, est = estimate(findings, catalog)
    return Report(
        tool_version=__version__,
        target=settings.target,
        root=display_root(settings),
        files_scanned=len(found.jobs),
        findings=findings,
        diagnostics=diagnostics,
        tasks=tasks,
        estimate=est,
        suppressed=sum(r.suppressed for r in results),
    )
