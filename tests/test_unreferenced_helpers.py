"""A function nothing in the repository names is not on the training path.

With a training entry, calls are followed from it and a helper no call reaches is off-path already.
In library mode every function nothing calls is the library's surface, since a user may call it;
but a user does not call a library's private functions, so a private top-level function that no
Python file, re-export, `__all__`, string or config names, and no decorator registers, is dead code:
off-path, with the reason. Real scans of small trees, no mocks.
"""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def scan(root: Path, **kw):
    return run_scan(Settings(root=root, cache=False, **kw)).report


def by_scope(report) -> dict[str, tuple[str, str]]:
    return {f.scope: (f.context, f.details.get("context_reason", "")) for f in report.findings + report.off_path}


def _library(tmp_path: Path, extra: dict[str, str] | None = None, init: str = "") -> Path:
    files = {
        "kern/__init__.py": init,
        "kern/ops.py": """\
            import torch

            def run(x):
                return _used(x)

            def _used(x):
                return x.cuda()

            def _old_path(x):
                return _older(x.cuda())

            def _older(x):
                return _older(x.cuda()) if x.dim() > 9 else x  # names itself: still nothing else does

            def legacy(x):
                return x.cuda()  # public: a user may call it
            """,
    }
    files.update(extra or {})
    return tree(tmp_path, files)


def test_a_private_function_nothing_names_is_off_path_in_library_mode(tmp_path):
    report = scan(_library(tmp_path))
    assert report.extra["reach"]["mode"] == "library"
    got = by_scope(report)
    assert got["_old_path"][0] == "off-path"
    assert "defined but never referenced in the repository: `_old_path`" in got["_old_path"][1]
    assert got["_older"][0] == "off-path"  # only a dead helper (and itself) names it
    assert got["_used"][0] == "step"  # called by the library's surface
    assert got["legacy"][0] == "step"  # public: the library's surface


def test_a_private_function_named_anywhere_keeps_the_module_answer(tmp_path):
    root = _library(tmp_path, {
        "kern/dispatch.py": """\
            import kern.ops as ops
            def pick(kind):
                return getattr(ops, "_old_path")
            """,
    })
    assert by_scope(scan(root))["_old_path"][0] == "step"  # a string names it: getattr may call it


def test_a_private_function_only_tests_name_is_off_path_in_library_mode(tmp_path):
    # a pure-PyTorch reference the tests compare the kernel against (gsplat's `_isect_tiles`): no
    # library code calls it, a user does not call a private function; a test's call is no training
    root = _library(tmp_path, {
        "tests/test_ops.py": "from kern.ops import _old_path, legacy\n\ndef test_it():\n    assert _old_path(1) == legacy(1)\n",
        "benchmarks/bench.py": "from kern import ops\nops._older(1)\n",
    })
    got = by_scope(scan(root))
    assert got["_old_path"][0] == "off-path"
    assert got["_old_path"][1].startswith("named only by tests and benchmarks (tests/test_ops.py): `_old_path`")
    assert got["_older"][0] == "off-path" and "benchmarks/bench.py" in got["_older"][1]
    assert got["legacy"][0] == "step"  # public: the library's surface, whoever else calls it
    assert got["_used"][0] == "step"


def test_all_reexport_config_and_decorator_keep_a_private_function(tmp_path):
    root = _library(tmp_path / "a", {"kern/names.py": '__all__ = ["_old_path"]\nfrom kern.ops import _old_path\n'})
    assert by_scope(scan(root))["_old_path"][0] == "step"
    root = _library(tmp_path / "b", init="from .ops import _old_path\n")
    assert by_scope(scan(root))["_old_path"][0] == "step"  # re-exported by the package
    root = _library(tmp_path / "c", {"configs/model.yaml": "model:\n  _target_: kern.ops._old_path\n"})
    assert by_scope(scan(root))["_old_path"][0] == "step"  # Hydra builds it by name
    root = tree(tmp_path / "d", {
        "kern/__init__.py": "",
        "kern/ops.py": """\
            import torch
            HANDLED = {}
            def implements(op):
                def wrap(fn):
                    HANDLED[op] = fn
                    return fn
                return wrap

            @implements("add")
            def _add(x):
                return x.cuda()
            """,
    })
    assert by_scope(scan(root))["_add"][0] == "step"  # a decorator registers it


def test_with_an_entry_a_helper_no_call_reaches_is_off_path(tmp_path):
    # application mode needed no new rule: calls are followed from the entry, so a public helper
    # nothing names is unreached; this guards that answer
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            from utils import setup
            model = setup(torch.nn.Linear(2, 2))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(3):
                loss = model(torch.ones(2)).sum()
                loss.backward()
                opt.step()
            """,
        "utils.py": """\
            import torch
            def setup(m):
                return m
            def set_cuda_device_index(idx):
                torch.cuda.set_device(idx)
            """,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "entries"
    assert by_scope(report)["set_cuda_device_index"][0] == "off-path"


def test_a_triton_kernel_only_a_dead_launcher_launches_is_dead_with_it(tmp_path):
    # mamba-ssm's `_chunk_scan_fwd_kernel_wip`: `@triton.jit` compiles a function and registers
    # nothing, so a private kernel only a private function nothing names launches is dead code too;
    # a kernel the library's surface launches, and a decorator that may register, keep their answer
    root = tree(tmp_path, {
        "kern/__init__.py": "",
        "kern/ops.py": """\
            import triton
            import triton.language as tl
            from kern.registry import register

            @triton.autotune(configs=[], key=["n"])
            @triton.jit
            def _fwd_kernel(x, n):
                tl.store(x, tl.load(x))

            @triton.jit
            def _fwd_kernel_wip(x, n):
                tl.store(x, tl.load(x))

            @register("wip")
            @triton.jit
            def _registered_kernel(x, n):
                tl.store(x, tl.load(x))

            def run(x):
                _fwd_kernel[(1,)](x, 4)

            def _run_wip(x):
                _fwd_kernel_wip[(1,)](x, 4)
            """,
        "kern/registry.py": "def register(name):\n    return lambda f: f\n",
    })
    report = scan(root)
    kernels = {f.line: (f.context, f.details.get("context_reason", "")) for f in report.findings + report.off_path
               if f.rule == "NR1801"}  # a kernel's finding sits on its `@triton.jit` line, at module level
    assert kernels[10][0] == "off-path" and "`_fwd_kernel_wip`" in kernels[10][1]
    assert by_scope(report)["_run_wip"][0] == "off-path"
    assert kernels[6][0] == "step"  # launched by the library's surface
    assert kernels[15][0] != "off-path"  # a decorator of the library's own registers it (by name: opt-in)
