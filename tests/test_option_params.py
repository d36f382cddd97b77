"""Keyword parameters as options: a branch that runs only when a keyword whose default turns it off
is turned on is opt-in, whether the keyword is read directly, kept as an instance attribute, or
forwarded from a caller's own keyword (codefacts.py `_option_params`, `_init_attributes`,
`_local_aliases`; context.py `Defaults.passes_default`)."""

from __future__ import annotations

import ast
from pathlib import Path

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.sources.codefacts import code_facts, unpacked

TRAIN = """\
    import torch
    from model import Net, scaled_loss

    def main():
        net = Net(8{net_args})
        opt = torch.optim.SGD(net.parameters())
        x = torch.zeros(4)
        loss = scaled_loss(net(x){loss_args}) + net(x, None).sum()
        loss.backward()
        opt.step()

    if __name__ == "__main__":
        main()
"""

MODEL = """\
    import torch

    def _token_loss(x, use_scaling=False, level="token", chunks=0):
        if use_scaling:
            x = x[x > 0]
        if level == "sequence":
            x = torch.unique(x)
        if chunks > 0:
            x = torch.nonzero(x)
        return x.sum()

    def scaled_loss(x, scale=False, level="token"):
        return _token_loss(x, use_scaling=scale, level=level)

    class Net(torch.nn.Module):
        def __init__(self, dim, z_loss=False, extra_ids=None, training=False):
            super().__init__()
            self.z_loss = z_loss
            self.has_extra = extra_ids is not None
            self.eager = training

        def forward(self, x, mask=None):
            n, use_z = x.shape[0], self.z_loss
            if use_z:
                x = torch.unique(x)
            if self.has_extra:
                x = torch.nonzero(x)
            if mask is not None:
                x = x[mask]
            if not self.eager:
                x = torch.unique(x, dim=0)
            return x
"""

LINES = {"scaling": 5, "level": 7, "chunks": 9, "z_loss": 25, "extra": 27, "optional input": 29, "run state": 31}


def _findings(tmp_path: Path, net_args: str = "", loss_args: str = "", extra: dict | None = None) -> dict[str, tuple]:
    root = tree(tmp_path, {"train.py": TRAIN.format(net_args=net_args, loss_args=loss_args), "model.py": MODEL,
                           **(extra or {})})
    report = run_scan(Settings(root=root, cache=False)).report
    got = {(f.path, f.line): (f.context, f.gate) for f in report.findings + report.off_path}
    return {what: got.get(("model.py", line)) for what, line in LINES.items()}


def test_keywords_attributes_and_forwarded_keywords_off_by_default_gate_their_branches(tmp_path):
    got = _findings(tmp_path, extra={
        # tests pass every option by design: they do not say what the training job runs
        "tests/test_model.py": "from model import Net, scaled_loss\nscaled_loss(None, scale=True, chunks=1)\nNet(1, z_loss=True)\n",
    })
    # forwarded two levels: train.py -> scaled_loss(scale=False) -> _token_loss(use_scaling=scale)
    assert got["scaling"] == ("opt-in", "only when use_scaling (use_scaling defaults to False)")
    assert got["level"] == ("opt-in", "only when level == 'sequence' (level defaults to 'token')")
    assert got["chunks"] == ("opt-in", "only when chunks > 0 (chunks defaults to 0)")
    # `self.z_loss = z_loss` in __init__, read through a local alias
    assert got["z_loss"] == ("opt-in", "only when use_z (z_loss defaults to False)")
    assert got["extra"] == ("opt-in", "only when self.has_extra (extra_ids defaults to None)")
    # an optional tensor (`mask=None`) and a run-state word (`training`) are no user options
    assert got["optional input"][0] == "step"
    assert got["run state"][0] == "step"


def test_a_training_caller_that_turns_the_keyword_on_keeps_the_branch_must_port(tmp_path):
    got = _findings(tmp_path, net_args=", z_loss=True", loss_args=", scale=True")
    assert got["z_loss"][0] == "step"  # Net(8, z_loss=True)
    assert got["scaling"][0] == "step"  # scaled_loss(..., scale=True) forwards True into use_scaling
    assert got["level"][0] == "opt-in"  # nobody turns this one on


def test_callers_that_disagree_or_forward_an_unknown_leave_no_gate(tmp_path):
    got = _findings(tmp_path, extra={
        "other.py": "from model import _token_loss, Net\n"
                    "def run(x, cfg):\n    Net(2, z_loss=cfg.z)\n    return _token_loss(x, level=cfg.level)\n",
    })
    assert got["z_loss"][0] == "step"
    assert got["level"][0] == "step"
    assert got["scaling"][0] == "opt-in"


def test_facts_record_forwarded_keywords_and_drop_rebound_parameters():
    src = (
        "def f(x, use_a=False, n=0, name='a', t=None):\n"
        "    n = n + 1\n"
        "    g(x, use_a=use_a, k=name, m=n, t=t, o=x)\n"
        "    if n:\n        pass\n"
        "    if t is not None:\n        pass\n"
    )
    facts = code_facts(ast.parse(src), "m", False)
    # `g` names nothing this file defines or imports: its call is kept under "" (no callee)
    [[positional, passed, star]] = unpacked(facts, "passed")[""]
    assert positional == 0 and star == 0
    assert passed["use_a"] == {"param": "use_a", "default": False, "owner": "f"}
    assert passed["k"] == {"param": "name", "default": "a", "owner": "f"}
    assert passed["m"] == "?"  # `n` is rebound: it no longer holds its default
    assert passed["o"] == "?" and passed["t"] == "?"  # no default; a None optional input
    assert [r[2] for r in facts["regions"]] == [["flag", "n"], ["cmp", "IsNot", ["flag", "t"], ["lit", None]]]


def test_the_rest_of_a_function_after_an_early_return_on_an_option_is_gated(tmp_path):
    root = tree(tmp_path, {
        "train.py": """\
            import torch
            class Head(torch.nn.Module):
                def __init__(self, aux_loss=False):
                    super().__init__()
                    self.aux_loss = aux_loss
                def forward(self, x):
                    y = x * 2
                    if not self.aux_loss:
                        return y.sum()
                    return torch.nonzero(y).sum()
            def main():
                Head()(torch.zeros(3)).backward()
            if __name__ == "__main__":
                main()
        """,
    })
    report = run_scan(Settings(root=root, cache=False)).report
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path}
    assert got[10] == ("opt-in", "only when self.aux_loss (aux_loss defaults to False)")
