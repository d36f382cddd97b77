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
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from . import nearcopy
from .catalog import Catalog, Rule
from .model import EFFORT_CLASSES, GPU_CODE_CATEGORIES, Estimate, Finding, Range, Task
from .simulate import quantiles
from .sources.native import HEADER_SUFFIXES

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
SIZE_LIMITS = (0.5, 2.0)  # a kernel counts as at least half and at most two units (past that: templates, unrolling)
ATOMICS_FACTOR = 1.25  # atomics need restructuring (no general atomics in NKI)
BACKWARD_FACTOR = 1.25  # a backward kernel: gradient checks against autograd
BACKWARD_ADDON = Range(0.5, 2.0, 5.0)  # an extension with backward kernels: register_autograd + grad tests
VENDORED_SWAP = Range(1.0, 3.0, 8.0)  # replace a vendored library (the catalog's library-swap numbers)
# A CUDA training program with no PyTorch at all: write its model and loop in PyTorch and check it trains
# to the same loss, before any of its kernels (on the learning curve) are worth an NKI port.
PROGRAM_REWRITE = Range(10.0, 20.0, 50.0)
# Neuron 2.33, native target, eager mode: an op with no Neuron lowering falls back to the CPU (a
# device-to-host round trip each step), not a crash. Measure it; replace it only where it shows in a
# profile. Under torch.compile(backend="neuron") fallback is off, so the op fails the compile: full cost.
CPU_FALLBACK = Range(0.1, 0.5, 2.0)
SWAP_LIMIT = 5.0  # gpu-library rules with likely <= this are swaps, above it rewrites (catalog convention)
SETUP_SHARE = 0.25  # a dynamic shape or unsupported op in code that runs once can run on the CPU
# Kernels: a forward and its backward, dtype variants and near-copies are one op; the second and later
# kernels of one op add VARIANT_SHARE of their size. Across ops, a team's kernel work follows Wright's
# learning curve: each doubling of the kernels done makes the next one cost LEARNING (75 %) as much
# (the NKI harness, tiling patterns and parity tests carry over from one kernel to the next).
# A kernel named for no op yet whose body is a near-copy of a kernel already grouped (nearcopy.py:
# estimated Jaccard of normalised token shingles >= nearcopy.THRESHOLD) is a copy of that kernel's op,
# whatever its name: a copy per model family with its variables renamed and a few lines edited.
VARIANT_SHARE = 0.35
COPY_SHARE = 0.1  # the same op's kernel again in another file (a copy per model or backend)
_BACKWARD = re.compile(r"(?i)bwd|backward|grad")
# A kernel specialised for one tile, block or chunk size is the same op compiled with another constant.
_TILE_SIZE = re.compile(r"^(?:\d+x\d+|(?:block|blockdim|blocksize|chunk|dim|headdim|tile|bs|bt|bk|bv)\d+)$")
LEARNING = 0.75
# An op with a PyTorch reference in the repository: switch to it, validate numerics, then optimise.
REFERENCE_SWITCH = Range(0.5, 2.0, 6.0)
_OP_NOISE = frozenset({
    "kernel", "kernels", "fwd", "bwd", "forward", "backward", "grad", "grads", "triton", "cuda", "cu", "impl",
    "fn", "func", "op", "ops", "launcher", "launch", "fp16", "bf16", "fp32", "fp8", "f16", "f32", "half", "float",
    "int8", "1pass", "2pass", "v1", "v2", "v3", "tiled", "fused", "dx", "dw", "db", "dq", "dk", "dv", "c", "ext",
    "npu", "ascend", "rocm", "hip", "xpu", "mps", "amd",  # a copy for another accelerator is a variant
})
# Kernels named for an op PyTorch itself has (torch.*, torch.nn.functional.*, torch.optim): its PyTorch
# version is the core op, so the port is "switch to it, validate, optimise what profiling shows" (the
# NKI library has tuned norms, softmax and cross-entropy). A variant (`scatter_arg`, `rms_norm_add`,
# `segment_coo_broadcast`) extends one. segment_csr/segment_coo are torch.segment_reduce's two layouts.
CORE_OPS = frozenset({
    "scatter", "scatter_add", "scatter_reduce", "gather", "index_select", "index_add", "segment_reduce",
    "segment_csr", "segment_coo", "cumsum", "cumprod", "softmax", "log_softmax", "layer_norm", "layernorm",
    "rms_norm", "rmsnorm", "group_norm", "batch_norm", "cross_entropy", "nll_loss", "kl_div", "embedding",
    "embedding_bag", "topk", "sort", "argsort", "gelu", "silu", "relu", "dropout", "adam", "adamw",
})
_REFERENCE_MARKS = frozenset({"ref", "reference", "naive", "torch", "pytorch", "baseline", "eager", "python", "slow"})
# Functions that run once, at construction, initialisation, loading or conversion (not in the step).
SETUP_SCOPE = re.compile(
    r"^(__init__|__post_init__|__setstate__|post_init|reset_parameters|_?init\w*|\w+_init|_?setup\w*|_?build\w*"
    r"|_?load\w*|_?save\w*|_?convert\w*|from_pretrained|_?prepare\w*|_?merge\w*|_?unmerge\w*|update_layer"
    r"|_?create\w*|configure\w*|_?register\w*|_?validate\w*|_?check\w*)$"
)
SHARED_CATEGORIES = ("dynamic-shape", "unsupported-op")  # families of fixes on one learning curve
HELPERS = "T-triton-helpers"  # @triton.jit device functions: part of the kernels that call them
# A check that rejects every device but CUDA: in a kernel wrapper whose port is a task, part of that task.
CUDA_CHECKS = frozenset({"NR1019"})
# A CUDA probe that chooses a device (is the GPU there, how many) in a function that names a CUDA
# device selects between that device and another: one edit with the device literal (sites()). A probe
# that describes the device (capability, properties) is folded only on the literal's own line.
DEVICE_PROBES = frozenset({"NR1005"})
SELECTING_PROBES = frozenset({"is_available", "device_count"})
LAUNCH_CONTEXTS = frozenset({"NR1006"})  # `torch.cuda.device(...)` around a kernel launch (launch_plumbing)
DEVICE_LITERALS = frozenset({"NR1001", "NR1002", "NR1003", "NR1004"})
# Inline PTX lines: a CUDA source's port rewrites its device code as one unit (sites(): ptx_lines)
INLINE_PTX = frozenset({"NR1706"})

MECHANICAL = ("device", "distributed", "precision", "compile", "host-sync", "dependency")
FAMILY_TITLES = {
    "device": "Device plumbing", "distributed": "Distributed backend", "precision": "Precision settings",
    "compile": "torch.compile settings", "host-sync": "Host synchronisation in the step",
    "dependency": "Dependency declarations", "triton": "Triton plumbing",
}
TRITON_GUARD_TITLE = "Guard the Triton imports (none of their kernels is must-port)"
# A rule's `costing` (catalog.COSTINGS) says whether the model reads measurements from its findings
# (model.KernelFacts) or costs them from its catalog numbers alone ("catalog").
CUDA_FILE = ("cuda-kernel", "cuda-host")  # per-file CUDA/C++ findings with kernel counts and lines


def _words(text: str) -> list[str]:
    """`_chunk_scan_fwd_kernel` -> ["chunk", "scan", "fwd", "kernel"]."""
    return [t for t in re.split(r"[_\W]+", text.lower()) if t]


def _folder_words(paths) -> set[str]:
    """The words of the folders these files sit in."""
    return {t for p in paths for part in PurePosixPath(p).parts[:-1] for t in _words(part)}


def op_stem(name: str, path: str = "") -> str:
    """The op a kernel implements: `_chunk_scan_fwd_kernel` and `chunk_scan_bwd_kernel_fp16` are
    `chunk_scan`; a name that is all noise stays itself. Tokens naming the kernel's own folders are
    dropped too, so copies of one kernel per model (`ops/gla/chunk.py: chunk_gla_fwd_kernel_o`,
    `ops/gsa/chunk.py: chunk_gsa_fwd_kernel_o`) are one op, and so are tile-size specialisations
    (`prepare_wy_repr_fwd_kernel_chunk32` / `_chunk64`, `_blockdim64`, `merge_16x16_...`)."""
    tokens = _words(name)
    folders = _folder_words([path])
    kept = [t for t in tokens if t not in _OP_NOISE and not t.isdigit() and t not in folders
            and not _TILE_SIZE.match(t)]
    return "_".join(kept) or "_".join(t for t in tokens if t not in _OP_NOISE) or "_".join(tokens) or name


def backward_of(stem: str, forwards: dict[str, float]) -> str:
    """The op a backward kernel belongs to. A backward is named by the gradient it computes
    (`chunk_bwd_kernel_dh`, `_dqkwg`, `_dA`), not by its forward (`chunk_fwd_kernel_h`): when no
    forward of its own name sits in its file (or in the file named like it with fwd for bwd), it is
    the backward of the forward there that shares most words with it (the largest of equals)."""
    if not forwards or stem in forwards:
        return stem
    words = set(stem.split("_"))
    return max(sorted(forwards), key=lambda f: (len(words & set(f.split("_"))), forwards[f]))


def sibling_forward(path: str) -> str:
    """`ops/x/chunk_o_bwd.py` -> `ops/x/chunk_o_fwd.py`: the file holding the forward of a backward file."""
    p = PurePosixPath(path)
    name = re.sub(r"(?i)(?<![a-z])bwd(?![a-z])", "fwd", re.sub(r"(?i)(?<![a-z])backward(?![a-z])", "forward", p.name))
    return str(p.with_name(name)) if name != p.name else ""


def reference_stems(def_names) -> frozenset[str]:
    """Ops that have a PyTorch reference in the repository: functions named like `rmsnorm_ref`,
    `reference_rmsnorm`, `naive_attention`, `selective_scan_torch` (tests included)."""
    out = set()
    for name in def_names:
        tokens = _words(name)
        if not any(t in _REFERENCE_MARKS for t in tokens):
            continue
        if {"op", "ops", "fake", "library"} & set(tokens):
            continue  # `fna_forward_torch_op`: a kernel registered as a torch op, not a PyTorch version of it
        stem = op_stem("_".join(t for t in tokens if t not in _REFERENCE_MARKS))
        if len(stem) >= 4:
            out.add(stem)
    return frozenset(out)


def base_ops(ops) -> list[str]:
    """The ops that are not variants of another in the list: `segment_coo_broadcast` and
    `segment_coo_arg` switch with `segment_coo`, in one job."""
    ops = sorted(set(ops))
    return [o for o in ops if not any(o.startswith(b + "_") for b in ops if b != o)]


def core_op(op: str) -> bool:
    """The op is one PyTorch has, or a variant of one (CORE_OPS)."""
    return op in CORE_OPS or any(op.startswith(c + "_") for c in CORE_OPS)


def has_reference(op: str, references: frozenset[str], paths=()) -> bool:
    """An op has a PyTorch reference when one is named for it, or for it with the words of the
    kernel's folders that op_stem dropped (`causal_conv1d_varlen_states_ref` for the op
    `varlen_states` of `causal_conv1d/`), or for the op it is a variant of (`causal_conv1d_ref` for
    `causal_conv1d_channellast`)."""
    if op in references or core_op(op):
        return True
    folders = _folder_words(paths)
    for r in references:
        if r.endswith("_" + op) and set(r[: -len(op) - 1].split("_")) <= folders:
            return True
        if op.startswith(r + "_") and "_" in r:
            return True
    return False


def learned(n: float) -> float:
    """Kernel units of work after n kernels on Wright's learning curve (LEARNING per doubling): the
    k-th costs k^log2(LEARNING) of the first. Continuous in n, n itself up to one, rising and concave above."""
    if n <= 1.0:
        return max(n, 0.0)
    b = math.log2(LEARNING) + 1.0
    return 1.0 + (n ** b - 1.0) / b


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
    share: Range = field(default_factory=lambda: Range(0.0, 0.0, 0.0))  # its part of a shared family variable


class _Planner:
    def __init__(self, findings: list[Finding], catalog: Catalog, reach: "Reach | None", keep: bool = False,
                 references: frozenset[str] = frozenset(), target: str = "", compiled: bool = True,
                 assume_fixed: bool = False, cpu_twins: frozenset[str] = frozenset()) -> None:
        self.target = target
        self.compiled = compiled
        # rules with a finding in code torch.compile compiles (compile_scope.py): no CPU fallback there
        self.compiled_rules = {f.rule for f in findings if f.details.get("compiled")}
        self.keep = keep  # costing a feature the user keeps: its libraries are ported, never switched off
        self.references = references
        self.cpu_twins = cpu_twins  # CUDA sources with a CPU implementation of their op (cpu_twins.py)
        self.units: dict[str, tuple[str, float]] = {}  # task id -> (unit rule id, kernel units) on the curve
        self.copies: set[int] = set()  # Triton kernel findings grouped with an op by content, not name
        self.findings = findings
        self.assume_fixed = assume_fixed
        self.catalog = catalog
        self.reach = reach
        self.drafts: dict[str, _Draft] = {}
        self.shared: list[tuple[str, Range]] = []  # per-rule variables (dynamic shapes)
        self.checks: dict[int, str] = {}  # CUDA checks in a kernel wrapper -> its task (listed there, no cost)

    def rule(self, f: Finding) -> Rule | None:
        return self.catalog.get(f.rule)

    def costing(self, f: Finding) -> str:
        rule = self.catalog.get(f.rule)
        return rule.costing if rule is not None else "catalog"

    def cuda_file(self, f: Finding) -> bool:
        """A per-file CUDA/C++ source finding (with its measured kernels)."""
        return self.costing(f) in CUDA_FILE and f.kernel_facts.loc is not None

    def base(self, rule: Rule) -> Range:
        """A rule's catalog numbers; an unsupported op on the native target in eager mode is a CPU
        fallback to check, not a rewrite (unless the training step is compiled)."""
        r = _base(rule)
        if rule.category == "unsupported-op" and self.target == "native" and not self.compiled \
                and rule.id not in self.compiled_rules:
            return _cap(r, CPU_FALLBACK)
        return r

    def draft(self, tid: str, title: str, category: str, kind: str, **details) -> _Draft:
        d = self.drafts.get(tid)
        if d is None:
            d = self.drafts[tid] = _Draft(tid, title, category, kind, details=dict(details))
        return d

    def rule_cost(self, rule: Rule, fs: list[Finding], rate: float = RATE_SITES) -> Range:
        """A rule's catalog numbers grown with its sites (per occurrence) or files (per task).
        With --assume-fixed, what `neuron-ready fix` rewrites safely costs nothing: it is done."""
        if self.assume_fixed:
            fs = [f for f in fs if f.fix != "safe"]
        return _scale(self.base(rule), size(rule, fs, rate)) if fs else Range(0.0, 0.0, 0.0)

    def by_rule(self, idx: list[int]) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {}
        for i in idx:
            out.setdefault(self.findings[i].rule, []).append(self.findings[i])
        return out

    # -------------------------------------------------------------- grouping

    def group(self) -> None:
        triton_kernels: dict[tuple[str, str], str] = {}
        kernels: list[int] = []  # Triton kernels on the learning curve, grouped by op after the loop
        op_tasks: dict[tuple[str, str, str], str] = {}  # (rule, path, function) -> its first op's task
        later: list[int] = []
        checks: list[int] = []  # CUDA checks (CUDA_CHECKS): a task of their own unless in a kernel wrapper
        build_config: list[int] = []  # CMake CUDA settings outside any extension's build
        loads: list[int] = []  # compiled libraries loaded at run time (torch.ops.load_library)
        for i, f in enumerate(self.findings):
            rule = self.rule(f)
            if rule is None:
                continue
            ext = self.extension_of(f)
            if f.rule in CUDA_CHECKS and f.scope:
                checks.append(i)
            elif ext is not None:
                kind, ident = ext
                if kind == "vendored":
                    self.draft(f"T-vendored-{ident}", f"Replace vendored `{ident}` (compiled by the build)",
                               "custom-cuda", "replace-vendored", project=ident).idx.append(i)
                elif ident.startswith("program:"):
                    name = ident[len("program:"):].split("@")[0]
                    self.draft(f"T-program-{ident[len('program:'):]}", f"Rewrite CUDA training program `{name}`",
                               "custom-cuda", "rewrite-program", extension=ident).idx.append(i)
                else:
                    self.draft(f"T-ext-{ident}", f"Port CUDA extension `{ident}`", "custom-cuda",
                               "port-extension", extension=ident).idx.append(i)
            elif rule.costing == "triton-kernel" and f.kernel_facts.kernel and f.kernel_facts.pytorch_path:
                # One switch (the caller's setting) turns a file's kernels off for the PyTorch path beside them.
                name = f.kernel_facts.kernel
                tid = f"T-switch-{f.path}"
                triton_kernels[(f.path, name)] = tid
                self.draft(tid, f"Switch to the PyTorch path beside the Triton kernels of `{f.path}`, validate, then optimise",
                           "triton", "switch-to-reference", path=f.path).idx.append(i)
            elif rule.costing == "triton-kernel" and f.kernel_facts.kernel:
                kernels.append(i)
            elif f.category == "triton" and rule.costing != "kernel":
                later.append(i)
            elif f.category == "gpu-library" and self.built_here(f) is not None:
                ident = self.built_here(f)  # one op is one task: its port, not also a library swap
                self.draft(f"T-ext-{ident}", f"Port CUDA extension `{ident}`", "custom-cuda",
                           "port-extension", extension=ident).idx.append(i)
            elif f.category == "gpu-library":
                self.draft(f"T-lib-{rule.id}", rule.title, "gpu-library", "swap-library").idx.append(i)
            elif f.category == "dynamic-shape":
                scope = f.scope or "<module>"
                self.draft(f"T-dyn-{f.path}:{scope}", f"Fixed shapes in `{scope}` ({f.path})", "dynamic-shape",
                           "dynamic-shape", function=scope, path=f.path).idx.append(i)
            elif f.category == "unsupported-op":
                op = op_name(f)
                # Related variants in one function (`fft`, `ifft`, `ifft2`) are replaced together: one task.
                tid = f"T-op-{rule.id}-{op}"
                if f.scope:
                    tid = op_tasks.setdefault((rule.id, f.path, f.scope), tid)
                self.draft(tid, f"Replace unsupported `{op}`: {rule.title}", "unsupported-op",
                           "unsupported-op", op=op).idx.append(i)
            elif f.category in MECHANICAL and (rule.effort.per == "occurrence" or f.category == "dependency"):
                self.draft(f"T-{f.category}", FAMILY_TITLES[f.category], f.category, "mechanical").idx.append(i)
            elif rule.costing == "kernel":
                self.draft(f"T-kernel-{rule.id}-{f.path}:{f.line}", f"Port: {rule.title} ({f.path}:{f.line})",
                           f.category, "rewrite-kernel").idx.append(i)
            elif self.cmake_build(f):
                build_config.append(i)
            elif rule.costing == "load-library":
                loads.append(i)
            else:
                self.draft(f"T-rule-{rule.id}", rule.title, f.category, "rework").idx.append(i)
        # CUDA build settings no target claims, in the tree of a program rewritten in PyTorch (under the
        # folder of its build file), go away with that rewrite; elsewhere they are a task of their own.
        programs = sorted((str(PurePosixPath(d.details["extension"].split("@", 1)[-1]).parent), d.id)
                          for d in self.drafts.values() if d.kind == "rewrite-program")
        for i in build_config:
            f = self.findings[i]
            tid = next((t for folder, t in reversed(programs)
                        if folder == "." or f.path.startswith(folder + "/")), f"T-rule-{f.rule}")
            self.draft(tid, self.rule(f).title, f.category, "rework").idx.append(i)
        # A package that builds one extension and loads a compiled library at run time loads that
        # extension (torch-scatter's __init__ loads its own _scatter_cuda.so): the load is part of its
        # port, not a second one. With no extension, or several, the load is a task of its own.
        built = [d.id for d in self.drafts.values() if d.kind == "port-extension"]
        for i in loads:
            f = self.findings[i]
            tid = built[0] if len(built) == 1 else f"T-rule-{f.rule}"
            self.draft(tid, self.rule(f).title, f.category, "rework").idx.append(i)
        for d in self.drafts.values():
            if d.category == "gpu-library":
                self.library_kind(d)
        self.triton_ops(kernels, triton_kernels)
        for i in later:  # Triton autotune, launches and imports join their kernel's task
            f = self.findings[i]
            rule = self.rule(f)
            tid = None
            if rule.costing in ("triton-autotune", "triton-launch"):
                name = f.kernel_facts.kernel or f.symbol
                tid = triton_kernels.get((f.path, name)) or _unique(v for (p, n), v in triton_kernels.items() if n == name)
            elif rule.effort.per == "task":  # `import triton`: part of the file's first kernel
                tid = min((v for (p, _), v in triton_kernels.items() if p == f.path), default=None)
            if tid is None:
                tid = "T-triton"
                self.draft(tid, FAMILY_TITLES["triton"], "triton", "mechanical")
            self.drafts[tid].idx.append(i)
        self.wrapped_checks(checks)
        self.launch_plumbing()
        plumbing = self.drafts.get("T-triton")
        if plumbing and all(self.findings[i].snippet.startswith(("import ", "from ")) for i in plumbing.idx):
            # Imported where none of its kernels runs by default: the work is the import guard, not a rewrite.
            plumbing.title = TRITON_GUARD_TITLE

    def wrapped_checks(self, idx: list[int]) -> None:
        """A CUDA check in a function that calls a kernel or GPU library whose port (or switch) is
        already a task belongs to that task: the port replaces what it protects. Listed there, costed
        nothing more (added after costing); elsewhere it is device plumbing. A task of fallbacks only
        takes a check that is a fallback too (both on the GPU path Trainium does not take)."""
        owner: dict[tuple[str, str], str] = {}
        fallback_owner: dict[tuple[str, str], str] = {}
        for d in sorted(self.drafts.values(), key=lambda d: d.id):
            if d.category in GPU_CODE_CATEGORIES:  # tasks that port, switch or gate GPU code
                held = fallback_owner if all(self.findings[i].fallback for i in d.idx) else owner
                for i in d.idx:
                    held.setdefault((self.findings[i].path, self.findings[i].scope), d.id)
        for i in idx:
            f = self.findings[i]
            key = (f.path, f.scope)
            tid = owner.get(key) or (fallback_owner.get(key) if f.fallback else None)
            if tid is not None:
                self.checks[i] = tid
            else:
                self.draft("T-device", FAMILY_TITLES["device"], "device", "mechanical").idx.append(i)

    def launch_plumbing(self) -> None:
        """A CUDA device context (`with torch.cuda.device(x.device):`) or a query of the device's
        properties (`get_device_properties(...).multi_processor_count`, sizing a grid) in a function
        that launches a kernel whose port is a task exists for that launch: the port replaces it, as it
        replaces a check it wraps (wrapped_checks). It leaves device plumbing for that task, listed
        there and costed nothing more; a probe that chooses a device (`is_available`) stays plumbing."""
        device = self.drafts.get("T-device")
        if device is None:
            return
        launched: dict[tuple[str, str], str] = {}
        for d in sorted(self.drafts.values(), key=lambda d: d.id):
            if d.category in ("triton", "custom-cuda") and d.kind != "mechanical":
                for i in d.idx:
                    f = self.findings[i]
                    if f.scope and self.costing(f) == "triton-launch":
                        launched.setdefault((f.path, f.scope), d.id)
        moved: set[int] = set()
        for i in device.idx:
            f = self.findings[i]
            name = (f.symbol or "").rsplit(".", 1)[-1]
            plumbing = ((f.rule in LAUNCH_CONTEXTS and name == "device")
                        or (f.rule in DEVICE_PROBES and name not in SELECTING_PROBES))
            tid = launched.get((f.path, f.scope)) if plumbing and not f.fallback else None
            if tid is not None:
                self.checks[i] = tid
                moved.add(i)
        device.idx = [i for i in device.idx if i not in moved]
        if not device.idx:
            del self.drafts["T-device"]

    def triton_ops(self, idx: list[int], triton_kernels: dict[tuple[str, str], str]) -> None:
        """One task per Triton op. A kernel joins the op its name says (op_stem), unless its body is a
        near-copy of a kernel already grouped: then it joins that kernel's op whatever its name, as a
        copy, or as its backward (or forward) where one is a backward and the other not (not when
        either op has a PyTorch reference: that is a switch, not a port). Walked by path and line, so
        the same tree groups the same way in any file order."""
        # sketches so far, each keyed (task, a backward?); indexed by the hashes rarest among these kernels
        grouped = nearcopy.Sketches(nearcopy.hashes(self.findings[i].kernel_facts.fingerprint) for i in idx)
        forwards = self.forward_stems(idx)
        for i in sorted(idx, key=lambda i: (self.findings[i].path, self.findings[i].line, self.findings[i].kernel_facts.kernel)):
            f = self.findings[i]
            name = f.kernel_facts.kernel
            if f.kernel_facts.device_function:
                # inlined into the kernels that call it: ported with them, never an op of its own
                self.draft(HELPERS, "Triton device functions, ported with the kernels that call them", "triton",
                           "rewrite-kernel", op="").idx.append(i)
                triton_kernels[(f.path, name)] = HELPERS
                continue
            stem = op_stem(name, f.path)
            if _BACKWARD.search(name) and not has_reference(stem, self.references, [f.path]):
                stem = backward_of(stem, forwards.get(f.path) or forwards.get(sibling_forward(f.path)) or {})
            tid = f"T-triton-{stem}"
            sketch = nearcopy.hashes(f.kernel_facts.fingerprint)
            backward = bool(_BACKWARD.search(name))
            if sketch and not has_reference(stem, self.references, [f.path]):
                match = nearcopy.copy_of(sketch, grouped)
                if match is not None:
                    tid = match[0]
                    if match[1] == backward:
                        self.copies.add(i)
            d = self.draft(tid, f"Rewrite Triton op `{stem}`", "triton", "rewrite-kernel", op=stem)
            d.idx.append(i)
            triton_kernels[(f.path, name)] = tid
            if sketch and not has_reference(d.details["op"], self.references, [f.path]):
                grouped.append((sketch, (tid, backward)))

    def forward_stems(self, idx: list[int]) -> dict[str, dict[str, float]]:
        """Per file, the ops of its forward Triton kernels and the size of the largest (in lines)."""
        out: dict[str, dict[str, float]] = {}
        for i in idx:
            facts = self.findings[i].kernel_facts
            if not facts.device_function and not _BACKWARD.search(facts.kernel):
                stems = out.setdefault(self.findings[i].path, {})
                stem = op_stem(facts.kernel, self.findings[i].path)
                stems[stem] = max(stems.get(stem, 0.0), float(facts.lines))
        return out

    def library_kind(self, d: _Draft) -> None:
        """Swap (a Neuron equivalent exists: the catalog's swap numbers), rewrite, or gate. A library a
        project uses only inside functions or behind a guard, or any library a library project uses,
        is an optional integration (unless a module the package always imports imports it): on Trainium it
        is switched off, not ported; one the default configuration selects is not optional: a switch to
        the setting's PyTorch value when it has one, else a swap or rewrite."""
        rule = self.catalog.get(self.findings[d.idx[0]].rule)
        hard = any(not self.findings[i].scope and not self.findings[i].fallback for i in d.idx)
        if all(self.findings[i].fallback for i in d.idx):
            d.kind = "gate-library"  # titled "Check the fallback: ..."
            return
        # Selected by the default configuration (default_choice.py): the job calls it, whatever guards
        # its import; with a value of the same setting that needs no GPU code, the port is that switch.
        chosen = [self.findings[i] for i in d.idx if self.findings[i].details.get("default_option")]
        if chosen and not self.keep and all(f.details.get("default_alternative") for f in chosen):
            options = sorted({f.details["default_option"] for f in chosen})
            d.kind = "switch-to-reference"
            d.details["options"] = options
            whose = "its PyTorch value" if len(options) == 1 else "their PyTorch values"
            d.title = (f"Switch the default of {', '.join(f'`{o}`' for o in options)} to {whose}, validate, "
                       f"then optimise: {rule.title}")
            return
        # Only imported on the training path (its calls are opt-in or elsewhere): guard the import.
        imports_only = all(self.findings[i].snippet.startswith(("import ", "from ")) for i in d.idx)
        # A library's optional integration, unless a module the package always imports imports it.
        optional = self.reach is not None and self.reach.mode == "library" and not any(
            self.findings[i].details.get("core_import") for i in d.idx)
        if not self.keep and not chosen and (optional or not hard or imports_only):
            d.kind, verb = "gate-library", "Gate the optional integration"
        elif rule.effort.likely <= SWAP_LIMIT:
            d.kind, verb = "swap-library", "Swap"
        else:
            d.kind, verb = "rewrite-library", "Rewrite"
        d.title = f"{verb}: {rule.title}"

    def built_here(self, f: Finding) -> str | None:
        """The id of the extension this repository builds that a library finding imports, if any
        (`import selective_scan_cuda` in mamba's own sources)."""
        if self.reach is None or not f.symbol:
            return None
        root = f.symbol.split(".")[0]
        for e in self.reach.extensions:
            if e.name and root in (e.name, e.name.rsplit(".", 1)[-1]) and root not in ("_C", "C"):
                return e.id
        return None

    def builds(self, f: Finding) -> bool:
        """A rule about building CUDA code (an extension build call, a CMake CUDA project)."""
        return f.category == "custom-cuda" and not self.cuda_file(f)

    def cmake_build(self, f: Finding) -> bool:
        """A CUDA setting of a CMake build (a CMakeLists.txt or .cmake file)."""
        name = PurePosixPath(f.path).name
        return self.builds(f) and (name == "CMakeLists.txt" or name.endswith(".cmake"))

    def extension_of(self, f: Finding) -> tuple[str, str] | None:
        """("ext", id) or ("vendored", project) for a finding in a compiled extension's files or at its build."""
        ext_id = None
        if self.reach is not None:
            ext_id = self.reach.extension_of.get(f.path) or self.reach.build_site(f.path, f.line, self.builds(f))
        if ext_id is None:
            if self.cuda_file(f):
                # CUDA sources with no build information (files given one by one): one extension per folder
                d = str(PurePosixPath(f.path).parent)
                return "ext", d if d != "." else "<root>"
            return None
        if f.path in self.reach.vendored:
            return "vendored", self.reach.vendored[f.path]
        return "ext", self.reach.same_code(ext_id)

    # -------------------------------------------------------------- costing

    def cost(self) -> None:
        dynamic: dict[str, list[_Draft]] = {}
        for d in self.drafts.values():
            d.idx.sort()
            if d.category in SHARED_CATEGORIES:
                dynamic.setdefault(d.category, []).append(d)
                continue
            d.key = d.id
            if d.kind in ("port-extension", "rewrite-program"):
                d.cost = self.extension_cost(d)
            elif d.kind == "replace-vendored":
                d.cost = VENDORED_SWAP
            elif d.id.startswith("T-triton-"):
                d.cost = self.triton_cost(d)
            elif d.id.startswith("T-switch-"):
                d.cost = self.switch_cost(d)
            elif d.category == "gpu-library" and d.kind == "switch-to-reference":
                # one switch per setting the default must change, its validation shared as sites are
                d.cost = _scale(REFERENCE_SWITCH, growth(len(d.details["options"]), RATE_SITES))
                d.details.update(sites=len(d.idx), files=len({self.findings[i].path for i in d.idx}))
            elif d.id.startswith("T-kernel-") and not all(self.findings[i].fallback for i in d.idx):
                # an inline or other-DSL kernel (CuPy, Numba, tilelang, ...): one unit on its rule's curve
                self.units[d.id] = (self.findings[d.idx[0]].rule, sum(weight(self.findings[i]) for i in d.idx))
                d.cost = Range(0.0, 0.0, 0.0)
            else:
                parts = [self.rule_cost(self.catalog.get(r), fs) for r, fs in sorted(self.by_rule(d.idx).items())]
                d.cost = _add(*parts)
                d.details.setdefault("sites", len(d.idx))
                d.details.setdefault("files", len({self.findings[i].path for i in d.idx}))
            if d.kind == "gate-library" or all(self.findings[i].fallback for i in d.idx):
                d.cost = _cap(d.cost, FALLBACK)
                self.units.pop(d.id, None)
        for ds in dynamic.values():
            self.shared_cost(ds)
        self.kernel_family()
        for i, tid in sorted(self.checks.items()):
            self.drafts[tid].idx.append(i)
            self.drafts[tid].idx.sort()

    def kernel_family(self) -> None:
        """Kernel units of one unit rule (CUDA kernels, Triton kernels) walk one learning curve: the
        family costs base x learned(total units), one Monte Carlo variable, and each task shows its
        share. A task made only of fallback findings keeps its cap and stays off the curve."""
        by_rule: dict[str, list[tuple[str, float]]] = {}
        for tid, (rule_id, u) in sorted(self.units.items()):
            by_rule.setdefault(rule_id, []).append((tid, u))
        for rule_id, items in sorted(by_rule.items()):
            rule = self.catalog.get(rule_id)
            total = sum(u for _, u in items)
            if rule is None or total <= 0:
                continue
            family = _scale(_base(rule), learned(total))
            self.shared.append((f"family:kernels:{rule_id}", family))
            per_unit = family.likely / total
            ratio = learned(total) / total  # the same learning on each op's tuning, launches and imports
            for tid, u in items:
                d = self.drafts[tid]
                d.share = _add(d.share, _scale(family, u / total))
                if d.kind == "rewrite-kernel":
                    d.cost = _scale(d.cost, ratio)
                d.details.update(kernel_units=round(u, 2), per_unit=round(per_unit, 2))

    def extension_cost(self, d: _Draft) -> Range:
        """The extension's own work (build, host files, backward add-on, other rules); its kernels go
        on the kernel learning curve (kernel_family) by op, or to their PyTorch reference."""
        parts: list[Range] = []
        kernels = 0
        kernel_loc = 0
        files = set()
        host: list[Finding] = []
        backward = False
        rest: list[int] = []
        build_rules: list[Rule] = []
        ops: dict[str, list[float]] = {}  # op -> weighted sizes of its kernels
        exported: set[str] = set()  # prebuilt libraries' functions: one build per CUDA version is one port
        grouped: list[tuple[frozenset[int], tuple[str, bool]]] = []  # kernel sketches so far: (op, a backward?)
        near: set[str] = set()  # kernels in an op by content (near-copies), not by name
        for i in sorted(d.idx, key=lambda i: (self.findings[i].path, self.findings[i].line)):
            f = self.findings[i]
            rule = self.rule(f)
            files.add(f.path)
            facts = f.kernel_facts
            if self.cuda_file(f) and facts.prebuilt:
                # No source to measure: each exported function not seen in another build is one unit.
                for name in facts.kernel_names:
                    if name not in exported:
                        exported.add(name)
                        kernels += 1
                        ops.setdefault(op_stem(name, f.path), []).append((f.path, weight(f), name, False))
            elif self.cuda_file(f):
                k = facts.kernels
                if k:
                    loc = float(facts.kernel_loc)
                    kernels += k
                    kernel_loc += int(loc)
                    names = list(facts.kernel_names) or [PurePosixPath(f.path).stem] * k
                    sketches = list(facts.kernel_fingerprints) + [""] * k
                    for name, fp in zip(names[:k], sketches):
                        stem, copy = self.cuda_op(op_stem(name, f.path), name, fp, f.path, grouped)
                        ops.setdefault(stem, []).append(
                            (f.path, weight(f) * kernel_size(loc / k, CUDA_REF_KERNEL_LOC), name, copy))
                        if copy:
                            near.add(name)
                    backward = backward or facts.backward
                else:
                    host.append(f)
            elif (self.reach is not None and self.reach.build_site(f.path, f.line, self.builds(f)) is not None) or (
                    d.kind == "rewrite-program" and self.cmake_build(f)):
                build_rules.append(rule)
                files.discard(f.path)
            elif rule.costing == "load-library":  # loading the extension it builds: part of its port
                files.discard(f.path)
            else:
                rest.append(i)
        kernel_findings = [self.findings[i] for i in d.idx if self.costing(self.findings[i]) in CUDA_FILE]
        hosted: list[str] = []
        if kernel_findings and all(f.kernel_facts.pytorch_path for f in kernel_findings):
            units, referenced = 0.0, ["<the PyTorch path beside it>"]  # one switch turns the whole extension off
        else:
            # Ops the extension also builds for the CPU, and PyTorch lacks, run on the host: one switch
            # for all of them. An op PyTorch has (or the repository has in PyTorch) runs on the device
            # as that op, switched per op: the host round trip every step is not a port for it.
            hosted = sorted(op for op, sizes in ops.items()
                            if sizes and all(s[0] in self.cpu_twins for s in sizes)
                            and not has_reference(op, self.references, [s[0] for s in sizes]))
            units, referenced = self.op_units({op: s for op, s in ops.items() if op not in hosted})
            if hosted:
                d.details["cpu_ops"] = hosted
                referenced = referenced + ["<the extension's CPU build>"]
        dropped = bool(referenced) and not units and d.kind != "rewrite-program"  # switched off: nothing to build
        if d.kind == "rewrite-program":
            parts.append(PROGRAM_REWRITE)  # the model and loop in PyTorch; its build is replaced, not ported
        elif build_rules and not dropped:  # the build and bindings, once (the costliest build rule that matched)
            parts.append(max((_base(r) for r in build_rules), key=lambda r: (r.likely, r.high, r.low)))
        if host and not dropped:  # the extension's host C++ goes with it
            host_rule = self.catalog.costed("cuda-host") or self.rule(host[0])
            n = sum(weight(f) for f in host)
            parts.append(_scale(_base(host_rule), growth(n, RATE_FILES)))
        for r, fs in sorted(self.by_rule(rest).items()):
            parts.append(self.rule_cost(self.catalog.get(r), fs))
        if referenced:
            parts.append(_scale(REFERENCE_SWITCH, len(base_ops(referenced))))
            d.kind = "switch-to-reference" if not units else d.kind
        elif backward:
            parts.append(BACKWARD_ADDON)
        unit_rule = self.catalog.costed("cuda-kernel")  # the catalog numbers of one CUDA kernel unit
        if units and unit_rule is not None:
            self.units[d.id] = (unit_rule.id, units)
        d.details.update(kernels=kernels, ops=len(ops), kernel_loc=kernel_loc, kernel_units=round(units, 2),
                         files=len(files), backward=backward)
        if referenced:
            d.details["references"] = referenced
        if near:
            d.details["near_copies"] = sorted(near)
        unit = "exported function" if exported and kernels == len(exported) else "kernel"
        what = f"{kernels} {unit}{'s' if kernels != 1 else ''}, {len(ops)} op{'s' if len(ops) != 1 else ''}, in {len(files)} file{'s' if len(files) != 1 else ''}"
        verb = "Switch CUDA extension" if d.kind == "switch-to-reference" else "Port CUDA extension"
        if unit != "kernel" and d.kind != "switch-to-reference":
            verb = "Re-implement prebuilt CUDA library"
        if d.kind == "rewrite-program":
            d.title = f"Rewrite CUDA training program `{d.details['extension'][8:].split('@')[0]}` in PyTorch ({what})"
            return _add(*parts) if parts else Range(0.0, 0.0, 0.0)
        named = [r for r in referenced if not r.startswith("<the extension's CPU")]
        d.title = f"{verb} `{d.details['extension']}` ({what})" + (
            f"; PyTorch reference for {', '.join(f'`{r}`' for r in named)}" if named else "") + (
            f"; CPU implementation of {len(hosted)} op{'s' if len(hosted) != 1 else ''} in the extension" if hosted else "")
        return _add(*parts) if parts else Range(0.0, 0.0, 0.0)

    def cuda_op(self, stem: str, name: str, fp: str, path: str, grouped: list) -> tuple[str, bool]:
        """The op of a CUDA kernel, walked by path and line: the op its name says, unless its body is a
        near-copy of a kernel already grouped (then that kernel's op, as a copy when both or neither
        are a backward), as for Triton (triton_ops); never when either op has a PyTorch reference."""
        sketch = nearcopy.hashes(fp)
        backward = bool(_BACKWARD.search(name))
        copy = False
        if sketch and not has_reference(stem, self.references, [path]):
            match = nearcopy.copy_of(sketch, grouped)
            if match is not None:
                stem, copy = match[0], match[1] == backward
            if match is None or not copy:  # a copy adds nothing to compare with: the walk stays linear in copies
                grouped.append((sketch, (stem, backward)))
        return stem, copy

    def op_units(self, ops: dict[str, list[tuple[str, float, str, bool]]]) -> tuple[float, list[str]]:
        """Kernel units of the ops without a PyTorch reference, and the ops with one. An op's largest
        kernel counts whole; its backward and its other kernels in the same file (dtype variants)
        VARIANT_SHARE each; its other kernels elsewhere (copies per model or backend, and near-copies
        by content, whatever their name) COPY_SHARE each. Sizes: (path, units, name, copy)."""
        units = 0.0
        referenced = []
        for op, sizes in sorted(ops.items()):
            if has_reference(op, self.references, [s[0] for s in sizes]):
                referenced.append(op)
                continue
            if not sizes:
                continue
            ordered = sorted(sizes, key=lambda s: (-s[1], s[0], s[2], s[3]))
            home, _, home_name, _ = ordered[0]
            units += ordered[0][1]
            # the largest of the other direction (the op's backward, or its forward) is a variant; a
            # kernel of a direction already counted is a variant in the home file, elsewhere a copy
            directions = {bool(_BACKWARD.search(home_name))}
            for p, k, n, copy in ordered[1:]:
                direction = bool(_BACKWARD.search(n))
                units += (VARIANT_SHARE if p == home or (not copy and direction not in directions) else COPY_SHARE) * k
                directions.add(direction)
        return units, referenced

    def switch_cost(self, d: _Draft) -> Range:
        """Kernels whose callers have a PyTorch path beside them, behind a setting that is on by
        default: turn it off, validate the PyTorch path, optimise what profiling shows (once)."""
        kernels = sorted({self.findings[i].kernel_facts.kernel for i in d.idx
                          if self.costing(self.findings[i]) == "triton-kernel"})
        d.details.update(kernels=kernels, sites=len(d.idx))
        return REFERENCE_SWITCH

    def triton_cost(self, d: _Draft) -> Range:
        """One Triton op (its forward, backward and variants): its autotune configs, launches and
        import here; its kernel units on the learning curve, or its PyTorch reference."""
        parts: list[Range] = []
        rest: list[Finding] = []
        sizes: list[tuple[str, float, str, bool]] = []
        names: set[str] = set()
        copies: set[str] = set()  # kernels in this op by content (near-copies), not by name
        paths: set[str] = set()
        unit_rule = ""  # the rule whose numbers one Triton kernel unit costs
        for i in d.idx:
            f = self.findings[i]
            rule = self.rule(f)
            facts = f.kernel_facts
            if rule.costing == "triton-kernel":
                unit_rule = unit_rule or rule.id
                k = weight(f) * kernel_size(float(facts.lines), TRITON_REF_LINES)
                if facts.atomics:
                    k *= ATOMICS_FACTOR
                if facts.device_function:
                    k = 0.0  # inlined into its callers: their units carry it
                sizes.append((f.path, k, facts.kernel, i in self.copies))
                names.add(facts.kernel)
                if i in self.copies:
                    copies.add(facts.kernel)
                paths.add(f.path)
                d.details["lines"] = d.details.get("lines", 0) + facts.lines
                d.details["atomics"] = d.details.get("atomics", 0) + facts.atomics
                d.details["backward"] = d.details.get("backward", False) or facts.backward
            elif rule.costing == "triton-autotune":
                configs = max(1.0, float(facts.autotune_configs or 1))
                parts.append(_scale(_base(rule), weight(f) * growth(configs, RATE_SITES)))
            else:
                rest.append(f)
        for r, fs in sorted(_group_rules(rest).items()):
            parts.append(self.rule_cost(self.catalog.get(r), fs))
        op = d.details.get("op", "")
        units, referenced = self.op_units({op: sizes} if sizes else {})
        if referenced:
            parts.append(REFERENCE_SWITCH)
            d.kind = "switch-to-reference"
            d.details["references"] = referenced
        elif units:
            self.units[d.id] = (unit_rule, units)
        d.details.update(kernels=sorted(names), files=len(paths))
        if copies:
            d.details["near_copies"] = sorted(copies)
        where = ", ".join(sorted(paths)[:2]) + (" …" if len(paths) > 2 else "")
        n = len(names)
        folded = f", {len(copies)} of them near-copies by content" if copies else ""
        verb = "Switch Triton op" if referenced else "Rewrite Triton op"
        if d.id == HELPERS:
            d.title = f"Port the Triton device functions with the kernels that call them ({n} in {where})"
            return _add(*parts) if parts else Range(0.0, 0.0, 0.0)
        d.title = f"{verb} `{op}` ({n} kernel{'s' if n != 1 else ''} in {where}{folded})" + (
            ("; PyTorch has the op" if core_op(op) and op not in self.references else
             "; PyTorch reference in the repository") if referenced else "")
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
            part = _scale(self.base(rule), step)
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
            out.append(Task(id=d.id, title=title, category=d.category, kind=d.kind, person_days=_add(d.cost, d.share),
                            findings=list(d.idx), fallback=fallback, remedy=lead.remedy if lead else "",
                            rules=rules, details=d.details))
        return out

    def sites(self) -> dict[int, int]:
        """Findings that are another line of an edit a finding of the same task already counts, each
        to that primary (the finding a reader acts on); docs/effort-model.md, "Sites". Each rule folds only
        where the second line is unambiguously the same edit, within one file but for launchers and
        support headers:
        - a CUDA setting of a CMake build file after the first of that file (the build is ported once);
        - a Triton autotune or heuristics decorator of a kernel whose own finding sits in the same file
          (the decorator goes with the kernel's rewrite);
        - a Triton launch of a kernel whose own finding is in its task: the one in the launch's file,
          else the only one of that name (the launch becomes a call of the rewritten kernel);
        - a CUDA check a kernel or library task holds (wrapped_checks), and a CUDA device context or
          device-property query in a function that launches a kernel of a task (launch_plumbing): a
          site of that task's first finding in the same function (the port replaces what it protects);
        - a CUDA probe that chooses a device (is_available, device_count) in a function that names a
          CUDA device: a site of that device literal (the nearest), the probe choosing between it and
          another device; any probe on a device literal's own line (module level too) is a site of it.
        - a further CUDA device literal in one function (a site of its first: the function's device
          choice is one edit; literals in different functions stay items);
        - a further dynamic shape in one function (a site of its first: the task is that function's
          fixed-shape redesign, one pad or bucket for the gathers after one `nonzero`);
        - a CUDA source with no kernel of its own whose project includes define kernels with a finding
          in the same task: a site of that finding (launchers);
        - an inline PTX line of a CUDA source: a site of the file's per-file finding, else of its first
          PTX line (ptx_lines: the file's device code is ported as one unit);
        - a CUDA header with no kernel and no device code of its own that kernel sources include: a
          site of the first including kernel file's finding (support_headers);
        - a host C++ source with no kernel and no device code whose name pairs it with a kernel source
          of its directory or a folder in it (`Adam.cpp` and `AdamCUDA.cu`, `rw.cpp` and `cuda/rw_cuda.cu`):
          a site of that source's finding (bindings);
        - a Triton import line of a file whose kernel has a finding in the same task: a site of the
          file's first kernel (kernel_imports);
        - a Triton device function (HELPERS: inlined into the kernels that call it): a site of its
          file's first kernel, else of the file's first device function (device_functions);
        - a further import line of one GPU-only library in its task, in any file (library_imports);
        - a further finding of one rule in one Python function of one task (repeated_in_function).
        A site keeps its context and its task, and so its cost: the figures do not change."""
        task_of = {i: d.id for d in self.drafts.values() for i in d.idx}
        order = sorted(task_of, key=lambda i: self.findings[i].sort_key())
        out: dict[int, int] = {}
        build_first: dict[tuple[str, str], int] = {}
        kernel_at: dict[tuple[str, str, str], int] = {}  # (task, path, kernel) -> its NR1801-style finding
        literals: dict[tuple[str, str, str], list[int]] = {}  # (task, path, function) -> device literals
        shapes_first: dict[str, int] = {}  # a function's fixed-shapes task -> its first finding
        for i in order:
            f = self.findings[i]
            if self.cmake_build(f):
                first = build_first.setdefault((f.path, task_of[i]), i)
                if first != i:
                    out[i] = first
            elif self.costing(f) == "triton-kernel" and f.kernel_facts.kernel:
                kernel_at.setdefault((task_of[i], f.path, f.kernel_facts.kernel), i)
            elif f.rule in DEVICE_LITERALS:
                literals.setdefault((task_of[i], f.path, f.scope), []).append(i)
            elif f.category == "dynamic-shape" and f.scope:
                first = shapes_first.setdefault(task_of[i], i)  # the task is the function's shapes
                if first != i:
                    out[i] = first
        for key, found in literals.items():
            if key[2]:  # one function's device choice is one edit, whatever its number of lines
                out.update((j, found[0]) for j in found[1:])
        by_name: dict[tuple[str, str], list[int]] = {}  # (task, kernel) -> its findings, any file
        for (tid, _path, name), j in kernel_at.items():
            by_name.setdefault((tid, name), []).append(j)
        for i in order:
            f = self.findings[i]
            if self.costing(f) == "triton-autotune":
                kernel = kernel_at.get((task_of[i], f.path, f.kernel_facts.kernel or f.symbol))
                if kernel is not None:
                    out[i] = kernel
            elif self.costing(f) == "triton-launch":
                name = f.kernel_facts.kernel or f.symbol
                named = by_name.get((task_of[i], name), [])
                kernel = kernel_at.get((task_of[i], f.path, name))
                if kernel is None and len(named) == 1:  # finding indices start at 0: test for None, not truth
                    kernel = named[0]
                if kernel is not None:
                    out[i] = kernel
            elif f.rule in DEVICE_PROBES:
                selects = bool(f.scope) and f.symbol.rsplit(".", 1)[-1] in SELECTING_PROBES
                near = [j for j in literals.get((task_of[i], f.path, f.scope), ())
                        if selects or self.findings[j].line == f.line]
                if near:
                    out[i] = min(near, key=lambda j: (abs(self.findings[j].line - f.line), self.findings[j].line))
        out.update(self.launchers(task_of, order))
        out.update((i, j) for i, j in self.bindings(task_of, order).items() if i not in out)
        out.update(self.kernel_imports(task_of, order))
        out.update(self.device_functions(task_of, order))
        out.update(self.ptx_lines(task_of, order))
        out.update((i, j) for i, j in self.support_headers(task_of, order).items() if i not in out)
        out.update(self.library_imports(order, task_of))
        out.update((i, j) for i, j in self.repeated_in_function(order, task_of).items() if i not in out)
        for i, tid in self.checks.items():
            f = self.findings[i]
            first = next((j for j in order if task_of[j] == tid and j not in self.checks
                          and (self.findings[j].path, self.findings[j].scope) == (f.path, f.scope)), None)
            if first is not None:
                out[i] = first
        for i in list(out):  # a primary that is itself a site hands on its own primary
            seen = {i}
            while out[i] in out and out[i] not in seen:
                seen.add(out[i])
                out[i] = out[out[i]]
        return out

    def repeated_in_function(self, order: list[int], task_of: dict[int, str]) -> dict[int, int]:
        """A further finding of one rule in one Python function of one task: a site of the first. The
        function's edit for that rule is one edit (three `view_as_complex` of one rotary function are
        one real-arithmetic rewrite, two `torch.cuda.synchronize()` of one profiler one removal).
        Kernels, launches and native sources keep their own units, and so do the uses of a GPU library
        (each call is its own swap: library_imports folds only imports); module-level code has no function."""
        first: dict[tuple, int] = {}
        out: dict[int, int] = {}
        for i in order:
            f = self.findings[i]
            if (not f.scope or self.costing(f) != "catalog" or f.category == "gpu-library"
                    or not f.path.endswith((".py", ".ipynb"))):
                continue
            j = first.setdefault((task_of[i], f.rule, f.path, f.scope, f.context), i)
            if j != i:
                out[i] = j
        return out

    def launchers(self, task_of: dict[int, str], order: list[int]) -> dict[int, int]:
        """A CUDA source with no kernel of its own (a launcher filling parameters, a one-line template
        instantiation) whose project includes, followed transitively, reach a source with kernels and a
        finding in the same task and context: a site of that finding (the nearest include first, then
        the first by path). The kernels are what a port rewrites; the launcher is the wrapper edit that
        follows them. A source with a kernel of its own stays an item, whatever it includes, and so does
        one whose device code reads the thread or block index: a kernel's body (a functor run by a
        generic kernel of the header, one op of several that share it), not launch glue."""
        kernel_file = self.kernel_files(task_of, order)
        includes = self.reach.includes if self.reach is not None else {}
        out: dict[int, int] = {}
        for i in order if kernel_file else ():
            k = self.findings[i].kernel_facts
            if self.cuda_file(self.findings[i]) and not (k.kernels or k.thread_index or k.prebuilt):
                hit = self.nearest_kernel_file(i, includes, task_of, kernel_file)
                if hit is not None:
                    out[i] = hit
        return out

    def bindings(self, task_of: dict[int, str], order: list[int]) -> dict[int, int]:
        """A host C++ source (not a header) with no kernel and no device code of its own, beside kernel
        sources of its task and context in the same directory or a folder directly in it (`csrc/rw.cpp`,
        `csrc/cuda/rw_cuda.cu`), whose name pairs it with one of them: the same stem once
        `cuda`/`kernel`/`gpu` suffixes go (`Adam.cpp`, `AdamCUDA.cu`), or a stem of four letters or more
        that the kernel source's begins with (`Projection.cpp`, `ProjectionEWA3DGSFused.cu`): a site of
        that source's finding (the first by path). It is the
        binding of those kernels, which a port replaces together with them (an `@nki_op` registration
        instead of a pybind11 module), whatever the two include."""
        kernel_file = self.kernel_files(task_of, order)
        out: dict[int, int] = {}
        for i in order if kernel_file else ():
            f = self.findings[i]
            k = f.kernel_facts
            if not self.cuda_file(f) or f.path.endswith(HEADER_SUFFIXES) or k.kernels or k.device_code \
                    or k.thread_index or k.prebuilt:
                continue
            folder, stem = _binding_stem(f.path)
            paired = sorted(p for (tid, ctx, p) in kernel_file if (tid, ctx) == (task_of[i], f.context)
                            and p != f.path and _pairs(folder, stem, *_binding_stem(p)))
            if paired:
                out[i] = kernel_file[(task_of[i], f.context, paired[0])]
        return out

    def kernel_imports(self, task_of: dict[int, str], order: list[int]) -> dict[int, int]:
        """A Triton import line (`import triton`, `import triton.language as tl`) of a file whose Triton
        kernel has a finding in the same task and context: a site of the file's first kernel. The import
        exists for those kernels and goes when they are rewritten. An import in a file that only
        launches or names Triton stays an item of the Triton plumbing task (guard it, replace
        `triton.cdiv`)."""
        first = self.first_kernels(order, lambda i, f: (task_of[i], f.context, f.path))
        out: dict[int, int] = {}
        for i in order if first else ():
            f = self.findings[i]
            if f.category == "triton" and self.costing(f) == "catalog" and f.snippet.startswith(("import ", "from ")):
                j = first.get((task_of[i], f.context, f.path))
                if j is not None:
                    out[i] = j
        return out

    def device_functions(self, task_of: dict[int, str], order: list[int]) -> dict[int, int]:
        """A `@triton.jit` device function (one that returns a value, HELPERS) in a file with a Triton
        kernel of the same context: a site of the file's first kernel, whatever that kernel's task (the
        helper is inlined into the kernels that call it and rewritten with them; its own task only
        keeps its small cost). In a file of helpers alone, each further one is a site of the first:
        the file's helpers go together with whichever kernels include them."""
        kernels = self.first_kernels(order, lambda i, f: (f.context, f.path) if task_of[i] != HELPERS else None)
        first: dict[tuple[str, str], int] = {}
        out: dict[int, int] = {}
        for i in order:
            f = self.findings[i]
            if task_of[i] == HELPERS and self.costing(f) == "triton-kernel":
                key = (f.context, f.path)
                j = kernels.get(key)
                if j is None:
                    j = first.setdefault(key, i)
                if j != i:
                    out[i] = j
        return out

    def first_kernels(self, order: list[int], key) -> dict[tuple, int]:
        """key(i, finding) -> the first Triton kernel finding (in `order`) under that key; a key of
        None leaves the kernel out (kernel_imports, device_functions)."""
        out: dict[tuple, int] = {}
        for i in order:
            f = self.findings[i]
            if self.costing(f) == "triton-kernel" and f.kernel_facts.kernel and (k := key(i, f)) is not None:
                out.setdefault(k, i)
        return out

    def ptx_lines(self, task_of: dict[int, str], order: list[int]) -> dict[int, int]:
        """Inline PTX lines (INLINE_PTX) of one CUDA source in one task and context: the file's port
        rewrites its device code as one unit (its per-file finding carries the file's size), so each
        PTX line is a site of the file's per-file finding (NR1703/NR1704) when it has one, else each
        further PTX line is a site of the file's first."""
        first: dict[tuple[str, str, str], int] = {}  # (task, context, path) -> the file's primary
        for i in order:  # per-file findings first: they are the primary wherever their line sits
            f = self.findings[i]
            if self.cuda_file(f):
                first.setdefault((task_of[i], f.context, f.path), i)
        out: dict[int, int] = {}
        for i in order:
            f = self.findings[i]
            if f.rule in INLINE_PTX:
                primary = first.setdefault((task_of[i], f.context, f.path), i)
                if primary != i:
                    out[i] = primary
        return out

    def support_headers(self, task_of: dict[int, str], order: list[int]) -> dict[int, int]:
        """A CUDA header with no kernel and no device code of its own (macros, types, `__host__
        __device__` helpers: KernelFacts.device_code) that project sources with kernels include, with a
        per-file finding in the same task and context: a site of the first including kernel file's
        finding by path (the nearest includer first, going up through headers that include it). Its
        macros and helpers expand into those kernels and are ported with them. A header with device
        code (a `__device__` function, inline PTX, intrinsics) stays an item: that is work of its own."""
        kernel_file = self.kernel_files(task_of, order)
        included_by: dict[str, set[str]] = {}
        for src, targets in (self.reach.includes if self.reach is not None else {}).items():
            for t in targets:
                included_by.setdefault(t, set()).add(src)
        out: dict[int, int] = {}
        for i in order if kernel_file else ():
            f = self.findings[i]
            k = f.kernel_facts
            if self.cuda_file(f) and f.path.endswith(HEADER_SUFFIXES) and not (k.kernels or k.device_code or k.prebuilt):
                hit = self.nearest_kernel_file(i, included_by, task_of, kernel_file)
                if hit is not None:
                    out[i] = hit
        return out

    def kernel_files(self, task_of: dict[int, str], order: list[int]) -> dict[tuple[str, str, str], int]:
        """(task, context, path) -> the first per-file finding of each CUDA source with kernels of its
        own (not prebuilt): the primaries launchers and support headers fold into."""
        out: dict[tuple[str, str, str], int] = {}
        for i in order:
            f = self.findings[i]
            if self.cuda_file(f) and f.kernel_facts.kernels and not f.kernel_facts.prebuilt:
                out.setdefault((task_of[i], f.context, f.path), i)
        return out

    def nearest_kernel_file(self, i: int, edges: Mapping[str, Iterable[str]], task_of: dict[int, str],
                            kernel_file: dict[tuple[str, str, str], int]) -> int | None:
        """The kernel file finding (kernel_files) nearest to finding i's file along `edges` (the project
        includes, or their reverse), one depth at a time, the first by path within a depth; same task
        and context as i. None when no kernel file is reached."""
        f = self.findings[i]
        seen, level = {f.path}, [f.path]
        while level:
            level = sorted({t for p in level for t in edges.get(p, ()) if t not in seen})
            seen.update(level)
            hits = [kernel_file[key] for p in level if (key := (task_of[i], f.context, p)) in kernel_file]
            if hits:
                return hits[0]
        return None

    def library_package(self, f: Finding) -> str | None:
        """The catalog module a GPU-library finding imports or calls (`stk` for `from stk.backend.autocast
        import custom_bwd`, `torch.nn.attention.flex_attention` for FlexAttention): the longest of its
        rule's import modules that its name is or lies under; None for a setting (a keyword)."""
        rule = self.rule(f)
        if f.category != "gpu-library" or rule is None:
            return None
        return max((m for match in rule.match if match.kind == "import" for m in match.modules
                    if f.symbol == m or f.symbol.startswith(m + ".")), key=len, default=None)

    def library_imports(self, order: list[int], task_of: dict[int, str]) -> dict[int, int]:
        """Import lines of one GPU-only library in one task (and context), across files: the port
        replaces that library once (a swap, a shim or a PyTorch path) and every further file's import
        follows it, so each further import line is a site of one of them. Uses (calls into the library)
        are never folded, nor different catalog modules of one rule (`flash_attn`, `flash_attn_2_cuda`),
        nor imports under two default settings of a switch (`attn_impl`, `loss`: two switches).
        The primary is the line that needs the library most: an import with no fallback before a
        guarded one, one in a file that also calls the library before one that only names it (a type,
        a re-export), then the first in path and line order."""
        groups: dict[tuple, list[int]] = {}
        used: set[tuple] = set()  # (group, path): a file that calls the library
        for i in order:
            f = self.findings[i]
            package = self.library_package(f)
            if package is None:
                continue
            key = (task_of[i], package, f.context, f.details.get("feature"), f.details.get("default_option"))
            if f.snippet.startswith(("import ", "from ")):
                groups.setdefault(key, []).append(i)
            else:
                used.add((key, f.path))
        out: dict[int, int] = {}
        for key, found in groups.items():
            first = min(found, key=lambda i: (self.findings[i].fallback, (key, self.findings[i].path) not in used))
            out.update((i, first) for i in found if i != first)
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


_BINDING_SUFFIX = re.compile(r"(?:cuda|kernels?|gpu|cu)+$")


def _binding_stem(path: str) -> tuple[str, str]:
    """(folder, stem) of a native source as bindings pair with kernels: the stem lower-cased, without
    separators and trailing `cuda`/`kernel`/`gpu` words (`AdamCUDA.cu` -> adam, `rw_cuda.cu` -> rw)."""
    p = PurePosixPath(path)
    stem = re.sub(r"[^a-z0-9]", "", p.stem.lower())
    return str(p.parent), _BINDING_SUFFIX.sub("", stem) or stem


def _pairs(folder: str, stem: str, kernel_folder: str, kernel_stem: str) -> bool:
    """A binding (folder, stem) and a kernel source (folder, stem) that go together (bindings)."""
    near = kernel_folder == folder or PurePosixPath(kernel_folder).parent == PurePosixPath(folder)
    return near and (kernel_stem == stem or (len(stem) >= 4 and kernel_stem.startswith(stem)))


def _unique(values) -> str | None:
    vals = sorted(set(values))
    return vals[0] if len(vals) == 1 else None


def _group_rules(fs: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in fs:
        out.setdefault(f.rule, []).append(f)
    return out


def op_name(f: Finding) -> str:
    """`torch.fft.rfft` -> rfft, `.sort()` -> sort, and a traced `aten::scatter_reduce.two` ->
    scatter_reduce (the op, not its overload): one task per distinct op, whatever the spelling."""
    symbol = (f.symbol or f.rule).split("(")[0]
    if symbol.startswith(("aten::", "aten.")):
        return symbol.replace("::", ".").split(".")[1] or f.rule
    name = symbol.strip(".").split(".")[-1]
    return name or f.rule


# ------------------------------------------------------------------------------------------ estimate


def estimate(findings: list[Finding], catalog: Catalog, reach: "Reach | None" = None,
             keep: bool = False, references: frozenset[str] = frozenset(), target: str = "",
             compiled: bool = True, assume_fixed: bool = False,
             cpu_twins: frozenset[str] = frozenset()) -> tuple[list[Task], Estimate]:
    """Tasks and the estimate for the findings on the training path (indices refer to `findings`).
    `keep`: an opt-in feature costed as kept on Trainium (a library it uses is ported, not gated)."""
    planner = _Planner(findings, catalog, reach, keep, references, target, compiled, assume_fixed, cpu_twins)
    planner.group()
    planner.cost()
    tasks = planner.tasks()
    for f in findings:
        f.details.pop("part_of", None)
    for i, j in sorted(planner.sites().items()):
        findings[i].details["part_of"] = findings[j].site_name
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
