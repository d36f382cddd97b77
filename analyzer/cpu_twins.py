"""CUDA sources whose op the same extension also implements for the CPU.

Graph and sparse extensions (torch-cluster, torch-sparse, torch-scatter) ship each op twice,
`csrc/cuda/knn_cuda.cu` beside `csrc/cpu/knn_cpu.cpp`, and build CPU-only when no CUDA is found.
On Trainium such an op runs on the host from that CPU build (its outputs are often of
data-dependent size anyway): the port is one switch for the extension (build it CPU-only, place
its calls on the host, validate against the CUDA results), then NKI only where a profile asks, not
a kernel rewrite per op. An op PyTorch has (torch-scatter's `scatter`, `segment_csr`) is not sent
to the host: effort.py switches it to that op on the device. Twins are paired by name: the same
stem once `_cuda`/`_gpu`/`_kernel(s)` and `_cpu` are dropped, in one folder or in sibling `cuda/`
(`gpu/`) and `cpu/` folders. A binding file (`csrc/knn.cpp`, dispatching to both) is not a CPU
implementation: only a `cpu/` folder or a `_cpu` name says so.

The Python wrapper can hold the host path instead: torch-cluster's `nearest` calls
`torch.ops.torch_cluster.nearest` only `if x.is_cuda:` and computes the result itself (SciPy on the
host) in the `else`, with no `csrc/cpu` twin. A compiled op (`torch.ops.<lib>.<op>`, or a function of
an extension module the tree builds) that the project's Python calls only in the CUDA branch of a
device check (codefacts.py `cuda_check`: `x.is_cuda`, `torch.cuda.is_available()`, `device.type ==
"cuda"`, locals from them) whose other branch computes a result without calling it and without
raising (codefacts.py `host_paths`) has a host path: its CUDA sources join the twins, so the op is
one more of the extension's `cpu_ops`. An `else` that raises, asserts, exits or calls the same op is
no path. The op pairs with a CUDA source by the source's stem (`nearest` ~ `nearest_cuda.cu`) or by
the op of every kernel in it (effort.op_stem: `nearest_kernel`). This rule was written after the
held-out torch-cluster miss (docs/effort-model.md §6).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import PurePosixPath

from .effort import op_stem
from .sources.codefacts import regions_out

CUDA_SUFFIXES = frozenset({".cu"})
CPU_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx"})
_DEVICE_FOLDERS = {"cuda": "cuda", "gpu": "cuda", "cpu": "cpu"}
_NOISE = ("_cuda", "_gpu", "_kernels", "_kernel", "_cpu")


def _stem(name: str) -> str:
    stem = name.lower()
    changed = True
    while changed:
        changed = False
        for noise in _NOISE:
            if stem.endswith(noise) and len(stem) > len(noise):
                stem, changed = stem[: -len(noise)], True
    return stem


def _key(path: PurePosixPath) -> tuple[str, str, str] | None:
    """(folder with the device folder wildcarded, op stem, side) or None."""
    suffix = path.suffix.lower()
    side = "cuda" if suffix in CUDA_SUFFIXES else "cpu" if suffix in CPU_SUFFIXES else ""
    if not side:
        return None
    parent = path.parent
    folder_side = _DEVICE_FOLDERS.get(parent.name.lower())
    named_cpu = path.stem.lower().endswith("_cpu")
    if side == "cpu" and folder_side != "cpu" and not named_cpu:
        return None  # a binding or host file, not a CPU implementation
    where = str(parent.parent / "*") if folder_side else str(parent)
    return where, _stem(path.stem), side


def cpu_twins(paths: Iterable[str]) -> frozenset[str]:
    """The CUDA source paths (of `paths`) with a CPU implementation of the same op beside them."""
    cuda: dict[tuple[str, str], list[str]] = {}
    cpu: set[tuple[str, str]] = set()
    for p in paths:
        key = _key(PurePosixPath(p))
        if key is None:
            continue
        where, stem, side = key
        if side == "cuda":
            cuda.setdefault((where, stem), []).append(p)
        else:
            cpu.add((where, stem))
    return frozenset(p for k, ps in cuda.items() if k in cpu for p in ps)


# `torch.ops` namespaces of PyTorch itself: their ops are PyTorch's, never an extension's
_TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "_c10d_functional", "c10d", "quantized", "profiler"})


def compiled_op(ref: str, modules: Collection[str]) -> str | None:
    """The op a code-facts reference calls when it is a compiled op: `q:torch.ops.lib.nearest(.default)`
    -> nearest, `q:graphlib._C.knn` -> knn when `graphlib._C` is an extension module the tree builds."""
    if not ref.startswith("q:"):
        return None
    parts = ref[2:].split(".")
    if len(parts) >= 4 and parts[:2] == ["torch", "ops"] and parts[2] not in _TORCH_NAMESPACES:
        return parts[3]
    for i in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:i]) in modules:
            return parts[i]
    return None


def host_path_ops(code: Iterable[Mapping], modules: Collection[str] = ()) -> frozenset[str]:
    """The compiled ops (their stems) that some file's Python calls in the CUDA branch of a device check
    and not in its other branch, which computes a result itself (`code`: each file's code facts)."""
    out: set[str] = set()
    for facts in code:
        pairs = facts.get("host_paths")
        if not pairs:
            continue
        regions = facts.get("regions") or []
        calls = [(op, region) for refs in (facts.get("refs") or {}).values() for ref, region in refs
                 if (op := compiled_op(ref, modules)) is not None]

        def within(region: int, top: int) -> bool:
            return any(i == top for i, _r in regions_out(regions, region))

        for cuda_branch, other in pairs:
            on_cuda = {op for op, r in calls if within(r, cuda_branch)}
            elsewhere = {op for op, r in calls if within(r, other)}
            out.update(_stem(op) for op in on_cuda - elsewhere)
    return frozenset(out)


def host_path_twins(kernels: Mapping[str, Iterable[str]], ops: Collection[str]) -> frozenset[str]:
    """The CUDA sources (`kernels`: path -> its kernel names) of ops with a host path: named for the op
    (`nearest_cuda.cu`), or every kernel in them implementing it (`nearest_kernel`)."""
    if not ops:
        return frozenset()
    out = set()
    for path, names in kernels.items():
        p = PurePosixPath(path)
        if p.suffix.lower() not in CUDA_SUFFIXES:
            continue
        names = list(names)
        if _stem(p.stem) in ops or (names and all(_stem(op_stem(n, path)) in ops for n in names)):
            out.add(path)
    return frozenset(out)


def wrapper_twins(results, reach) -> frozenset[str]:
    """host_path_twins for a scan: the CUDA sources whose op the project's Python computes itself off
    CUDA (`results`: the per-file results; `reach`: its extensions name the modules the tree builds)."""
    modules = {e.name for e in getattr(reach, "extensions", ()) if e.name and not any(c in e.name for c in "*?[")}
    ops = host_path_ops((r.facts.get("code") or {} for r in results), modules)
    if not ops:
        return frozenset()
    kernels: dict[str, list[str]] = {r.rel: [] for r in results}
    for r in results:
        for f in r.findings:
            names = kernels.setdefault(f.path, [])
            for n in f.kernel_facts.kernel_names:
                if n not in names:
                    names.append(n)
    return host_path_twins(kernels, ops)
