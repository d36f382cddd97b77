"""A CUDA probe that is its own guard (docs/contexts.md, "A probe that is its own guard"): an early
return inside a `try`, a local every binding of which is False off CUDA, a query that raises off
CUDA under a handler that answers instead, `torch.cuda.is_initialized()`, and an imported alias of
a check. Small trees scanned through the whole pipeline; the probe that picks the training device
and the probe that raises without CUDA stay must-port."""

from __future__ import annotations

import pytest

from scanning import write_tree as tree
from test_cuda_checks import scan

TRAIN = """\
    import torch
    from helpers import work

    def main():
        model = torch.nn.Linear(4, 4).to(work())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.ones(2, 4)).sum().backward()
        opt.step()

    if __name__ == "__main__":
        main()
    """

FORMS = {
    # a patch that does nothing without CUDA: the early return sits in a `try`, the rest of the
    # function (after handlers that only return) runs only on CUDA, an opt-in import among it
    "return in try": ("""\
        import importlib
        import torch

        def work():
            if importlib.util.find_spec("vllm") is None:
                return
            try:
                if not torch.cuda.is_available():
                    return
                major, minor = torch.cuda.get_device_capability(0)
                if major != 10:
                    return
            except Exception:
                return
            try:
                import vllm
            except ImportError:
                return
            vllm.patch()
        """, [8, 10]),
    # a local set to False first, then from the check in a `try`, False again in its handler
    "false off cuda local": ("""\
        import torch

        def work():
            cc = None
            cuda_ok = False
            try:
                cuda_ok = torch.cuda.is_available()
                if cuda_ok:
                    cc = torch.cuda.get_device_capability()
            except (RuntimeError, AssertionError):
                cuda_ok, cc = False, None
            return None if cc is None else "cpu"
        """, [9]),
    # a capability query whose failure off CUDA is caught and answered with False
    "caught query": ("""\
        import torch

        def work():
            try:
                cc = torch.cuda.get_device_capability()
                return cc >= (9, 0)
            except (RuntimeError, AssertionError):
                return False
        """, [5]),
    # False off CUDA: the raise behind it never fires on Trainium
    "is_initialized": ("""\
        import torch

        def work():
            if torch.cuda.is_initialized():
                raise RuntimeError("cannot fork after CUDA was initialized")
            return "cpu"
        """, [4]),
    # `from torch.cuda import is_available as cuda_available`: calling the name asks the check
    "aliased check": ("""\
        from torch.cuda import get_device_name as accel_name
        from torch.cuda import is_available as cuda_available

        def work():
            name = accel_name(None) if cuda_available() else "N/A"
            print(name)
            return "cpu"
        """, [5]),
}


def contexts(report, path="helpers.py") -> dict[int, str]:
    return {f.line: f.context for f in report.findings + report.off_path if f.path == path and f.rule == "NR1005"}


@pytest.mark.parametrize("form", list(FORMS), ids=list(FORMS))
def test_a_probe_that_guards_itself_is_no_concern(tmp_path, form):
    helpers, lines = FORMS[form]
    tree(tmp_path, {"train.py": TRAIN, "helpers.py": helpers})
    found = contexts(scan(tmp_path))
    for line in lines:
        assert found.get(line) == "opt-in", (form, line, found)


NEGATIVE = {
    # the probe picks the training device: on Trainium it silently trains on the CPU
    "device choice": ("""\
        import torch

        def work():
            device = "cuda" if torch.cuda.is_available() else "cpu"
            return device
        """, 4),
    # CUDA is required: the function raises on Trainium
    "raise without cuda": ("""\
        import torch

        def work():
            if not torch.cuda.is_available():
                raise RuntimeError("needs a GPU")
            return "cuda"
        """, 4),
    # the early return in a `try` skips a device choice the training needs: the port adds Neuron there
    "return in try before a device choice": ("""\
        import torch

        def work():
            try:
                if not torch.cuda.is_available():
                    return "cpu"
                torch.cuda.set_device(0)
            except Exception:
                return "cpu"
            return torch.device("cuda", torch.cuda.current_device())
        """, 5),
    # a handler that gives up: the query is required
    "query re-raised": ("""\
        import torch

        def work():
            try:
                cc = torch.cuda.get_device_capability()
            except (RuntimeError, AssertionError):
                raise RuntimeError("needs a GPU")
            return "cpu" if cc else "cpu"
        """, 5),
    # a handler that catches only what a CUDA build without a driver raises, not a CPU build's error
    "narrow handler": ("""\
        import torch

        def work():
            try:
                cc = torch.cuda.get_device_capability()
            except RuntimeError:
                cc = None
            return "cpu" if cc else "cpu"
        """, 5),
    # a local set from the check and later from something else: not False off CUDA
    "local rebound": ("""\
        import os
        import torch

        def work():
            use = torch.cuda.is_available()
            if os.environ.get("FORCE"):
                use = True
            if use:
                print(torch.cuda.get_device_name(0))
            return "cpu"
        """, 9),
}


@pytest.mark.parametrize("form", list(NEGATIVE), ids=list(NEGATIVE))
def test_a_probe_that_decides_the_device_or_fails_stays_must_port(tmp_path, form):
    helpers, line = NEGATIVE[form]
    tree(tmp_path, {"train.py": TRAIN, "helpers.py": helpers})
    found = contexts(scan(tmp_path))
    assert found.get(line) == "step", (form, found)


BATCH = """\
import torch

class Batch:
    def __init__(self, x):
        self.x = x

    def cuda(self, device=None):
        \"\"\"Move every tensor to a CUDA device.\"\"\"
        device = device or torch.device("cuda")
        self.x = self.x.cuda(device)
        return self

    def to(self, device):
        self.x = self.x.to(device)
        return self

def scale(x):
    return x.cuda() * 2
"""


def test_a_types_own_cuda_method_runs_only_when_a_caller_asks_for_cuda(tmp_path):
    # PyG's `Data.cuda()`, a Module mixin's `cuda` override: the body runs when somebody calls
    # `.cuda()` (the caller's finding); on Trainium nobody does. Other CUDA plumbing stays.
    tree(tmp_path, {"pkg/__init__.py": "from .data import Batch, scale\n", "pkg/data.py": BATCH})
    report = scan(tmp_path)
    assert report.extra["reach"]["mode"] == "library"
    got = {(f.rule, f.line): (f.context, f.gate or "") for f in report.findings + report.off_path}
    assert got[("NR1004", 9)][0] == got[("NR1001", 10)][0] == "opt-in"
    assert "Batch.cuda()" in got[("NR1001", 10)][1]
    assert got[("NR1001", 18)] == ("step", "")
