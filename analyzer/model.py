"""Plain data: findings, diagnostics, tasks, the estimate and the report (the JSON contract).

Nothing here imports other neuron_ready modules; every stage reads and writes these types.
The JSON names are a contract other tools read: add fields freely, never rename.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

CATEGORIES = (
    "device",
    "distributed",
    "precision",
    "compile",
    "host-sync",
    "dynamic-shape",
    "unsupported-op",
    "custom-cuda",
    "triton",
    "gpu-library",
    "dependency",
)
# Categories whose findings are GPU code (CUDA kernels, Triton kernels, GPU-only libraries).
GPU_CODE_CATEGORIES = frozenset({"custom-cuda", "triton", "gpu-library"})
TARGETS = ("native", "xla")
EFFORT_CLASSES = ("days", "weeks", "month-plus")
CONFIDENCES = ("high", "medium", "low")
# Where a finding runs (analyzer/context.py): only `step` is in the must-port estimate.
CONTEXTS = ("step", "host", "opt-in", "evaluation", "neuron-native", "off-path")

# Fields of a finding that are always present in JSON, in this order.
FINDING_FIELDS = ("rule", "category", "path", "line", "column", "message", "remedy", "fallback")


@dataclass
class Finding:
    rule: str
    category: str
    path: str  # relative to the scanned root, posix
    line: int  # 1-based
    column: int  # 1-based
    message: str
    remedy: str
    fallback: bool = False
    confidence: str = "high"
    symbol: str = ""  # what matched: a qualified name, method, package or kernel name
    snippet: str = ""  # the matched source, whitespace-normalised (baseline fingerprints)
    scope: str = ""  # enclosing function, e.g. "Attention.forward"; "" at module level
    cell: int | None = None  # notebook code cell (1-based) when path is a notebook
    details: dict[str, Any] = field(default_factory=dict)  # kernels, kernel_lines, size, ...
    # Filled by later stages; None means "not decided".
    on_path: bool | None = None  # reachable from a training entry point
    status: str | None = None  # trace mode: "confirmed", "not-traced", "traced"
    origin: str = "static"  # "static" or "trace"
    # Where it runs (context.py): step, host, opt-in, evaluation, neuron-native, off-path; and for an
    # opt-in finding the switch that turns it on ("only when args.fused_softmax (...)").
    context: str | None = None
    gate: str | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.rule, self.symbol, self.message)

    @property
    def kernel_facts(self) -> "KernelFacts":
        return KernelFacts.of(self.details)

    @property
    def site_name(self) -> str:
        """"RULE path:line": how a site names its primary (`part_of`)."""
        return f"{self.rule} {self.path}:{self.line}"

    @property
    def part_of(self) -> str:
        """The finding whose edit this one is a second line of ("RULE path:line"), or "" for an item:
        a site is listed under its primary, counted once (effort.py sites())."""
        return str(self.details.get("part_of") or "")

    @property
    def fix(self) -> str:
        """"safe" or "unsafe" when `neuron-ready fix` rewrites this finding, else "" (sources/__init__.py)."""
        return str(self.details.get("fix") or "")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "rule": self.rule,
            "category": self.category,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "remedy": self.remedy,
            "fallback": self.fallback,
            "confidence": self.confidence,
            "symbol": self.symbol,
            "snippet": self.snippet,
            "scope": self.scope,
            "origin": self.origin,
        }
        if self.cell is not None:
            d["cell"] = self.cell
        if self.on_path is not None:
            d["on_path"] = self.on_path
        if self.status is not None:
            d["status"] = self.status
        if self.context is not None:
            d["context"] = self.context
        if self.gate is not None:
            d["gate"] = self.gate
        # Rule-specific measurements (e.g. "kernels" for CUDA sources) sit beside the core fields.
        for k in sorted(self.details):
            if k not in d:
                d[k] = self.details[k]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Finding":
        known = {
            "rule", "category", "path", "line", "column", "message", "remedy", "fallback",
            "confidence", "symbol", "snippet", "scope", "cell", "on_path", "status", "origin", "context", "gate",
        }
        details = {k: v for k, v in d.items() if k not in known}
        return cls(
            rule=d["rule"], category=d["category"], path=d["path"], line=int(d["line"]),
            column=int(d.get("column", 1)), message=d.get("message", ""), remedy=d.get("remedy", ""),
            fallback=bool(d.get("fallback", False)), confidence=d.get("confidence", "high"),
            symbol=d.get("symbol", ""), snippet=d.get("snippet", ""), scope=d.get("scope", ""),
            cell=d.get("cell"), details=details, on_path=d.get("on_path"), status=d.get("status"),
            origin=d.get("origin", "static"), context=d.get("context"), gate=d.get("gate"),
        )


@dataclass(frozen=True)
class KernelFacts:
    """What the scanners measured about a kernel-bearing finding, typed for the effort model.

    The scanners write these under the same names into `Finding.details` (so they are also keys of
    the finding's JSON): python.py for Triton kernels, their autotune configs and launches, native.py
    for per-file CUDA/C++ sources, context.py for `pytorch_path`. Read them here, never as raw keys."""

    kernel: str = ""  # Triton: the kernel a @triton.jit, autotune or launch finding belongs to
    lines: int = 0  # Triton kernel: its lines
    atomics: int = 0  # Triton kernel: its tl.atomic_* calls
    autotune_configs: int = 0  # triton.autotune: its configs (0: not counted)
    backward: bool = False  # a backward kernel (Triton) or a file with one (CUDA)
    loc: int | None = None  # CUDA/C++ source: non-blank lines; None: not a per-file finding
    kernels: int = 0  # CUDA source: its __global__ kernels
    kernel_loc: int = 0  # CUDA source: the lines of those kernels
    kernel_names: tuple[str, ...] = ()
    pytorch_path: bool = False  # a setting picks this kernel; a PyTorch path sits beside it
    prebuilt: bool = False  # a compiled library with no source: kernel_names are its exported functions
    fingerprint: str = ""  # Triton kernel: a sketch of its body's shingles, to find near-copies (nearcopy.py)
    device_function: bool = False  # a @triton.jit that returns a value: inlined into the kernels that call it
    kernel_fingerprints: tuple[str, ...] = ()  # CUDA source: a sketch per kernel, in kernel_names' order
    thread_index: bool = False  # CUDA source with no kernel: its device code reads the thread or block index
    device_code: bool = False  # CUDA source with no kernel: device code of its own (native.device_code)

    @classmethod
    def of(cls, details: dict[str, Any]) -> "KernelFacts":
        loc = details.get("loc")
        return cls(
            kernel=str(details["kernel"]) if details.get("kernel") is not None else "",
            lines=int(details.get("lines") or 0),
            atomics=int(details.get("atomics") or 0),
            autotune_configs=int(details.get("autotune_configs") or 0),
            backward=bool(details.get("backward")),
            loc=None if loc is None else int(loc),
            kernels=int(details.get("kernels") or 0),
            kernel_loc=int(details.get("kernel_loc") or 0),
            kernel_names=tuple(str(n) for n in details.get("kernel_names") or ()),
            pytorch_path=bool(details.get("pytorch_path")),
            prebuilt=bool(details.get("prebuilt")),
            fingerprint=str(details.get("fingerprint") or ""),
            device_function=bool(details.get("device_function")),
            kernel_fingerprints=tuple(str(n) for n in details.get("kernel_fingerprints") or ()),
            thread_index=bool(details.get("thread_index")),
            device_code=bool(details.get("device_code")),
        )


def reported_path(path: str) -> str:
    """A path as a report can carry it. A file name whose bytes are not UTF-8 reaches Python with
    lone surrogates (PEP 383), which no JSON, SARIF or terminal output can encode: those bytes are
    shown as `\\xNN` escapes. Every other name is returned unchanged."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return path


@dataclass
class Diagnostic:
    """A file that could not be (fully) analysed, and why. Never fatal to the scan."""

    path: str
    kind: str  # syntax-error, decode-error, binary, too-large, notebook, unreadable, symlink, internal-error
    message: str
    line: int | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.kind, self.line or 0, self.message)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "kind": self.kind, "message": self.message}
        if self.line is not None:
            d["line"] = self.line
        return d


@dataclass
class Range:
    """Person-days as (low, likely, high)."""

    low: float
    likely: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"low": round(self.low, 2), "likely": round(self.likely, 2), "high": round(self.high, 2)}


@dataclass
class Task:
    """One unit of porting work an engineer would plan, with the findings behind it."""

    id: str
    title: str
    category: str
    kind: str  # rewrite-kernel, swap-library, mechanical, dynamic-shape, unsupported-op, ...
    person_days: Range
    findings: list[int] = field(default_factory=list)  # indices into Report.findings
    fallback: bool = False
    remedy: str = ""
    rules: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            "kind": self.kind,
            "person_days": self.person_days.to_dict(),
            "fallback": self.fallback,
            "rules": list(self.rules),
            "findings": list(self.findings),
            "remedy": self.remedy,
        }
        for k in sorted(self.details):
            d.setdefault(k, self.details[k])
        return d


@dataclass
class Estimate:
    effort_class: str
    person_days: Range
    p50: float
    p80: float
    score: int | None  # None: nothing was analysed, so there is nothing to score
    drivers: list[str] = field(default_factory=list)  # task ids, most expensive first
    details: dict[str, Any] = field(default_factory=dict)  # e.g. tasks, likely_by_category

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "class": self.effort_class,
            "person_days": self.person_days.to_dict(),
            "p50": round(self.p50, 2),
            "p80": round(self.p80, 2),
            "drivers": list(self.drivers),
        }
        for k in sorted(self.details):
            d.setdefault(k, self.details[k])
        return d


@dataclass
class Part:
    """A part of the estimate outside the must-port headline: one opt-in feature, or the evaluation path."""

    name: str  # the feature (an option, variable, table key or accelerator) or "evaluation"
    gate: str  # what turns it on, in words
    findings: list[int]  # indices into Report.off_path
    tasks: list[Task]
    estimate: Estimate

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gate": self.gate,
            "findings": list(self.findings),
            "class": self.estimate.effort_class,
            "p50": round(self.estimate.p50, 2),
            "p80": round(self.estimate.p80, 2),
            "person_days": self.estimate.person_days.to_dict(),
            "drivers": list(self.estimate.drivers),
            "tasks": [t.to_dict() for t in self.tasks],
        }


@dataclass
class Report:
    tool_version: str
    target: str
    root: str
    files_scanned: int
    findings: list[Finding]
    diagnostics: list[Diagnostic]
    tasks: list[Task]
    estimate: Estimate
    off_path: list[Finding] = field(default_factory=list)  # findings outside the must-port part, by context
    suppressed: int = 0
    opt_in: list[Part] = field(default_factory=list)  # one per feature, costed apart
    evaluation: Part | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. "breakeven", "entries", "trace"
    # Source files (Python, notebooks, native, or a trace) actually read and matched; None when
    # unknown (a report from an older version). 0 means the report is no all-clear.
    files_analysed: int | None = None
    # Warnings about the inputs (a suppression naming no rule): printed on stderr, not part of the
    # JSON, but kept with a cached report so a re-scan repeats them.
    warnings: list[str] = field(default_factory=list)

    @property
    def analysed(self) -> bool:
        return self.files_analysed is None or self.files_analysed > 0

    def sites(self) -> int:
        """Must-port findings that are a further line of an edit another one counts (`part_of`)."""
        return sum(1 for f in self.findings if f.part_of)

    def fixable(self) -> tuple[int, int]:
        """(safe, unsafe): findings on the training path `neuron-ready fix` can rewrite."""
        kinds = [f.fix for f in self.findings]
        return kinds.count("safe"), kinds.count("unsafe")

    def fixable_line(self, command: str = "`neuron-ready fix`") -> str:
        """One sentence for the renderers, or "" when nothing is fixable."""
        safe, unsafe = self.fixable()
        if not safe and not unsafe:
            return ""
        more = f" ({unsafe} more with --unsafe-fixes)" if unsafe else ""
        return f"{safe} of these findings can be fixed automatically with {command}{more}."

    def to_dict(self) -> dict[str, Any]:
        sites = self.sites()
        by_category: dict[str, int] = {}
        for f in self.findings:
            by_category[f.category] = by_category.get(f.category, 0) + 1
        summary: dict[str, Any] = {
            "files_scanned": self.files_scanned,
            **({} if self.files_analysed is None else {"files_analysed": self.files_analysed}),
            "findings": len(self.findings),
            # items: the must-port findings to act on; sites: the others, each a line of an item's edit
            "items": len(self.findings) - sites,
            "sites": sites,
            "score": self.estimate.score,
            "effort": self.estimate.to_dict(),
            "by_category": {c: by_category[c] for c in CATEGORIES if c in by_category},
            "fallback_findings": sum(1 for f in self.findings if f.fallback),
            "fixable": self.fixable()[0],
            "fixable_unsafe": self.fixable()[1],
            "off_path_findings": len(self.off_path),
            "contexts": self.context_counts(),
            "suppressed": self.suppressed,
            "diagnostics": len(self.diagnostics),
        }
        d: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "neuron-ready", "version": self.tool_version},
            "target": self.target,
            "root": self.root,
            "summary": summary,
            "findings": [f.to_dict() for f in self.findings],
            "off_path": [f.to_dict() for f in self.off_path],
            "tasks": [t.to_dict() for t in self.tasks],
            "diagnostics": [x.to_dict() for x in self.diagnostics],
            "opt_in": [p.to_dict() for p in self.opt_in],
            "evaluation": self.evaluation.to_dict() if self.evaluation is not None else None,
        }
        if self.opt_in:
            summary["opt_in"] = {"features": len(self.opt_in),
                                 # the sum of the features' p50 as reported, so a report reads back unchanged
                                 "p50": round(sum(round(p.estimate.p50, 2) for p in self.opt_in), 2)}
        if self.evaluation is not None:
            summary["evaluation"] = {"p50": round(self.evaluation.estimate.p50, 2),
                                     "p80": round(self.evaluation.estimate.p80, 2)}
        for k in sorted(self.extra):
            d[k] = self.extra[k]
        return d

    def context_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.findings + self.off_path:
            c = f.context or ("step" if f.on_path is not False else "off-path")
            counts[c] = counts.get(c, 0) + 1
        return {c: counts[c] for c in CONTEXTS if c in counts}
