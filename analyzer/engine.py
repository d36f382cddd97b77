"""The scan pipeline: settings -> discover -> scan every file -> report.

`scan_files` turns jobs into FileResults (the unit that is parallelised and cached);
report.build_report turns results into findings, tasks, the estimate and the Report.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from .catalog import Catalog, check_selectors, load_catalog, not_a_selector, selector_problem, valid_selector
from .config import Settings
from .discover import Discovery, discover, explicit_files
from .model import CATEGORIES, EFFORT_CLASSES, Report
from .cache import Keys, ResultCache, content_digest, decode_result, default_dir
from .progress import Progress
from .report_cache import ReportCache, ReportKey
from .sources import FileJob, FileResult, ScanContext, read_bytes, read_limit
from .stat_index import Stamp, StatIndex, stamp_of

ENV_ISOLATE = "NEURON_READY_ISOLATE"  # 1: --jobs 1 scans in one supervised worker, not in-process
# Imported where used: workers (multiprocessing) only when a file is scanned, report (networkx,
# numpy) only when no cached report fits, so an unchanged tree and a hook load neither.


class ScanOutcome:
    """The report, how it was made, and the active catalog (loaded when asked for, when the report
    came from the cache: rendering SARIF needs it, printing a hook's findings does not)."""

    def __init__(self, report: Report, results: list[FileResult], catalog: Catalog | None,
                 stats: ScanStats | None = None, settings: Settings | None = None) -> None:
        self.report, self.results, self.stats = report, results, stats
        self._catalog, self._settings = catalog, settings

    @property
    def catalog(self) -> Catalog | None:
        if self._catalog is None and self._settings is not None:
            self._catalog = active_catalog(self._settings)
        return self._catalog


def active_catalog(settings: Settings) -> Catalog:
    """The rules this scan applies, after every selector was checked against the whole catalog."""
    full = load_catalog(settings.extra_catalogs)
    check_settings_selectors(settings, full)
    return full.select(settings.target, settings.select, settings.ignore)


def check_settings_selectors(settings: Settings, full: Catalog | None = None) -> None:
    """Every selector checked against the whole catalog (extra catalogs included): one that selects
    nothing is a typo, never a silent no-op. Loads the catalog only when there is one to check."""
    rules_in_fail_on = [s for s in settings.fail_on if s not in EFFORT_CLASSES and s != "any"]
    if not (settings.select or settings.ignore or rules_in_fail_on or settings.per_path_ignores):
        return
    full = full if full is not None else load_catalog(settings.extra_catalogs)
    check_selectors(full, "select", settings.select)
    check_selectors(full, "ignore", settings.ignore)
    check_selectors(full, "fail-on", rules_in_fail_on)
    for pattern, selectors in sorted(settings.per_path_ignores.items()):
        check_selectors(full, f"per-path-ignores {pattern!r}", selectors)


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
        # The folders above may be namespace packages (PEP 420: `megatron/core/__init__.py` with no
        # `megatron/__init__.py` is imported as `megatron.core`): their names are the project's too.
        roots.update(d.split("/"))
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


@dataclass
class ScanStats:
    """How a scan got its results (not part of the report: it differs between cold and warm runs)."""

    files: int = 0
    cached: int = 0  # results read from the cache
    scanned: int = 0  # files read and analysed in this run
    hashed: int = 0  # files read and hashed for their content key (the others: by their stat)
    workers: int = 0  # worker processes used (0: in this process)
    cache_dir: str | None = None
    report_cached: bool = False  # the whole report came from the cache
    uncached: int = 0  # results that could not be cached (a crash or a timeout): no report entry
    warnings: list[str] = field(default_factory=list)


def worker_count(settings: Settings) -> int:
    """0 = scan in this process (--jobs 1, unless NEURON_READY_ISOLATE=1 or the 1 came from the
    scanned tree's configuration); else supervised workers."""
    if settings.jobs == 1 and not settings.jobs_from_config and os.environ.get(ENV_ISOLATE) != "1":
        return 0
    if settings.jobs >= 1:
        return settings.jobs
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def preload() -> None:
    """Load, while the first workers parse, what the main process needs once the files are scanned
    (networkx for the import graph, numpy for the Monte Carlo): imported before forking, they
    would delay the first file; after the scan, they would add to the wall time."""
    import networkx  # noqa: F401
    import numpy  # noqa: F401


def scan_files(jobs: list[FileJob], ctx: ScanContext, settings: Settings,
               progress: Progress | None = None, stats: ScanStats | None = None,
               stamps: list[Stamp | None] | None = None) -> list[FileResult]:
    """One FileResult per job, in job order: from the cache when nothing the result depends on has
    changed, otherwise scanned. A file whose stat matches the stat index is neither read nor
    hashed; `stamps` are the jobs' stats when the caller took them already. Every result passes
    through the cache's encoding, so a report is the same byte for byte whether it came from the
    cache, this process or a worker."""
    from .workers import FileTask, gc_tuned, run_supervised, scan_in_process

    progress = progress if progress is not None else Progress()
    stats = stats if stats is not None else ScanStats()
    cache = ResultCache(default_dir(settings)) if settings.cache else None
    keys = Keys(ctx) if cache is not None else None
    index = StatIndex(cache.files, str(settings.root)) if cache is not None else None
    workers = worker_count(settings)
    results: list[FileResult | None] = [None] * len(jobs)
    todo: list[FileTask] = []

    def done(task: FileTask, key: str | None, payload: bytes) -> None:
        result = results[task.index] = decode_result(payload)
        if cache is not None and key is not None:
            cache.put(key, payload)
        elif key is None:
            stats.uncached += 1
        progress.advance(len(result.findings))

    progress.start(len(jobs))
    with gc_tuned():
        for i, job in enumerate(jobs):
            data = key = None
            if cache is not None:
                stamp = stamps[i] if stamps is not None else stamp_of(job.path)
                digest = index.digest(job.rel, stamp)
                if digest is None:
                    try:
                        data = read_bytes(job.path, read_limit(job, ctx))
                    except OSError:
                        pass  # the scan reports why it cannot read it
                    else:
                        digest = content_digest(data)
                        index.record(job.rel, stamp, digest)
                        stats.hashed += 1
                key = keys.key_of(job, digest) if digest is not None else None
                hit = cache.get(key, job.rel) if key is not None else None
                if hit is not None:
                    results[i] = hit
                    progress.advance(len(hit.findings))
                    continue
            # the worker (or this process, after the loop) reads the file again and keys the result by what it read
            size = stamp.size if cache is not None and stamp is not None else _size(job.path)
            todo.append(FileTask(i, job, size))
        stats.workers = min(workers, len(todo))
        if todo and workers:
            run_supervised(todo, ctx, keys, stats.workers, done, progress.tick, warm=preload)
        elif todo:
            scan_in_process(todo, ctx, keys, done)
    if index is not None:
        index.save()
    stats.files, stats.scanned = len(jobs), stats.scanned + len(todo)
    stats.cached = len(jobs) - stats.scanned
    if cache is not None:
        stats.cache_dir = str(cache.dir)
        if cache.error:
            stats.warnings.append(cache.error)
    missing = [jobs[i].rel for i, r in enumerate(results) if r is None]
    if missing:
        raise RuntimeError(f"no result for {missing[0]}")
    return results  # type: ignore[return-value]


def suppression_warnings(settings: Settings, results: list[FileResult]) -> list[str]:
    """`# neuron-ready: ignore[NR1099]` that names no rule: a warning, since it suppresses nothing."""
    named = [(r.rel, line, s) for r in results for line, s in r.facts.get("suppression_selectors", [])]
    if not named:
        return []
    full = load_catalog(settings.extra_catalogs)
    out = []
    for rel, line, s in named:
        s = s.lower() if s.lower() in CATEGORIES else s  # suppressions are read in upper case
        problem = selector_problem(full, s) if valid_selector(s) else not_a_selector(s)
        if problem:
            out.append(f"{rel}:{line}: suppression {problem}")
    return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # the scan reports why it cannot read it


def run_scan(settings: Settings, catalog: Catalog | None = None,
             extend: Callable[[list[FileResult]], list[FileResult]] | None = None,
             progress: Progress | None = None) -> ScanOutcome:
    """`extend` may add to the per-file results before the report is built (trace mode folds
    traced findings in there)."""
    found = find_files(settings)
    stats = ScanStats()
    check_settings_selectors(settings)  # before the cache: a cached report was made without --fail-on
    stamps = reports = key = None
    if settings.cache and extend is None and catalog is None:  # a given catalog is not in the key
        stamps = [stamp_of(j.path) for j in found.jobs]
        reports = ReportCache(ResultCache(default_dir(settings)).files)
        key = ReportKey(settings, found, stamps)
        report = reports.get(key)
        if report is not None:
            stats.files = stats.cached = len(found.jobs)
            stats.report_cached = True
            stats.cache_dir = str(reports.files.dir)
            stats.warnings.extend(report.warnings)
            return ScanOutcome(report, [], catalog, stats, settings)
    catalog = catalog if catalog is not None else active_catalog(settings)
    ctx = make_context(settings, catalog, found)
    results = scan_files(found.jobs, ctx, settings, progress, stats, stamps)
    if extend is not None:
        results = extend(results)
    from .report import build_report

    report = build_report(settings, catalog, found, results)
    report.warnings = suppression_warnings(settings, results)
    stats.warnings.extend(report.warnings)
    # a training-path analysis that ran out of time may not next time: not a result to keep
    if reports is not None and key is not None and not stats.uncached and not report.extra["reach"].get("timed_out"):
        reports.put(key, report, time.time_ns())
    return ScanOutcome(report, results, catalog, stats)
