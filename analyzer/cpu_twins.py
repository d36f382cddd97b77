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
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

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
