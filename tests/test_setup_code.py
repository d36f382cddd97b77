"""Code that runs once outside the step: a module's construction and checkpoint loading or saving
(analyzer/sources/setup_code.py reads the names and kept references, context.py labels what only
they call). A dynamic shape, host read, unsupported op or float64 there is host-side; device
plumbing and anything the step also runs stay must-port. Small trees built here, whole pipeline."""

from __future__ import annotations

import pytest

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.sources.setup_code import checkpoint_io, checkpoint_writes

TRAIN = """\
    import torch
    from model import Net

    def main():
        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(10):
            net(torch.zeros(8)).sum().backward()
            opt.step()
        net.load_checkpoint("w.pt")
        net.save_checkpoint("w.pt")

    if __name__ == "__main__":
        main()
"""


def scan(root):
    return run_scan(Settings(root=root, cache=False)).report


def found(report) -> dict[tuple[str, int], object]:
    return {(f.scope, f.rule): f for f in report.findings + report.off_path}


def test_what_construction_and_checkpoint_code_calls_once_is_host_side(tmp_path):
    root = tree(tmp_path, {
        "train.py": TRAIN,
        "model.py": """\
            import torch

            def dct_kernel(n):
                v = torch.fft.fft(torch.eye(n))
                return v.real.float()

            def linear_schedule(t):
                return torch.linspace(0, 1, t, dtype=torch.float64)

            def masked_act(x):
                return x[x > 0]

            def shared_mask(x):
                return x.nonzero()

            def remap(sd):
                return sd["w"].nonzero()

            class Base(torch.nn.Module):
                pass

            class Dct(Base):
                def __init__(self, n):
                    super().__init__()
                    self.register_buffer("weights", dct_kernel(n))

            class Net(torch.nn.Module):
                def __init__(self, n=8):
                    super().__init__()
                    self.dct = Dct(n)
                    fn = linear_schedule
                    self.register_buffer("betas", fn(n).float())
                    self.idx = torch.arange(n).nonzero()
                    self.act = masked_act
                    self.gate = lambda x: x[x > 0]
                    self.m = shared_mask(torch.ones(n))
                    self.proj = torch.nn.Linear(n, n).cuda()

                def forward(self, x):
                    y = self.act(self.proj(x))
                    return shared_mask(y)

                def load_checkpoint(self, path):
                    sd = torch.load(path)
                    return remap(sd).to(torch.float64)
        """,
    })
    f = found(scan(root))
    # built once in `__init__` (directly, through a local alias), or by the checkpoint loader
    for key in [("dct_kernel", "NR1601"), ("linear_schedule", "NR1207"), ("Net.__init__", "NR1501"),
                ("remap", "NR1501"), ("Net.load_checkpoint", "NR1207")]:
        assert f[key].context == "host", key
    assert "`Dct.__init__`" in f[("dct_kernel", "NR1601")].details["context_reason"]  # a module by its base
    assert "checkpoint load or save" in f[("Net.load_checkpoint", "NR1207")].details["context_reason"]
    # stored in `__init__` for `forward`, or also called by `forward`: the step
    assert f[("masked_act", "NR1504")].context == "step"
    assert f[("shared_mask", "NR1501")].context == "step"
    assert f[("Net.__init__", "NR1504")].context == "step"  # a lambda's body runs where it is called
    # CUDA plumbing in `__init__` still needs its port
    assert f[("Net.__init__", "NR1001")].context == "step"


def test_modules_built_by_construction_helpers_run_their_forward_in_the_step(tmp_path):
    root = tree(tmp_path, {
        "train.py": TRAIN,
        "model.py": """\
            import torch

            def gate(x):
                return x.nonzero()

            def pick_act(name):
                return {"gate": gate}[name]

            class Block(torch.nn.Module):
                def forward(self, x):
                    return x[x > 0]

            def make_blocks(n):
                return torch.nn.ModuleList([Block() for _ in range(n)])

            class Box:
                def __init__(self, x):
                    self.idx = x.nonzero()

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = make_blocks(2)
                    self.act = pick_act("gate")

                def forward(self, x):
                    for b in self.blocks:
                        x = b(x)
                    return self.act(x) + Box(x).idx

                def load_checkpoint(self, path):
                    pass
        """,
    })
    f = found(scan(root))
    assert f[("Block.forward", "NR1504")].context == "step"  # a helper of `__init__` built it; it runs each step
    assert f[("gate", "NR1501")].context == "step"  # a factory's callable runs where it is called
    assert f[("Box.__init__", "NR1501")].context == "step"  # no module: constructed in `forward`


@pytest.mark.parametrize("name", ["load_state_dict", "_load_from_state_dict", "load_checkpoint", "save_checkpoint",
                                  "checkpoint_filter_fn", "from_pretrained", "load_pretrained", "load", "save",
                                  "load_optimizer", "save_model", "_remap_ckpt"])
def test_checkpoint_io_names(name):
    assert checkpoint_io(name)


@pytest.mark.parametrize("name", ["checkpoint", "checkpoint_sequential", "apply_activation_checkpointing",
                                  "gradient_checkpointing_enable", "load_balancing_loss", "save_for_backward",
                                  "forward", "remap", "loader"])
def test_activation_checkpointing_and_other_names_are_no_checkpoint_io(name):
    assert not checkpoint_io(name)


def test_a_librarys_unreached_helper_that_only_constructors_call_is_host_side(tmp_path):
    # library mode: `variant.Diffusion` names itself, so it is no root of the library's surface and no
    # start reaches it (its code keeps the module-level answer); a schedule only constructors call runs once
    root = tree(tmp_path, {
        "pyproject.toml": '[project]\nname = "diff"\nversion = "0.1"\n',
        "diff/__init__.py": "from .core import Diffusion\n",
        "diff/core.py": """\
            import torch
            class Diffusion(torch.nn.Module):
                def forward(self, x):
                    return x.nonzero()
        """,
        "diff/variant.py": """\
            import torch
            from torch.nn import Module

            def linear_schedule(t):
                return torch.linspace(0, 1, t, dtype=torch.float64)

            def masked(x):
                return x.nonzero()

            class Diffusion(Module):
                def __init__(self, t=10):
                    super().__init__()
                    assert type(self) is Diffusion
                    self.register_buffer("betas", linear_schedule(t).float())
                    self.m = masked(torch.ones(t))

                def forward(self, x):
                    return masked(x)
        """,
    })
    report = scan(root)
    assert report.extra["reach"]["mode"] == "library"
    f = found(report)
    assert f[("linear_schedule", "NR1207")].context == "host"
    assert "`Diffusion.__init__`" in f[("linear_schedule", "NR1207")].details["context_reason"]
    assert f[("masked", "NR1501")].context == "step"  # `forward` calls it too
    assert "reached_via" not in f[("linear_schedule", "NR1207")].details


def test_objects_and_precision_settings_built_once_still_govern_the_step(tmp_path):
    root = tree(tmp_path, {
        "train.py": TRAIN,
        "model.py": """\
            import copy
            import torch

            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.pool = torch.nn.MaxPool1d(2, dilation=2)
                    self.scaler = torch.cuda.amp.GradScaler()
                    self.proj = torch.nn.Linear(4, 4).half()

                def forward(self, x):
                    return self.proj(self.pool(x))

                def load_checkpoint(self, path):
                    self.load_state_dict(torch.load(path))
                    self.half()

                def save_checkpoint(self, path):
                    torch.save(copy.deepcopy(self).half().state_dict(), path)
        """,
    })
    f = found(scan(root))
    # a module built in `__init__` runs in `forward`; FP16 and loss scaling set there govern every step
    assert f[("Net.__init__", "NR1619")].context == "step"
    assert f[("Net.__init__", "NR1203")].context == "step"
    assert f[("Net.__init__", "NR1205")].context == "step"
    # FP16 after loading is the model's precision; FP16 written to a file is the file's format
    assert f[("Net.load_checkpoint", "NR1205")].context == "step"
    assert f[("Net.save_checkpoint", "NR1205")].context == "host"


@pytest.mark.parametrize("name,writes", [("save_model", True), ("save", True), ("state_dict", True),
                                         ("convert_optimizer_state_dict_to_fp16", True), ("load_state_dict", False),
                                         ("from_pretrained", False), ("checkpoint_filter_fn", False),
                                         ("convert_weights_to_fp16", False), ("load", False)])
def test_fp16_is_a_files_format_only_where_a_checkpoint_is_written(name, writes):
    assert checkpoint_writes(name) is writes


def test_what_an_optimizer_plans_when_it_is_built_is_host_side(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            from opt import Sharded

            def main():
                net = torch.nn.Linear(8, 8).cuda()
                opt = Sharded(net.parameters(), ranks=torch.arange(4).view(2, 2))
                for _ in range(10):
                    net(torch.zeros(8).cuda()).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main()
        """,
        "opt.py": """\
            import torch

            def plan(ranks, rank):
                return (ranks == rank).nonzero()

            class Base(torch.optim.Optimizer):
                pass

            class Sharded(Base):
                def __init__(self, params, ranks):
                    super().__init__(params, {"lr": 0.1})
                    self.where = plan(ranks, 0)

                @torch.no_grad()
                def step(self):
                    for group in self.param_groups:
                        for p in group["params"]:
                            keep = p.grad.nonzero()
                            p.add_(p.grad[p.grad > 0].mean() * -0.1)
        """,
    })
    f = found(scan(root))
    assert f[("plan", "NR1501")].context == "host"  # planned once, when the optimizer is built
    assert "the optimizer is built (`Sharded.__init__`)" in f[("plan", "NR1501")].details["context_reason"]
    # what the optimizer does every step stays in the step
    assert f[("Sharded.step", "NR1501")].context == "step"
    assert f[("Sharded.step", "NR1504")].context == "step"
