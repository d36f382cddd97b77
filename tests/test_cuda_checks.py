"""A value derived from a CUDA check is a CUDA check, and a CUDA-only branch that nothing after it
needs is skipped on Trainium (docs/contexts.md, "CUDA-only code"). Small trees scanned through the
whole pipeline; contexts and fallbacks are asserted, not figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def found(report) -> dict[tuple[str, int, str], object]:
    return {(f.path, f.line, f.rule): f for f in report.findings + report.off_path}


TRAIN = """\
    import torch
    from model import Net

    def main():
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.ones(2, 4)).sum()
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        main()
    """

CUDA_ATTN = """\
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _double(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

    def fused(x):
        y = x.half()
        _double[(1,)](y, y.numel(), BLOCK=128)
        return y.float()
    """

# The ways a project defaults an option to "is CUDA there": each picks the kernel path on a GPU only.
DERIVED = {
    "default helper": "use_cuda_kernel = default(use_cuda_kernel, torch.cuda.is_available())",
    "conditional": "use_cuda_kernel = use_cuda_kernel if use_cuda_kernel is not None else torch.cuda.is_available()",
    "or": "use_cuda_kernel = use_cuda_kernel or torch.cuda.is_available()",
    "conjunction": "use_cuda_kernel = torch.cuda.is_available() and use_cuda_kernel is not False",
}


@pytest.mark.parametrize("line", list(DERIVED.values()), ids=list(DERIVED))
def test_an_option_defaulting_to_a_cuda_check_picks_the_pytorch_path_by_itself(tmp_path, line):
    model = f"""\
        import torch

        def default(v, d):
            return v if v is not None else d

        class Net(torch.nn.Module):
            def __init__(self, use_cuda_kernel=None):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)
                {line}
                self.use_cuda_kernel = use_cuda_kernel

            def forward(self, x):
                if self.use_cuda_kernel:
                    from cuda_attn import fused
                    out = fused(self.proj(x))
                else:
                    out = torch.relu(self.proj(x))
                return out
        """
    report = scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model, "cuda_attn.py": CUDA_ATTN}))
    got = found(report)
    half = got[("cuda_attn.py", 11, "NR1205")]
    assert half.context == "opt-in" and half.details["feature"] == "cuda"  # Trainium never runs the kernel path
    kernels = [f for f in report.findings + report.off_path if f.path == "cuda_attn.py" and f.category == "triton"]
    # the kernels of that path never run on Trainium either (a device check, not `if HAS_TRITON:`)
    assert kernels and all(f.context != "step" for f in kernels)
    assert got[("cuda_attn.py", 5, "NR1801")].context == "opt-in" and got[("cuda_attn.py", 5, "NR1801")].details["feature"] == "cuda"


def test_a_parameter_defaulting_to_a_cuda_check_is_one(tmp_path):
    model = """\
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x, use_cuda=torch.cuda.is_available()):
                if use_cuda:
                    torch.cuda.synchronize()
                    y = self.proj(x).half()
                else:
                    y = self.proj(x)
                return y.float()
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model})))
    assert got[("model.py", 10, "NR1007")].context == "opt-in"


def test_an_attribute_set_once_from_a_cuda_check_is_one_wherever_the_class_tests_it(tmp_path):
    model = """\
        import logging
        import torch

        logger = logging.getLogger(__name__)

        class Net(torch.nn.Module):
            def __init__(self, cpu=False, world=1):
                super().__init__()
                self.cuda = torch.cuda.is_available() and not cpu
                if self.cuda:
                    self.device = torch.device("cuda")
                else:
                    self.device = torch.device("cpu")
                if self.cuda and world > 1:
                    self.buf = torch.cuda.DoubleTensor(world)
                else:
                    self.buf = None
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                if self.cuda and torch.cuda.get_device_capability(0)[0] >= 7:
                    logger.info("this GPU may support --fp16")
                return self.proj(x)
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model})))
    assert got[("model.py", 11, "NR1004")].context == "step"  # picks the training device: the port adds Neuron here
    assert got[("model.py", 15, "NR1016")].context == "opt-in"  # off without CUDA (the else sets None)
    assert got[("model.py", 21, "NR1005")].context == "opt-in"  # a probe answered only on a GPU


def test_a_cuda_only_branch_nothing_needs_is_skipped_and_a_device_choice_is_not(tmp_path):
    model = """\
        import torch

        try:
            from torch.nn.attention.flex_attention import flex_attention
            if torch.cuda.is_available():
                flex_attention = torch.compile(flex_attention)
        except ImportError:
            flex_attention = None

        class Encoding(torch.nn.Module):
            def __init__(self, warmup=True):
                super().__init__()
                self.cache = {}
                if warmup and torch.cuda.is_available():
                    device = torch.device("cuda")
                    for size in (8, 16):
                        self._pe(device, size)

            def _pe(self, device, size):
                self.cache[size] = torch.zeros(size, device=device)

        class Attend(torch.nn.Module):
            def __init__(self, flash=True):
                super().__init__()
                self.cuda_config = None
                if not torch.cuda.is_available() or not flash:
                    return
                props = torch.cuda.get_device_properties(torch.device("cuda"))
                if props.major >= 8:
                    print("A100: flash attention")
                    self.cuda_config = (True, False)

        def pick_device():
            device = "cpu"
            if torch.cuda.is_available():
                device = "cuda"
            return device

        def capabilities():
            return [torch.cuda.get_device_capability(i) for i in range(0)] + [
                torch.cuda.get_device_name(i) for i in range(1)]

        def names():
            out = []
            for i in range(torch.cuda.device_count()):
                out.append(torch.cuda.get_device_name(i))
            return out

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.enc, self.attend = Encoding(), Attend()
                self.proj = torch.nn.Linear(4, 4).to(pick_device())
                print(names())

            def forward(self, x):
                return flex_attention(x, x, x) + place(self.proj, x.device)(x)

        def place(module, device):
            net = module
            if torch.cuda.is_available():
                net = net.to(device).half()
            return net
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model})))
    assert got[("model.py", 4, "NR1935")].context == "step"  # FlexAttention itself is the concern
    for line, rule in ((5, "NR1005"), (6, "NR1304"),  # a compile of what exists without it
                       (14, "NR1005"), (15, "NR1004"),  # a cache warm-up
                       (26, "NR1005"), (28, "NR1005"),  # the rest of __init__ only refines cuda_config
                       (45, "NR1005"), (46, "NR1005")):  # a loop over CUDA's devices
        f = got[("model.py", line, rule)]
        assert f.context == "opt-in" and f.details["feature"] == "cuda", (line, rule, f.context)
    assert got[("model.py", 36, "NR1004")].context == "step"  # the training device's choice stays
    assert got[("model.py", 62, "NR1205")].context == "step"  # so does a move of what the code goes on using


def test_a_module_the_library_imports_only_lazily_follows_its_importer(tmp_path):
    """In library mode a module imported only inside a function (the CUDA path's lazy import) is no
    surface of its own: its module code (`import triton`) runs with the CUDA path, an automatic fallback."""
    model = """\
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                if x.is_cuda:
                    from .cuda_attn import fused
                    out = fused(self.proj(x))
                else:
                    out = torch.relu(self.proj(x))
                return out
        """
    root = tree(tmp_path, {"pkg/__init__.py": "from .model import Net\n", "pkg/model.py": model,
                           "pkg/cuda_attn.py": CUDA_ATTN})
    got = found(scan(root))
    assert got[("pkg/cuda_attn.py", 2, "NR1805")].context == "opt-in"  # imported only on the CUDA path
    assert got[("pkg/cuda_attn.py", 5, "NR1801")].context == "opt-in"


@pytest.mark.parametrize("moved", [True, False], ids=["moved-in-forward", "not-moved"])
def test_a_cuda_move_the_forward_undoes_is_skipped(tmp_path, moved):
    """`self.freqs = freqs.to("cuda") if torch.cuda.is_available() else freqs` loses nothing on
    Trainium when the forward moves `self.freqs` to its input's device anyway; without that move the
    tensor would stay on the CPU and the line is a concern."""
    move = "self.freqs = self.freqs.to(x.device)" if moved else "pass"
    model = f"""\
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                freqs = torch.arange(4.0)
                self.freqs = freqs.to("cuda") if torch.cuda.is_available() else freqs

            def forward(self, x):
                {move}
                return x * self.freqs
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model})))
    assert got[("model.py", 7, "NR1002")].context == ("opt-in" if moved else "step")


PROBE = """\
    import os
    import torch


    def _is_triton_available():
        if os.environ.get("PKG_ENABLE_TRITON", "0") == "1":
            return True
        if not torch.cuda.is_available():
            return False
        if torch.cuda.get_device_capability("cuda") < (8, 0):
            return False
        try:
            import triton  # noqa
            return True
        except ImportError:
            return False


    def pick_device():
        if not torch.cuda.is_available():
            return None
        return torch.device("cuda")


    def should_use_triton(x):
        if not int(os.getenv("PKG_TILED_TRITON", "1")):
            return False
        if not _is_triton_available():
            return False
        return torch.cuda.get_device_capability(x.device) >= (8, 0)
    """


def test_a_function_that_answers_false_without_cuda_is_a_cuda_check_in_other_files(tmp_path):
    """A probe function (False whenever CUDA is absent, an environment override aside) makes the
    tests that call it CUDA checks wherever they are: the kernel path behind `if
    pkg._is_triton_available():` never runs on Trainium, and the probe's own `is_available()` is no
    concern. A function that returns a device is no probe: its caller's test decides nothing."""
    model = """\
        from typing import TYPE_CHECKING

        import torch

        import pkg.probe
        from pkg.probe import _is_triton_available, pick_device, should_use_triton

        if TYPE_CHECKING or _is_triton_available():
            torch.backends.cuda.matmul.allow_tf32 = True
        else:
            pass


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                if pkg.probe._is_triton_available():
                    from .cuda_attn import fused
                    out = fused(self.proj(x))
                else:
                    out = torch.relu(self.proj(x))
                if pick_device():
                    torch.cuda.synchronize()
                if should_use_triton(x):
                    torch.cuda.synchronize()
                return out
        """
    root = tree(tmp_path, {"pkg/__init__.py": "from .model import Net\n", "pkg/probe.py": PROBE,
                           "pkg/model.py": model, "pkg/cuda_attn.py": CUDA_ATTN})
    got = found(scan(root))
    for line, rule in ((8, "NR1005"), (10, "NR1005")):  # the probe's own questions
        f = got[("pkg/probe.py", line, rule)]
        assert f.context == "opt-in" and f.details["feature"] == "cuda", (line, rule, f.context)
        assert "probe function" in f.details["context_reason"]
    assert got[("pkg/probe.py", 20, "NR1005")].context == "step"  # returns a device: not a probe
    assert got[("pkg/model.py", 9, "NR1014")].context == "opt-in"  # `TYPE_CHECKING or` the probe: only on CUDA
    assert got[("pkg/cuda_attn.py", 5, "NR1801")].context == "opt-in"  # imported and called only there
    assert got[("pkg/model.py", 26, "NR1007")].context == "step"  # `if pick_device():` is no CUDA check
    # a function that asks a probe first (`if not _is_triton_available(): return False`) is one too
    assert got[("pkg/probe.py", 30, "NR1005")].context == "opt-in"
    assert got[("pkg/model.py", 28, "NR1007")].context == "opt-in"


@pytest.mark.parametrize("src, probe", [
    ("def f():\n    return HAVE_TRITON and torch.cuda.is_available()\n", True),
    ("def f():\n    '''doc'''\n    ok = 1\n    if not torch.cuda.is_available():\n        return False\n"
     "    return torch.cuda.get_device_capability()[0] >= 8\n", True),
    ("def f():\n    if HAS_TPU:\n        return True\n    if not torch.cuda.is_available():\n        return False\n"
     "    return True\n", False),  # a flag before the check may answer True without CUDA
    ("def f():\n    if not torch.cuda.is_available():\n        return False\n    return torch.device('cuda')\n", False),
    ("def f():\n    if not torch.cuda.is_available():\n        return True\n    return False\n", False),
    ("def f():\n    return torch.cuda.is_available() or HAS_XLA\n", False),
], ids=["one-return", "early-return", "flag-first", "returns-device", "true-off-cuda", "or-another"])
def test_what_a_cuda_probe_function_is(src, probe):
    import ast

    from neuron_ready.sources.codefacts import cuda_probe

    assert cuda_probe(ast.parse(src).body[0]) is probe


def test_a_capability_flag_keeps_its_kernels_a_fallback_and_a_decorator_runs_with_its_function(tmp_path):
    """`if HAS_TRITON:` may hold on a Trainium host (Triton installs from PyPI): its kernels stay a
    fallback to check. `@autocast("cuda", enabled=False)` acts where the function it decorates runs:
    on the CUDA path alone, it is that path's."""
    model = """\
        import torch
        from torch.amp import autocast

        try:
            import triton  # noqa
            HAS_TRITON = True
        except ImportError:
            HAS_TRITON = False


        @autocast("cuda", enabled=False)
        def cuda_path(x):
            return x * 2


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                if HAS_TRITON:
                    from .cuda_attn import fused
                    out = fused(self.proj(x))
                else:
                    out = torch.relu(self.proj(x))
                if x.is_cuda:
                    out = cuda_path(out)
                else:
                    out = out * 2
                return out
        """
    root = tree(tmp_path, {"pkg/__init__.py": "from .model import Net\n", "pkg/model.py": model,
                           "pkg/cuda_attn.py": CUDA_ATTN})
    got = found(scan(root))
    kernel = got[("pkg/cuda_attn.py", 5, "NR1801")]
    assert kernel.context == "step"  # still a concern (a fallback or a switch), not the `cuda` feature
    deco = got[("pkg/model.py", 11, "NR1202")]
    assert deco.context == "opt-in" and deco.details["feature"] == "cuda"


def test_a_device_check_in_a_conditional_expression_is_one_as_in_an_if_statement(tmp_path):
    """`torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []` is the one-line form of
    `if torch.cuda.is_available(): ... else: ...`: the CUDA arm (the else of a negated check) never
    runs on Trainium, and the other arm is its PyTorch path. Housekeeping there, and what only such
    arms call, is the opt-in feature `cuda`; a device choice or a move there stays a concern, as in
    the statement; the check in the test (the probe itself) is judged as before. Columns count
    characters, as findings do, not ast's bytes (`"tōrch"` before the arm)."""
    model = """\
        import torch
        from pkg.probe import _is_triton_available


        def rng_states():
            return {"tōrch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


        def rng_negated():
            return [] if not torch.cuda.is_available() else torch.cuda.get_rng_state_all()


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)
                self.device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

            def forward(self, x):
                from .cuda_attn import fused
                out = fused(self.proj(x)) if x.is_cuda else torch.relu(self.proj(x))
                torch.cuda.synchronize() if _is_triton_available() else None
                torch.cuda.synchronize() if x.device.type == "cuda" else None
                return out.to(self.device)
        """
    root = tree(tmp_path, {"pkg/__init__.py": "from .model import Net\n", "pkg/probe.py": PROBE,
                           "pkg/model.py": model, "pkg/cuda_attn.py": CUDA_ATTN})
    got = found(scan(root))
    for line, rule in ((6, "NR1015"), (10, "NR1015"), (22, "NR1007"), (23, "NR1007")):
        f = got[("pkg/model.py", line, rule)]
        assert f.context == "opt-in" and f.details["feature"] == "cuda", (line, rule, f.context)
        assert "behind a device check" in f.details["context_reason"]
    assert got[("pkg/cuda_attn.py", 5, "NR1801")].context == "opt-in"  # called only from the CUDA arm
    assert got[("pkg/model.py", 6, "NR1005")].context == "step"  # the check itself: as before
    assert got[("pkg/model.py", 17, "NR1004")].context == "step"  # the device choice stays


def test_operands_after_a_device_check_in_a_conjunction_run_only_on_cuda(tmp_path):
    """`x.device.type == "cuda" and torch.cuda.current_device() != x.device.index` evaluates its right
    side only on a CUDA device (Python's short circuit), like the body of `if x.device.type == "cuda":`,
    and so does what follows `not x.is_cuda or` in a disjunction; inside an `if` test too (PyG's
    `EdgeIndex.__repr__`, FALSE in round 14). A probe before the check, or one in a conjunction with no
    CUDA check (`flag and torch.cuda.current_device() == 0`), is judged as before."""
    model = """\
        import torch


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                if x.device.type != "cpu" or (x.device.type == "cuda" and torch.cuda.current_device() != x.device.index):
                    pass
                same = not x.is_cuda or torch.cuda.current_device() == x.device.index
                probe = torch.cuda.current_device() == 0 and x.is_cuda
                plain = self.training and torch.cuda.current_device() == 0
                return self.proj(x) * same * probe * plain
        """
    root = tree(tmp_path, {"train.py": TRAIN, "model.py": model})
    got = found(scan(root))
    for line in (10, 12):
        f = got[("model.py", line, "NR1005")]
        assert f.context == "opt-in" and f.details["feature"] == "cuda", (line, f.context)
    assert got[("model.py", 13, "NR1005")].context == "step"  # asked before the check: it runs everywhere
    assert got[("model.py", 14, "NR1005")].context == "step"  # no CUDA check beside it


def test_a_test_of_an_existing_device_chooses_nothing(tmp_path):
    """`if self._device.type == "cuda":`, `use_ids = dist.get_backend() == "nccl"` and the rest of a
    function after `if device.type != "cuda": return` read a device or process group that already
    exists: it was chosen elsewhere, on Trainium it is a Neuron one and the branch is not taken; the
    CUDA device named inside only re-expresses it. Its device and distributed findings are opt-in
    (`cuda`). An availability probe (`if torch.cuda.is_available(): device = torch.device("cuda")`),
    a name set from one, and a test whose other path picks a device itself (`"cuda" if "cuda" in
    str(device) else "cpu"`: on Trainium that picks the CPU) still choose, and stay must-port."""
    model = """\
        import torch
        import torch.distributed as dist


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)
                self._device = pick()

            @property
            def device(self):
                device = self._device
                if device.type == "cuda" and device.index is None:
                    return torch.device(f"cuda:{torch.cuda.current_device()}")
                return device

            def forward(self, x):
                zero_first(0)
                budget(x.device)
                with torch.autocast(device_type=autocast_type(self.device)):
                    return self.proj(x.to(chosen()))


        def zero_first(local_rank):
            initialized = dist.is_available() and dist.is_initialized()
            use_ids = initialized and dist.get_backend() == "nccl"
            if initialized and local_rank not in {-1, 0}:
                dist.barrier(device_ids=[torch.cuda.current_device()]) if use_ids else dist.barrier()
            return torch.ones(1, device="cuda") if use_ids else torch.ones(1)


        def budget(device):
            if device.type != "cuda":
                return None
            torch.cuda.set_device(device.index)
            return torch.zeros(1, device="cuda")


        def pick():
            device = None
            if torch.cuda.is_available():
                device = torch.device("cuda")
            return device


        def chosen():
            device = "cpu"
            if torch.cuda.is_available():
                device = "cuda"
            if device == "cuda":
                torch.zeros(1, device="cuda")
            return device


        def autocast_type(device):
            device_type = "cuda" if "cuda" in str(device) else "cpu"
            return device_type
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model})))
    moved = ((15, "NR1004"), (15, "NR1005"),  # the property form
             (29, "NR1106"), (29, "NR1005"), (30, "NR1003"),  # the backend local, in conditional expressions
             (36, "NR1006"), (37, "NR1003"))  # the rest of a function after the early return
    for line, rule in moved:
        f = got[("model.py", line, rule)]
        assert f.context == "opt-in" and f.details["feature"] == "cuda", (line, rule, f.context)
    for line in (15, 30, 37):  # housekeeping keeps its reason; the device names inside get this one
        assert "already exists" in got[("model.py", line, "NR1004" if line == 15 else "NR1003")].details["context_reason"]
    for line, rule in ((43, "NR1004"),  # the availability probe's choice
                       (50, "NR1004"), (52, "NR1003"),  # a name set from a device choice asks what was chosen
                       (57, "NR1004")):  # the other arm picks the CPU: on Trainium that is a choice
        assert got[("model.py", line, rule)].context == "step", (line, rule)


def test_a_match_arm_and_a_module_constant_test_an_existing_device(tmp_path):
    """The forms of a test of a device chosen elsewhere beside `if x.device.type == "cuda":`: the
    `case "cuda":` (or `case "cuda" | "hip":`) arm of a `match` on a device type, the branch of the
    `if device_type == "cuda":` it stands for (its other arms are that test's else); a membership
    (`DEVICE_TYPE in ("cuda", "hip")`, `in {"cuda"}`) like `==`, the rest of a function after `if
    DEVICE_TYPE not in ("cuda", "hip"): return`; and a module constant bound once from a call
    (`DEVICE_TYPE = get_device_type()`), here or imported: its device was chosen where it is
    computed. A module constant set from a probe or a "cuda" literal is the choice itself and stays
    must-port, and a GPU library inside a `case "cuda":` arm keeps its rules (`import triton`)."""
    devices = """\
        import torch


        def get_device_type():
            if torch.cuda.is_available():
                return "cuda"
            return "cpu"


        DEVICE_TYPE: str = get_device_type()
        PROBED = "cuda" if torch.cuda.is_available() else "cpu"
        FIXED = "cuda"


        def device_count():
            if DEVICE_TYPE in ("cuda", "hip"):
                return torch.zeros(1, device="cuda")
            elif DEVICE_TYPE == "xpu":
                return torch.xpu.device_count()
            else:
                return 1


        def probed():
            if PROBED == "cuda":
                return torch.zeros(1, device="cuda")


        def fixed():
            if FIXED in ("cuda", "hip"):
                return torch.zeros(1, device="cuda")
        """
    model = """\
        import torch
        from devices import DEVICE_TYPE, device_count, probed, fixed


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(4, 4)

            def forward(self, x):
                units()
                device_count()
                pin()
                rest()
                probed()
                fixed()
                kernels(x)
                return self.proj(x)


        def units():
            device_type = getattr(torch.accelerator.current_accelerator(), "type", "cpu")
            match device_type:
                case "cuda":
                    torch.zeros(1, device="cuda")
                    return torch.cuda.get_device_properties(0).multi_processor_count
                case "xpu":
                    return torch.xpu.get_device_properties(0).max_compute_units
                case _:
                    return torch.get_num_threads()


        def pin():
            if DEVICE_TYPE in {"cuda"}:
                return torch.zeros(1, device="cuda")


        def rest():
            if DEVICE_TYPE not in ("cuda", "hip"):
                return None
            torch.cuda.set_device(0)
            return torch.zeros(1, device="cuda")


        def kernels(x):
            match x.device.type:
                case "cuda" | "hip":
                    import triton
                    return x.cuda()
                case _:
                    return x
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model, "devices.py": devices})))
    reads = (("model.py", 25, "NR1003"),  # the `case "cuda":` arm of a match on an existing device's type
             ("model.py", 49, "NR1001"),  # `case "cuda" | "hip":`
             ("devices.py", 17, "NR1003"),  # a module constant bound once from a call, `in (...)`
             ("model.py", 35, "NR1003"),  # the same constant imported, `in {...}`
             ("model.py", 42, "NR1003"))  # the rest of a function after `not in (...): return`
    for key in reads:
        f = got[key]
        assert f.context == "opt-in" and f.details["feature"] == "cuda", (key, f.context)
        assert "already exists" in f.details["context_reason"], key
    for key in (("model.py", 26, "NR1005"), ("model.py", 41, "NR1006")):  # housekeeping beside them
        assert got[key].context == "opt-in", key
    for key in (("devices.py", 26, "NR1003"),  # a module constant set from a probe is the choice
                ("devices.py", 31, "NR1003"),  # ... and so is one set from a "cuda" literal
                ("model.py", 48, "NR1805")):  # a GPU library keeps its rules inside the arm
        assert got[key].context == "step", key


@pytest.mark.parametrize("src, only, reads", [
    # the arm of a match on an existing device's type, nested in a function and a branch
    ('def f(x, ok):\n    if ok:\n        match x.device.type:\n            case "cuda":\n                y = x.cuda()\n'
     '            case _:\n                y = x\n    return y\n', True, True),
    # every other path gives up: CUDA is required, the arm is the only path (as `else: raise`)
    ('def f(x):\n    match x.device.type:\n        case "cuda" | "hip":\n            y = x.cuda()\n'
     '        case _:\n            raise RuntimeError("GPU only")\n    return y\n', False, False),
    # another arm picks a device itself: a choice, not a read
    ('def f(x):\n    match x.device.type:\n        case "cuda":\n            d = x.device\n'
     '        case _:\n            d = "cpu"\n    return d\n', True, False),
    # a pattern with a device that is not a GPU's is no CUDA arm
    ('def f(x):\n    match x.device.type:\n        case "cuda" | "cpu":\n            y = x.cuda()\n'
     '        case _:\n            y = x\n    return y\n', None, False),
])
def test_the_cuda_arm_of_a_match_is_a_region(src, only, reads):
    import ast

    from neuron_ready.sources.codefacts import code_facts

    facts = code_facts(ast.parse(src), "pkg.m", False, src)
    arms = [i for i, r in enumerate(facts.get("regions", ())) if r[5].startswith("match") and r[3] == "body"]
    assert (facts["regions"][arms[0]][7] if arms else None) is only
    assert bool(set(arms) & set(facts.get("device_tests", ()))) is reads


def test_a_match_on_a_setting_is_a_condition_on_it():
    """`match backend: case "cuda" | "hip":` on a parameter is the condition `backend in ("cuda",
    "hip")` of its CUDA arm, and its negation for the other arms (a setting's gate, as for `if`)."""
    import ast

    from neuron_ready.sources.codefacts import code_facts

    src = ('def f(x, backend="hip"):\n    match backend:\n        case "cuda" | "hip":\n            y = x.cuda()\n'
           '        case _:\n            y = x\n    return y\n')
    regions = code_facts(ast.parse(src), "pkg.m", False, src)["regions"]
    assert [(r[0], r[1], r[2][0], r[2][2], r[3], r[7]) for r in regions] == [
        (3, 4, "in", ["cuda", "hip"], "body", True), (5, 6, "in", ["cuda", "hip"], "else", False)]


def test_the_backend_enum_is_nccl_too(tmp_path):
    """`dist.get_backend() == dist.Backend.NCCL` tests an existing process group like `== "nccl"`:
    a CPU tensor moved to CUDA only for NCCL's sake is not moved on Trainium (sam2's
    `convert_to_distributed_tensor`). A backend chosen as NCCL by the enum still chooses."""
    model = """\
        import torch
        import torch.distributed as dist


        def convert(tensor):
            if dist.is_available() and dist.get_backend() == dist.Backend.NCCL and not tensor.is_cuda:
                tensor = tensor.cuda()
            return tensor


        def init():
            dist.init_process_group(backend=dist.Backend.NCCL)


        class Net(torch.nn.Linear):
            def __init__(self):
                super().__init__(4, 4)

            def forward(self, x):
                init()
                return super().forward(convert(x))
        """
    got = found(scan(tree(tmp_path, {"train.py": TRAIN, "model.py": model})))
    moved = got[("model.py", 7, "NR1001")]
    assert moved.context == "opt-in" and moved.details["feature"] == "cuda"
    assert got[("model.py", 12, "NR1101")].context == "step"
