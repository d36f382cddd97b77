"""Neuron 2.33, native target: an unsupported op in eager code is a CPU fallback (a per-step round trip,
costed as one to measure); in code torch.compile visibly compiles, fallback is off and the compile fails
(full cost). Real scans of small trees (compilefacts.py per file, compile_scope.py per report)."""

from __future__ import annotations

import ast

import pytest

from neuron_ready.config import Settings
from neuron_ready.effort import CPU_FALLBACK
from neuron_ready.engine import run_scan
from neuron_ready.sources.codefacts import code_facts
from scanning import write_tree

MODEL = '''\
import torch
from torch import nn


def spectral(x):
    return torch.fft.rfft(x, dim=-1).abs()


class Net(nn.Module):
    def forward(self, x):
        return spectral(x)


class Head(nn.Module):
    def forward(self, x):
        vals, idx = torch.sort(x, dim=-1)
        return vals
'''

TRAIN = '''\
import torch
from model import Net, Head
COMPILE = False


def main(args):
    model = Net()
    {compile}
    head = Head()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = head(model(torch.randn(4, 16))).sum()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main(None)
'''


def scan(tmp_path, compile_line: str, target: str = "native"):
    root = write_tree(tmp_path / "repo", {"model.py": MODEL, "train.py": TRAIN.format(compile=compile_line)})
    report = run_scan(Settings(root=root, cache=False, target=target)).report
    by_rule = {f.rule: f for f in report.findings}
    tasks = {t.id: t for t in report.tasks}
    return by_rule, tasks


def test_eager_ops_are_cpu_fallbacks_costed_to_measure(tmp_path):
    found, tasks = scan(tmp_path, "pass")
    for rule in ("NR1601", "NR1603"):
        assert found[rule].details.get("cpu_fallback") is True
        assert "compiled" not in found[rule].details
        assert "falls back to the CPU: a device-to-host round trip every step" in found[rule].message
    fft = tasks["T-op-NR1601-rfft"].person_days
    assert (fft.low, fft.likely, fft.high) == (CPU_FALLBACK.low, CPU_FALLBACK.likely, CPU_FALLBACK.high)


def test_a_module_passed_to_torch_compile_compiles_what_its_forward_calls(tmp_path):
    found, tasks = scan(tmp_path, "model = torch.compile(model)")
    fft = found["NR1601"]  # in spectral(), called from Net.forward
    assert fft.details["compiled"] == "train.py:8"
    assert "`Net.forward` is compiled (`torch.compile`, train.py:8), where CPU fallback is off" in fft.message
    assert found["NR1603"].details.get("cpu_fallback") is True  # Head is not compiled: still eager
    cost = tasks["T-op-NR1601-rfft"].person_days
    assert cost.likely == 2.0 and cost.likely > CPU_FALLBACK.likely  # the catalog's full numbers
    assert tasks["T-op-NR1603-sort"].person_days.likely <= CPU_FALLBACK.likely


def test_a_compile_the_scan_cannot_place_counts_the_step_as_compiled(tmp_path):
    found, tasks = scan(tmp_path, "head = torch.compile(args.head)")
    for rule in ("NR1601", "NR1603"):
        assert found[rule].details["compiled"] == "train.py:8"
        assert "on code the scan cannot place" in found[rule].message
    assert tasks["T-op-NR1601-rfft"].person_days.likely == 2.0


def test_a_compile_behind_a_switch_that_is_off_compiles_nothing(tmp_path):
    found, _ = scan(tmp_path, "if COMPILE:\n        model = torch.compile(model)")
    assert found["NR1601"].details.get("cpu_fallback") is True


def test_the_xla_target_keeps_its_own_messages(tmp_path):
    found, _ = scan(tmp_path, "model = torch.compile(model)", target="xla")
    assert "cpu_fallback" not in found["NR1601"].details and "compiled" not in found["NR1601"].details
    assert "eager mode" not in found["NR1601"].message


@pytest.mark.parametrize("source, expected", [
    ("import torch\n@torch.compile\ndef step(x):\n    return x\n", [["def", "step", 2, "l:step"]]),
    ("import torch\nclass M:\n    @torch.compile(fullgraph=True)\n    def forward(self, x):\n        return x\n",
     [["def", "M.forward", 3, "l:M.forward"]]),
    ("import torch\nfrom .nets import Net\ndef main():\n    m = Net(2)\n    m = torch.compile(m)\n",
     [["call", "main", 5, "q:pkg.nets.Net()"]]),
    ("import torch\nclass T:\n    def __init__(self):\n        self.model = Net()\n        self.model.compile()\nclass Net:\n    pass\n",
     [["method", "T.__init__", 5, "l:Net()"]]),
    ("import torch\ndef main(model):\n    return torch.compile(model)\n", [["call", "main", 3, ""]]),
    ("import torch\nimport re\np = re.compile('x')\n", []),
    ("import re\np = re.compile('x')\nclass K:\n    pass\nK().compile()\n", []),  # no torch, no compile facts
    ("import torch\ndef f(model, layers):\n    model.compile(optimizer='adam', loss='mse')\n"
     "    for block in layers:\n        block.compile(backend='neuron', fullgraph=True)\n",
     [["method", "f", 5, ""]]),  # Keras' compile is not torch's; a block of a loop is unknown
])
def test_compile_sites_per_file(source, expected):
    facts = code_facts(ast.parse(source), "pkg.train", False)
    assert facts.get("compiles", []) == expected
    # the source given too: the text screen that skips the walk never drops a site
    assert code_facts(ast.parse(source), "pkg.train", False, source).get("compiles", []) == expected


@pytest.mark.parametrize("source, expected", [
    ("import torch\ndef f(m):\n    return m\n", []),  # neither `compile` nor `optimize`: no walk
    ("import torch\ndef f(m):\n    return torch.\uff43ompile(m)\n", [["call", "f", 3, ""]]),  # NFKC: torch.compile
    ("import torch._dynamo as d\ndef f(m):\n    return d.optimize('eager')(m)\n", [["call", "f", 3, ""]]),
])
def test_the_text_screen_skips_only_files_that_cannot_compile(source, expected):
    tree = ast.parse(source)
    assert code_facts(tree, "m", False, source).get("compiles", []) == expected
    assert code_facts(tree, "m", False).get("compiles", []) == expected


def test_a_decorated_step_is_compiled(tmp_path):
    root = write_tree(tmp_path / "repo", {"train.py": '''\
import torch


@torch.compile(fullgraph=True)
def loss_fn(pred):
    return torch.fft.rfft(pred, dim=-1).abs().mean()


def main():
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = loss_fn(model(torch.randn(4, 16)))
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''})
    report = run_scan(Settings(root=root, cache=False)).report
    (fft,) = [f for f in report.findings if f.rule == "NR1601"]
    assert fft.details["compiled"] == "train.py:4" and "`loss_fn` is compiled" in fft.message
