"""A public method the library itself calls only behind a switch runs when the switch is on.

In library mode the public methods of a library's classes are its surface, since a user may call
them. A method the class calls itself, every time inside a branch its default leaves off
(`if self.affine_param: self.update_affine(x)`, `affine_param` defaulting to False) or an evaluation
test, is the class's own internal step: it runs when its calls say, with their gate. One call of the
name outside such a branch, anywhere in the library, keeps it public. Real scans of small trees.
"""

from __future__ import annotations

from pathlib import Path

from scanning import write_tree as tree

from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

MODEL = """\
    import torch
    from torch import nn

    class Codebook(nn.Module):
        def __init__(self, dim, affine_param=False):
            super().__init__()
            self.affine_param = affine_param
            self.w = nn.Parameter(torch.randn(dim))

        def update_affine(self, data, mask):
            return data[mask].sum()

        def summary(self, x):
            return x[x > 0].sum()

        def forward(self, x):
            if self.affine_param:
                self.update_affine(x, x > 0)
            if not self.training:
                self.summary(x)
            return x * self.w
    """


def scan(root: Path):
    return run_scan(Settings(root=root, cache=False)).report


def contexts(report) -> dict[str, tuple[str, str | None]]:
    return {f.scope: (f.context, f.gate) for f in report.findings + report.off_path}


def test_a_method_called_only_behind_an_off_switch_is_opt_in(tmp_path):
    report = scan(tree(tmp_path, {"vq/__init__.py": "from .model import Codebook\n", "vq/model.py": MODEL}))
    assert report.extra["reach"]["mode"] == "library"
    got = contexts(report)
    assert got["Codebook.update_affine"] == ("opt-in", "only when self.affine_param (affine_param defaults to False)")
    assert got["Codebook.summary"][0] == "evaluation"  # called only when not training


def test_one_open_call_keeps_the_method_public(tmp_path):
    root = tree(tmp_path, {
        "vq/__init__.py": "from .model import Codebook\n",
        "vq/model.py": MODEL,
        "vq/fit.py": """\
            def refit(codebook, x):
                return codebook.update_affine(x, x > 0)  # called outside any switch
            """,
    })
    assert contexts(scan(root))["Codebook.update_affine"][0] == "step"


def test_a_method_nothing_calls_stays_the_surface(tmp_path):
    model = MODEL.replace("            if self.affine_param:\n                self.update_affine(x, x > 0)\n", "")
    assert "self.update_affine" not in model
    root = tree(tmp_path, {"vq/__init__.py": "from .model import Codebook\n", "vq/model.py": model})
    assert contexts(scan(root))["Codebook.update_affine"][0] == "step"  # a user may call it


def test_what_the_training_loop_calls_stays_the_surface(tmp_path):
    # the library names `step` and `forward` only behind a switch, but the user's loop calls the
    # optimizer's step and calling a module runs its forward: both keep their own answers
    root = tree(tmp_path, {
        "opt/__init__.py": "from .adam import FastAdam\nfrom .wrap import Lookahead, Block\n",
        "opt/adam.py": """\
            import torch

            class FastAdam(torch.optim.Optimizer):
                def step(self, closure=None):
                    torch.cuda.synchronize()
                    return None
            """,
        "opt/wrap.py": """\
            import torch
            from torch import nn

            class Lookahead:
                def __init__(self, base, sync=False):
                    self.base = base
                    self.sync = sync

                def advance(self, x, sync=False):
                    if sync:
                        self.base.step()
                        x = self.block.forward(x)
                    return x

            class Block(nn.Module):
                def forward(self, x):
                    return x.cuda()
            """,
    })
    got = contexts(scan(root))
    assert got["FastAdam.step"][0] == "step"
    assert got["Block.forward"][0] == "step"
