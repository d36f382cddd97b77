"""From per-file results to the Report: merge findings and diagnostics, decide what lies on the
training path, then tasks, the estimate and (when a workload is configured) the break-even."""

from __future__ import annotations

from pathlib import Path

from . import __version__
from . import breakeven
from .catalog import Catalog
from .config import ConfigError, Settings, display_root, workload_error
from .discover import Discovery
from . import compile_scope, context as context_mod
from .effort import estimate, reference_stems
from .model import Diagnostic, Finding, Part, Report
from .copies import mark_copies
from .cpu_twins import cpu_twins, wrapper_twins
from .repeats import mark_repeats
from .reach import FileInfo, Reach, analyse
from .sources import FileResult
from .timebound import ENV_REACH_TIMEOUT, TimeBoundExceeded, reach_timeout, time_bound


CODE_KINDS = ("python", "notebook", "native", "cmake", "binary", "trace")


def analysed_file(result: FileResult) -> bool:
    """Code that was read and matched: not a dependency list, not a file skipped with a
    diagnostic (too large, binary, unparsable); a notebook with one broken cell still counts."""
    return result.kind in CODE_KINDS and (bool(result.findings) or not result.diagnostics)


_CONTEXT_REASON = {
    "host": "runs on the host (data loading)",
    "evaluation": "evaluation, inference or export code",
    "neuron-native": "already targets Neuron or XLA",
}


def _parts(off_path: list[Finding], catalog: Catalog, reach, references, target: str,
           compiled: bool, twins: frozenset[str] = frozenset()) -> tuple[list[Part], Part | None]:
    """The opt-in features and the evaluation path, each costed on its own."""
    features: dict[str, list[int]] = {}
    gates: dict[str, str] = {}
    evaluation: list[int] = []
    for i, f in enumerate(off_path):
        if f.context == "opt-in":
            name = str(f.details.get("feature") or "condition")
            features.setdefault(name, []).append(i)
            gates.setdefault(name, f.gate or "")
        elif f.context == "evaluation":
            evaluation.append(i)

    def part(name: str, gate: str, idx: list[int]) -> Part:
        # Code for another accelerator, or run only on a CUDA device, is not a Trainium port: listed, never costed.
        chosen = [off_path[i] for i in idx if not context_mod.never_costed(off_path[i])]
        tasks, est = estimate(chosen, catalog, reach, keep=name != "evaluation", references=references,
                              target=target, compiled=compiled, cpu_twins=twins)
        for t in tasks:  # task findings index the part's own list; report them as off_path indices
            t.findings = [idx[j] for j in t.findings]
        return Part(name, gate, idx, tasks, est)

    opt_in = [part(n, gates[n], idx) for n, idx in sorted(features.items())]
    opt_in.sort(key=lambda p: (-p.estimate.p50, p.name))
    return opt_in, (part("evaluation", "evaluation, inference or export code", evaluation) if evaluation else None)


def one_per_line(findings: list[Finding]) -> list[Finding]:
    """One construct, one finding: a rule that matches twice on one line of one file
    (`torch.cuda.is_available() and torch.cuda.is_bf16_supported()`) is one finding, the first in
    report order; the other matches are named in its `same_line` detail. (`neuron-ready fix`
    rewrites through the hits, so it still sees each.)"""
    kept: dict[tuple, Finding] = {}
    out: list[Finding] = []
    for f in findings:
        key = (f.rule, f.path, f.cell, f.line, f.origin)
        first = kept.get(key)
        if first is None:
            kept[key] = f
            out.append(f)
        elif f.symbol != first.symbol and f.symbol not in first.details.get("same_line", ()):
            first.details.setdefault("same_line", []).append(f.symbol)
    return out


def build_report(settings: Settings, catalog: Catalog, found: Discovery, results: list[FileResult]) -> Report:
    findings: list[Finding] = one_per_line(sorted((f for r in results for f in r.findings), key=Finding.sort_key))
    diagnostics: list[Diagnostic] = sorted(
        found.diagnostics + [d for r in results for d in r.diagnostics], key=Diagnostic.sort_key
    )
    infos = [FileInfo(r.rel, r.kind, r.facts) for r in results]
    budget, timed_out = reach_timeout(), False
    try:
        with time_bound(budget):
            reach = analyse(Path(settings.root), infos, settings.entries, explicit_files=settings.files is not None)
            for f in findings:
                why = reach.reason(f.path, f.line)
                f.on_path = not why
                if why:
                    f.details["off_path_reason"] = why
            ctx = context_mod.analyse(infos, reach, findings, {r.id for r in catalog if r.housekeeping}, settings.target)
            unplaced_compiles = compile_scope.mark(findings, infos, ctx, settings.target)
    except TimeBoundExceeded:
        # whatever made it slow, the scan ends: every file then counts as on the path (more work, not less)
        reach, timed_out, ctx = Reach(mode="library"), True, context_mod.Context()
        unplaced_compiles = []
        for f in findings:
            f.on_path, f.context, f.gate = True, "step", None
            for key in ("off_path_reason", "context_reason", "feature", "reached_via"):
                f.details.pop(key, None)
        diagnostics.append(Diagnostic(".", "too-complex", f"the training-path analysis took longer than {budget:g} s "
                                      f"(${ENV_REACH_TIMEOUT}); every file is counted as on the training path"))
    mark_copies(findings, {r.rel: r.facts["digest"] for r in results if r.facts.get("digest")})
    if not timed_out:  # past the time bound every finding counts, as on the path
        mark_repeats(findings)
    include = set(settings.include_opt_in)
    on_path: list[Finding] = []
    off_path: list[Finding] = []
    included: set[str] = set()
    for f in findings:
        feature = f.details.get("feature")
        # `all` is every feature the user may keep: another accelerator's code, or code that runs
        # only on a CUDA device or in a CUDA build, is no Trainium port
        every = "all" in include and not context_mod.never_costed(f)
        if f.context == "step" or (f.context == "opt-in" and (every or feature in include)):
            if f.context == "opt-in":
                included.add(str(feature))
            on_path.append(f)
        else:
            f.on_path = False
            if "off_path_reason" not in f.details:
                f.details["off_path_reason"] = f.details.get("context_reason") or f.gate or _CONTEXT_REASON.get(f.context, "")
            off_path.append(f)
    references = reference_stems(name.rsplit(".", 1)[-1] for i in infos
                                 for name in ((i.facts.get("code") or {}).get("defs") or {}))
    # Eager is PyTorch's default. A finding in code torch.compile visibly compiles says so and is costed
    # as compiled (compile_scope.py); a compile call the scan cannot place makes the whole step count
    # as compiled (a library's own compile helpers say nothing about how its users train).
    compiled = bool(unplaced_compiles)
    # ops built for the CPU too, or computed by the project's Python off CUDA: a host switch (cpu_twins.py)
    twins = cpu_twins(r.rel for r in results) | wrapper_twins(results, reach)
    tasks, est = estimate(on_path, catalog, reach, references=references, target=settings.target, compiled=compiled,
                          assume_fixed=settings.assume_fixed, cpu_twins=twins)
    analysed = sum(1 for r in results if analysed_file(r))
    if not analysed:
        est.score = None  # no all-clear for a scan that read no code
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
        files_analysed=analysed,
    )
    report.opt_in, report.evaluation = _parts(off_path, catalog, reach, references, settings.target, compiled, twins)
    if include:
        report.extra["included_opt_in"] = sorted(included)
    if settings.target_from and settings.target_from != "--target":
        report.extra["target_from"] = settings.target_from  # the config file, or the project's torch-neuronx pin
    report.extra["reach"] = reach.to_dict() | ({"timed_out": True} if timed_out else {})
    if ctx.function_level:
        report.extra["reach"]["function_level"] = True
        report.extra["reach"]["compiled"] = ctx.compiled
    if breakeven.configured(settings.workload):
        # the effort as the JSON reports it, so `breakeven --report` on this report gives the same numbers
        try:
            workload = breakeven.workload_from(settings.workload)
        except ConfigError as e:
            raise workload_error(settings, e) from None
        result = breakeven.compute(workload, round(est.p50, 2), round(est.p80, 2))
        result["summary"] = breakeven.summary_line(result)
        result["sensitivity"] = breakeven.sensitivity(workload, round(est.p50, 2))
        report.extra["breakeven"] = result
    return report
