"""Findings -> port tasks -> person-days (P50/P80), effort class, readiness score and drivers.

Findings are grouped into the tasks an engineer would plan (docs/effort-model.md has the
rationale for every rule of this module and every constant below):
- one per CUDA/C++ extension (its build, kernels, host files, inline PTX), costed by kernel count,
  kernel lines and whether it has a backward;
- one per Triton kernel, costed by its size, autotune configs, atomics and backward;
- one per GPU-only library: a swap where the catalog's numbers say a Neuron equivalent exists, a
  rewrite where not, a gate (switch it off) where it is an optional integration; and one per
  vendored third-party project a build compiles;
- one per function with dynamic-shape sites, one per distinct unsupported op, each family on one
  learning curve (the tenth function or op costs far less than the first);
- one mechanical task per family of device / distributed / precision / compile / host-sync /
  dependency changes, whose cost grows with the logarithm of its call sites.
Each rule's base (low, likely, high) comes from the catalog; a task whose findings all have a
fallback costs at most FALLBACK (making sure the PyTorch path is the one taken).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from .catalog import Catalog, Rule
from .model import EFFORT_CLASSES, Estimate, Finding, Range, Task
from .simulate import quantiles

if TYPE_CHECKING:  # pragma: no cover
    from .reach import Reach

# ------------------------------------------------------------------------------------------ model
CLASS_LIMITS = ((5.0, "days"), (20.0, "weeks"))  # P50 person-days below the limit -> class
SCORE_HALF = 5.0  # person-days at which readiness is 50/100
CONFIDENCE_WEIGHT = {"high": 1.0, "medium": 0.6, "low": 0.3}  # how likely a hit is real
FALLBACK = Range(0.1, 0.25, 1.0)  # check that the guard selects the PyTorch path, and test it
RATE_SITES = 1.0  # the same change at n call sites: every doubling adds one more first site
RATE_FUNCTION = 0.5  # dynamic-shape sites in one function share one fix
RATE_FILES = 0.25  # one piece of work (a library swap, an op substitute) reaching more files
CUDA_REF_KERNEL_LOC = 40.0  # a CUDA kernel of this many lines is one kernel unit
TRITON_REF_LINES = 30.0  # a Triton kernel of this many lines is one kernel unit
SIZE_LIMITS = (0.5, 3.0)  # a kernel counts as at least half and at most three units
ATOMICS_FACTOR = 1.25  # atomics need restructuring (no general atomics in NKI)
BACKWARD_FACTOR = 1.25  # a backward kernel: gradient checks against autograd
BACKWARD_ADDON = Range(0.5, 2.0, 5.0)  # an extension with backward kernels: register_autograd + grad tests
VENDORED_SWAP = Range(1.0, 3.0, 8.0)  # replace a vendored library (the catalog's library-swap numbers)
SWAP_LIMIT = 5.0  # gpu-library rules with likely <= this are swaps, above it rewrites (catalog convention)
SETUP_SHARE = 0.25  # a dynamic shape or unsupported op in code that runs once can run on the CPU
# Functions that run once, at construction, initialisation, loading or conversion (not in the step).
SETUP_SCOPE = re.compile(
    r"^(__init__|__post_init__|__setstate__|post_init|reset_parameters|_?init\w*|\w+_init|_?setup\w*|_?build\w*"
    r"|_?load\w*|_?save\w*|_?convert\w*|from_pretrained|_?prepare\w*|_?merge\w*|_?unmerge\w*|update_layer"
    r"|_?create\w*|configure\w*|_?register\w*|_?validate\w*|_?check\w*)$"
)
SHARED_CATEGORIES = ("dynamic-shape", "unsupported-op")  # families of fixes on one learning curve

MECHANICAL = ("device", "distributed", "precision", "compile", "host-sync", "dependency")
FAMILY_TITLES = {
    "device": "Device plumbing", "distributed": "Distributed backend", "precision": "Precision settings",
    "compile": "torch.compile settings", "host-sync": "Host synchronisation in the step",
    "dependency": "Dependency declarations", "triton": "Triton plumbing",
}
# Rules the model reads measurements from (any other rule is costed from its catalog numbers alone).
CUDA_FILE_RULES = ("NR1703", "NR1704")  # per-file CUDA/C++ findings with kernel counts and lines
CUDA_KERNEL_RULE = "NR1703"  # the catalog numbers of one CUDA kernel unit
CUDA_HOST_RULE = "NR1704"  # host C++ files of an extension
TRITON_KERNEL_RULE = "NR1801"
TRITON_AUTOTUNE_RULE = "NR1802"
TRITON_LAUNCH_RULE = "NR1803"
# Rules whose every finding is a kernel of its own (inline CUDA, CuPy/Numba/PyCUDA, jiterator, other DSLs).
KERNEL_RULES = frozenset({"NR1702", "NR1707", "NR1708", "NR1710", "NR1713", "NR1806"})


def effort_class(p50: float) -> str:
    for limit, name in CLASS_LIMITS:
        if p50 < limit:
            return name
    return EFFORT_CLASSES[-1]


def readiness_score(p50: float) -> int:
    """100 = runs as-is; 50 at SCORE_HALF person-days; never rises when effort rises."""
    return int(round(100.0 / (1.0 + max(p50, 0.0) / SCORE_HALF)))


def growth(n: float, rate: float) -> float:
    """Cost multiplier of n repeats of one piece of work (n may be fractional: confidence-weighted).

    Up to one (a single site, weighted by confidence): n. Above: log2(1 + a n) / log2(1 + a) with
    a = 2^(1/rate) - 1, so once repeats are many every doubling adds `rate` times the first. Continuous,
    rising and concave (each repeat costs less than the one before; the slope just above one,
    a / ((1 + a) ln(1 + a)), is below one), which the family learning curve below relies on."""
    if n <= 1.0:
        return max(n, 0.0)
    a = 2.0 ** (1.0 / rate) - 1.0
    return math.log2(1.0 + a * n) / math.log2(1.0 + a)


def kernel_size(lines: float, ref: float) -> float:
    lo, hi = SIZE_LIMITS
    return min(hi, max(lo, math.sqrt(max(lines, 0.0) / ref)))


def _scale(r: Range, k: float) -> Range:
    return Range(r.low * k, r.likely * k, r.high * k)


def _add(*rs: Range) -> Range:
    return Range(sum(r.low for r in rs), sum(r.likely for r in rs), sum(r.high for r in rs))


def _cap(r: Range, cap: Range) -> Range:
    return Range(min(r.low, cap.low), min(r.likely, cap.likely), min(r.high, cap.high))


def _base(rule: Rule) -> Range:
    return Range(rule.effort.low, rule.effort.likely, rule.effort.high)


def weight(f: Finding) -> float:
    """How much one finding counts: its confidence, and less when it sits in run-once setup code."""
    w = CONFIDENCE_WEIGHT.get(f.confidence, 1.0)
    if f.category in SHARED_CATEGORIES and f.scope and SETUP_SCOPE.match(f.scope.rsplit(".", 1)[-1]):
        w *= SETUP_SHARE
    return w


# ------------------------------------------------------------------------------------------ tasks


@dataclass
class _Draft:
    id: str
    title: str
    category: str
    kind: str
    idx: list[int] = field(default_factory=list)
    cost: Range = field(default_factory=lambda: Range(0.0, 0.0, 0.0))
    details: dict = field(default_factory=dict)
    key: str | None = None  # Monte Carlo variable; None: part of a shared (per-rule) variable


class _Planner:
    def __init__(self, findings: list[Finding], catalog: Catalog, reach: "Reach | None", assume_fixed: bool = False) -> None:
        self.findings = findings
        self.assume_fixed = assume_fixed
        self.catalog = catalog
        self.reach = reach
        self.drafts: dict[str, _Draft] = {}
        self.shared: list[tuple[str, Range]] = []  # per-rule variables (dynamic shapes)

    def rule(self, f: Finding) -> Rule | None:
        return self.catalog.get(f.rule)

    def draft(self, tid: str, title: str, category: str, kind: str, **details) -> _Draft:
        d = self.drafts.get(tid)
        if d is None:
            d = self.drafts[tid] = _Draft(tid, title, category, kind, details=dict(details))
        return d

    def rule_cost(self, rule: Rule, fs: list[Finding], rate: float = RATE_SITES) -> Range:
        """A rule's catalog numbers grown with its sites (per occurrence) or files (per task).
        With --assume-fixed, what `neuron-ready fix` rewrites safely costs nothing: it is done."""
        if self.assume_fixed:
            fs = [f for f in fs if f.details.get("fix") != "safe"]
        return _scale(_base(rule), size(rule, fs, rate)) if fs else Range(0.0, 0.0, 0.0)

    def by_rule(self, idx: list[int]) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {}
        for i in idx:
            out.setdefault(self.findings[i].rule, []).append(self.findings[i])
        return out

    # -------------------------------------------------------------- grouping

    def group(self) -> None:
        triton_kernels: dict[tuple[str, str], str] = {}
        later: list[int] = []
        for i, f in enumerate(self.findings):
            rule = self.rule(f)
            if rule is None:
                continue
            ext = self.extension_of(f)
            if ext is not None:
                kind, ident = ext
                if kind == "vendored":
                    self.draft(f"T-vendored-{ident}", f"Replace vendored `{ident}` (compiled by the build)",
                               "custom-cuda", "replace-vendored", project=ident).idx.append(i)
                else:
                    self.draft(f"T-ext-{ident}", f"Port CUDA extension `{ident}`", "custom-cuda",
                               "port-extension", extension=ident).idx.append(i)
            elif f.rule == TRITON_KERNEL_RULE and f.details.get("kernel"):
                name = str(f.details["kernel"])
                tid = f"T-triton-{f.path}:{name}"
                triton_kernels[(f.path, name)] = tid
                self.draft(tid, f"Rewrite Triton kernel `{name}` ({f.path})", "triton", "rewrite-kernel",
                           kernel=name, path=f.path).idx.append(i)
            elif f.category == "triton" and f.rule not in KERNEL_RULES:
                later.append(i)
            elif f.category == "gpu-library":
                self.draft(f"T-lib-{rule.id}", rule.title, "gpu-library", "swap-library").idx.append(i)
            elif f.category == "dynamic-shape":
                scope = f.scope or "<module>"
                self.draft(f"T-dyn-{f.path}:{scope}", f"Fixed shapes in `{scope}` ({f.path})", "dynamic-shape",
                           "dynamic-shape", function=scope, path=f.path).idx.append(i)
            elif f.category == "unsupported-op":
                op = op_name(f)
                self.draft(f"T-op-{rule.id}-{op}", f"Replace unsupported `{op}`: {rule.title}", "unsupported-op",
                           "unsupported-op", op=op).idx.append(i)
            elif f.category in MECHANICAL and (rule.effort.per == "occurrence" or f.category == "dependency"):
                self.draft(f"T-{f.category}", FAMILY_TITLES[f.category], f.category, "mechanical").idx.append(i)
            elif f.rule in KERNEL_RULES:
                self.draft(f"T-kernel-{rule.id}-{f.path}:{f.line}", f"Port: {rule.title} ({f.path}:{f.line})",
                           f.category, "rewrite-kernel").idx.append(i)
            else:
                self.draft(f"T-rule-{rule.id}", rule.title, f.category, "rework").idx.append(i)
        for d in self.drafts.values():
            if d.category == "gpu-library":
                self.library_kind(d)
        for i in later:  # Triton autotune, launches and imports join their kernel's task
            f = self.findings[i]
            rule = self.rule(f)
            tid = None
            if f.rule in (TRITON_AUTOTUNE_RULE, TRITON_LAUNCH_RULE):
                name = str(f.details.get("kernel") or f.symbol)
                tid = triton_kernels.get((f.path, name)) or _unique(v for (p, n), v in triton_kernels.items() if n == name)
            elif rule.effort.per == "task":  # `import triton`: part of the file's first kernel
                tid = min((v for (p, _), v in triton_kernels.items() if p == f.path), default=None)
            if tid is None:
                tid = "T-triton"
                self.draft(tid, FAMILY_TITLES["triton"], "triton", "mechanical")
            self.drafts[tid].idx.append(i)

    def library_kind(self, d: _Draft) -> None:
        """Swap (a Neuron equivalent exists: the catalog's swap numbers), rewrite, or gate. A library a
        project uses only inside functions or behind a guard, or any library a library project uses,
        is an optional integration: on Trainium it is switched off, not ported."""
        rule = self.catalog.get(self.findings[d.idx[0]].rule)
        hard = any(not self.findings[i].scope and not self.findings[i].fallback for i in d.idx)
        if all(self.findings[i].fallback for i in d.idx):
            d.kind = "gate-library"  # titled "Check the fallback: ..."
            return
        if (self.reach is not None and self.reach.mode == "library") or not hard:
            d.kind, verb = "gate-library", "Gate the optional integration"
        elif rule.effort.likely <= SWAP_LIMIT:
            d.kind, verb = "swap-library", "Swap"
        else:
            d.kind, verb = "rewrite-library", "Rewrite"
        d.title = f"{verb}: {rule.title}"

    def extension_of(self, f: Finding) -> tuple[str, str] | None:
        """("ext", id) or ("vendored", project) for a finding in a compiled extension's files or at its build."""
        ext_id = None
        if self.reach is not None:
            ext_id = self.reach.extension_of.get(f.path) or self.reach.build_sites.get((f.path, f.line))
        if ext_id is None:
            if f.rule in CUDA_FILE_RULES and f.details.get("loc") is not None:
                # CUDA sources with no build information (files given one by one): one extension per folder
                d = str(PurePosixPath(f.path).parent)
                return "ext", d if d != "." else "<root>"
            return None
        if f.path in self.reach.vendored:
            return "vendored", self.reach.vendored[f.path]
        return "ext", ext_id

    # -------------------------------------------------------------- costing

    def cost(self) -> None:
        dynamic: dict[str, list[_Draft]] = {}
        for d in self.drafts.values():
            d.idx.sort()
            if d.category in SHARED_CATEGORIES:
                dynamic.setdefault(d.category, []).append(d)
                continue
            d.key = d.id
            if d.kind == "port-extension":
                d.cost = self.extension_cost(d)
            elif d.kind == "replace-vendored":
                d.cost = VENDORED_SWAP
            elif d.id.startswith("T-triton-"):
                d.cost = self.triton_cost(d)
            else:
                parts = [self.rule_cost(self.catalog.get(r), fs) for r, fs in sorted(self.by_rule(d.idx).items())]
                d.cost = _add(*parts)
                d.details.setdefault("sites", len(d.idx))
                d.details.setdefault("files", len({self.findings[i].path for i in d.idx}))
            if d.kind == "gate-library" or all(self.findings[i].fallback for i in d.idx):
                d.cost = _cap(d.cost, FALLBACK)
        for ds in dynamic.values():
            self.shared_cost(ds)

    def extension_cost(self, d: _Draft) -> Range:
        parts: list[Range] = []
        kernels = units = 0.0
        kernel_loc = 0
        files = set()
        host: list[Finding] = []
        backward = False
        rest: list[int] = []
        build_rules: list[Rule] = []
        for i in d.idx:
            f = self.findings[i]
            rule = self.rule(f)
            files.add(f.path)
            if f.rule in CUDA_FILE_RULES and f.details.get("loc") is not None:
                k = int(f.details.get("kernels") or 0)
                if k:
                    loc = float(f.details.get("kernel_loc") or 0)
                    kernels += k
                    kernel_loc += int(loc)
                    units += weight(f) * k * kernel_size(loc / k, CUDA_REF_KERNEL_LOC)
                    backward = backward or bool(f.details.get("backward"))
                else:
                    host.append(f)
            elif self.reach is not None and (f.path, f.line) in self.reach.build_sites:
                build_rules.append(rule)
                files.discard(f.path)
            else:
                rest.append(i)
        if build_rules:  # the build and bindings, once (the costliest build rule that matched)
            parts.append(max((_base(r) for r in build_rules), key=lambda r: (r.likely, r.high, r.low)))
        if units:
            unit_rule = self.catalog.get(CUDA_KERNEL_RULE) or self.catalog.get(CUDA_FILE_RULES[1])
            if unit_rule is not None:
                parts.append(_scale(_base(unit_rule), units))
        if host:
            host_rule = self.catalog.get(CUDA_HOST_RULE) or self.rule(host[0])
            n = sum(weight(f) for f in host)
            parts.append(_scale(_base(host_rule), growth(n, RATE_FILES)))
        if backward:
            parts.append(BACKWARD_ADDON)
        for r, fs in sorted(self.by_rule(rest).items()):
            parts.append(self.rule_cost(self.catalog.get(r), fs))
        d.details.update(kernels=int(kernels), kernel_loc=kernel_loc, kernel_units=round(units, 2),
                         files=len(files), backward=backward)
        d.title = f"Port CUDA extension `{d.details['extension']}` ({int(kernels)} kernel{'s' if kernels != 1 else ''} in {len(files)} file{'s' if len(files) != 1 else ''})"
        return _add(*parts) if parts else Range(0.0, 0.0, 0.0)

    def triton_cost(self, d: _Draft) -> Range:
        parts: list[Range] = []
        rest: list[Finding] = []
        for i in d.idx:
            f = self.findings[i]
            rule = self.rule(f)
            if f.rule == TRITON_KERNEL_RULE:
                lines = float(f.details.get("lines") or 0)
                k = weight(f) * kernel_size(lines, TRITON_REF_LINES)
                if f.details.get("atomics"):
                    k *= ATOMICS_FACTOR
                if f.details.get("backward"):
                    k *= BACKWARD_FACTOR
                parts.append(_scale(_base(rule), k))
                d.details.update(lines=int(lines), atomics=int(f.details.get("atomics") or 0),
                                 backward=bool(f.details.get("backward")),
                                 autotune_configs=int(f.details.get("autotune_configs") or 0))
            elif f.rule == TRITON_AUTOTUNE_RULE:
                configs = max(1.0, float(f.details.get("autotune_configs") or 1))
                parts.append(_scale(_base(rule), weight(f) * growth(configs, RATE_SITES)))
            else:
                rest.append(f)
        for r, fs in sorted(_group_rules(rest).items()):
            parts.append(self.rule_cost(self.catalog.get(r), fs))
        return _add(*parts) if parts else Range(0.0, 0.0, 0.0)

    def shared_cost(self, drafts: list[_Draft]) -> None:
        """Dynamic shapes or unsupported ops, one family: the sites of one function (or the files of one
        op) share a fix (their task's size); across tasks the family follows one learning curve,
        growth(experience, RATE_SITES), walked from the costliest rule to the cheapest, so each further
        function or op costs less than the one before. Each task shows its share of its rule's part."""
        sizes: dict[str, dict[str, float]] = {}  # rule -> draft id -> size
        for d in drafts:
            for r, fs in self.by_rule(d.idx).items():
                sizes.setdefault(r, {})[d.id] = size(self.catalog.get(r), fs, RATE_FUNCTION)
            d.details.setdefault("sites", len(d.idx))
            d.details.setdefault("files", len({self.findings[i].path for i in d.idx}))
        by_id = {d.id: d for d in drafts}
        rules = sorted((self.catalog.get(r) for r in sizes), key=lambda r: (-r.effort.likely, -r.effort.high, -r.effort.low, r.id))
        experience = 0.0
        for rule in rules:
            total_size = sum(sizes[rule.id].values())
            step = growth(experience + total_size, RATE_SITES) - growth(experience, RATE_SITES)
            experience += total_size
            part = _scale(_base(rule), step)
            self.shared.append((f"family:{rule.category}", part))
            for tid, s in sizes[rule.id].items():
                by_id[tid].cost = _add(by_id[tid].cost, _scale(part, s / total_size if total_size else 0.0))

    # -------------------------------------------------------------- output

    def tasks(self) -> list[Task]:
        out = []
        for d in sorted(self.drafts.values(), key=lambda d: d.id):
            rules = sorted({self.findings[i].rule for i in d.idx})
            fallback = all(self.findings[i].fallback for i in d.idx)
            lead = max((self.catalog.get(r) for r in rules), key=lambda r: (r.effort.likely, r.id))
            title = d.title if not fallback else f"Check the fallback: {d.title}"
            out.append(Task(id=d.id, title=title, category=d.category, kind=d.kind, person_days=d.cost,
                            findings=list(d.idx), fallback=fallback, remedy=lead.remedy if lead else "",
                            rules=rules, details=d.details))
        return out

    def variables(self) -> list[tuple[str, float, float, float]]:
        out = [(d.key, d.cost.low, d.cost.likely, d.cost.high) for d in self.drafts.values() if d.key]
        out += [(k, r.low, r.likely, r.high) for k, r in self.shared]
        return out


def size(rule: Rule, fs: list[Finding], rate: float = RATE_SITES) -> float:
    """How many times a rule's catalog effort one group of its findings is worth."""
    if rule.effort.per == "occurrence":
        return growth(sum(weight(f) for f in fs), rate)
    per_file: dict[str, float] = {}
    for f in fs:
        per_file[f.path] = max(per_file.get(f.path, 0.0), weight(f))
    return growth(sum(per_file.values()), RATE_FILES)


def _unique(values) -> str | None:
    vals = sorted(set(values))
    return vals[0] if len(vals) == 1 else None


def _group_rules(fs: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in fs:
        out.setdefault(f.rule, []).append(f)
    return out


def op_name(f: Finding) -> str:
    """`torch.fft.rfft` -> rfft, `.sort()` -> sort: one task per distinct op, whatever the spelling."""
    name = (f.symbol or f.rule).split("(")[0].strip(".").split(".")[-1]
    return name or f.rule


# ------------------------------------------------------------------------------------------ estimate


def estimate(findings: list[Finding], catalog: Catalog, reach: "Reach | None" = None,
             assume_fixed: bool = False) -> tuple[list[Task], Estimate]:
    """Tasks and the estimate for the findings on the training path (indices refer to `findings`)."""
    planner = _Planner(findings, catalog, reach, assume_fixed)
    planner.group()
    planner.cost()
    tasks = planner.tasks()
    variables = planner.variables()
    total = _add(*(Range(lo, li, hi) for _, lo, li, hi in variables)) if variables else Range(0.0, 0.0, 0.0)
    p50, p80 = quantiles(variables) if variables else (0.0, 0.0)
    drivers = [t.id for t in sorted(tasks, key=lambda t: (-t.person_days.likely, t.id)) if t.person_days.likely > 0][:3]
    by_category: dict[str, float] = {}
    for t in tasks:
        by_category[t.category] = by_category.get(t.category, 0.0) + t.person_days.likely
    est = Estimate(effort_class(p50), total, p50, p80, readiness_score(p50), drivers)
    est.details = {
        "tasks": len(tasks),
        "likely_by_category": {c: round(v, 2) for c, v in sorted(by_category.items(), key=lambda kv: (-kv[1], kv[0]))},
    }
    return tasks, est
