"""The scan pipeline: settings -> discover -> scan every file -> report.

`scan_files` turns jobs into FileResults (the unit that is parallelised and cached);
report.build_report turns results into findings, tasks, the estimate and the Report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from .catalog import Catalog, load_catalog
from .config import Settings
from .discover import Discovery, discover, explicit_files
from .model import Report
from .report import build_report
from .sources import FileJob, FileResult, ScanContext, scan_file


@dataclass
class ScanOutcome:
    report: Report
    results: list[FileResult] = field(default_factory=list)
    catalog: Catalog | None = None


def active_catalog(settings: Settings) -> Catalog:
    return load_catalog(settings.extra_catalogs).select(settings.target, settings.select, settings.ignore)


def find_files(settings: Settings) -> Discovery:
    if settings.files is None:
        return discover(settings.root, settings.exclude, settings.respect_gitignore)
    files = [p for p in settings.files if not p.is_dir()]
    found = explicit_files(settings.root, files, settings.exclude)
    root = os.path.abspath(settings.root)
    for d in (p for p in settings.files if p.is_dir()):
        sub = discover(d, settings.exclude, settings.respect_gitignore)
        prefix = os.path.relpath(os.path.abspath(d), root).replace(os.sep, "/")
        for job in sub.jobs:
            rel = job.rel if prefix == "." else f"{prefix}/{job.rel}"
            found.jobs.append(FileJob(job.path, rel, job.kind))
        found.diagnostics.extend(sub.diagnostics)
    unique = {j.rel: j for j in found.jobs}
    found.jobs = [unique[k] for k in sorted(unique)]
    return found


def first_party_packages(jobs: list[FileJob]) -> frozenset[str]:
    """Top-level packages and modules of the scanned project itself (src/ layouts included).

    A GPU library's own source tree imports itself everywhere; those imports are its code, not a
    dependency on the library, and its kernels are what the scan reports.
    """
    package_dirs = {j.rel.rsplit("/", 1)[0] for j in jobs if j.rel.endswith("/__init__.py")}
    roots = set()
    for d in package_dirs:
        while "/" in d and d.rsplit("/", 1)[0] in package_dirs:
            d = d.rsplit("/", 1)[0]
        roots.add(d.rsplit("/", 1)[-1])
    for j in jobs:
        if j.kind == "python" and "/" not in j.rel and j.rel.endswith(".py") and j.rel != "setup.py":
            roots.add(j.rel[:-3])
    return frozenset(roots)


def make_context(settings: Settings, catalog: Catalog, found: Discovery) -> ScanContext:
    return ScanContext(
        catalog=catalog,
        target=settings.target,
        max_file_size=settings.max_file_size,
        per_path_ignores=tuple((p, tuple(s)) for p, s in sorted(settings.per_path_ignores.items())),
        first_party=first_party_packages(found.jobs),
    )


def scan_files(jobs: list[FileJob], ctx: ScanContext, settings: Settings) -> list[FileResult]:
    """One FileResult per job, in job order."""
    return [scan_file(job, ctx) for job in jobs]


def run_scan(settings: Settings, catalog: Catalog | None = None,
             extend: Callable[[list[FileResult]], list[FileResult]] | None = None) -> ScanOutcome:
    """`extend` may add to the per-file results before the report is built (trace mode folds
    traced findings in there)."""
    catalog = catalog if catalog is not None else active_catalog(settings)
    found = find_files(settings)
    ctx = make_context(settings, catalog, found)
    results = scan_files(found.jobs, ctx, settings)
    if extend is not None:
        results = extend(results)
    report = build_report(settings, catalog, found, results)
    return ScanOutcome(report, results, catalog)
