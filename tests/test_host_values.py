"""Values on the CPU: a dynamic shape, host read, unsupported op or float64 on a value the code put
on the CPU (`.cpu()`, `.numpy()`, NumPy, a torch factory given no device, `device="cpu"`) runs on
the host wherever its line is, even in `forward` (python.py records `host_value`, context.py
`on_host_values` lists it as host-side). The read that moved it there, and the same construct on a
device tensor, stay must-port. Small trees built here, whole pipeline."""

from __future__ import annotations

import textwrap

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan

TRAIN = """\
    import torch
    from model import Net

    def main():
        net = Net().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(10):
            net(torch.randn(8, 4).cuda(), 0.5).sum().backward()
            opt.step()

    if __name__ == "__main__":
        main()
"""

NET = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, frac):
"""


def contexts(tmp_path, helpers: str, forward: str) -> tuple[dict[tuple[str, int], str], list[str]]:
    """Scan train.py and a model.py of `helpers` and a `Net.forward` of `forward`: (rule, line) ->
    context, and model.py's lines (for `line_of`)."""
    text = ("import numpy as np\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
            + textwrap.dedent(helpers) + NET + textwrap.indent(textwrap.dedent(forward), " " * 8))
    tree(tmp_path, {"train.py": TRAIN, "model.py": text})
    report = run_scan(Settings(root=tmp_path, cache=False)).report
    got = {(f.rule, f.line): f.context for f in report.findings + report.off_path if f.path == "model.py"}
    return got, text.splitlines()


def line_of(lines: list[str], code: str) -> int:
    return next(i for i, line in enumerate(lines, 1) if code in line)


def test_shapes_and_reads_on_cpu_values_in_forward_are_host_side(tmp_path):
    got, lines = contexts(tmp_path, """
        def sample(n, device):
            return torch.randint(0, 9, (n,), device=device)
    """, """
        n = x.size(0)
        keep = torch.randn(n).argsort(dim=-1) < int(n * frac)
        counts = x.sum(0).cpu()
        nz = counts.nonzero()
        picks = sample(n, device="cpu")
        few = picks[picks > 2]
        table = torch.tensor([3, 1, 2])
        order = torch.argsort(table)
        sizes = x.detach().to("cpu").long().unique()
        arr = np.arange(n)
        odd = arr[arr % 2 == 1]
        big = (counts > int(n * frac)).nonzero()
        return self.lin(x) + nz.sum() + few.sum() + order.sum() + sizes.sum() + len(odd) + big.sum()
    """)
    at = lambda code: line_of(lines, code)  # noqa: E731
    assert got[("NR1603", at("keep ="))] == "host"  # torch.randn(n): a factory given no device
    assert got[("NR1501", at("nz ="))] == "host"  # counts = x.sum(0).cpu()
    assert got[("NR1504", at("few ="))] == "host"  # picks = sample(n, device="cpu")
    assert got[("NR1603", at("order ="))] == "host"  # torch.argsort(torch.tensor([3, 1, 2]))
    assert got[("NR1502", at("sizes ="))] == "host"  # .to("cpu") then a dtype change: still on the CPU
    assert got.get(("NR1504", at("odd =")), "host") == "host"  # a NumPy array
    assert got[("NR1501", at("big ="))] == "host"  # a CPU value compared with a Python number
    # the read that moved the value to the CPU is the concern, and stays
    assert got[("NR1403", at("counts ="))] == "step"


def test_the_same_constructs_on_device_values_stay_must_port(tmp_path):
    got, lines = contexts(tmp_path, "", """
        n = x.size(0)
        keep = torch.randn(n, device=x.device).argsort(dim=-1) < int(n * frac)
        counts = x.sum(0).cpu().cuda()
        nz = counts.nonzero()
        moved = x.cpu().to(x.device)
        mv = moved.nonzero()
        table = torch.tensor(x)
        order = torch.argsort(table)
        either = torch.zeros(n, device="cuda" if frac else "cpu")
        pick = either[either > 0]
        rows = x.sum(1)
        if frac > 1:
            rows = rows.cpu()
        some = rows.nonzero()
        scaled = (torch.tensor(2.0) * x).nonzero()
        return self.lin(x[keep]) + nz.sum() + mv.sum() + order.sum() + pick.sum() + some.sum() + scaled.sum()
    """)
    at = lambda code: line_of(lines, code)  # noqa: E731
    assert got[("NR1603", at("keep ="))] == "step"  # a factory given the input's device
    assert got[("NR1501", at("nz ="))] == "step"  # .cpu().cuda(): back on the device
    assert got[("NR1501", at("mv ="))] == "step"  # .to(x.device)
    assert got[("NR1603", at("order ="))] == "step"  # torch.tensor(x) keeps x's device
    assert got[("NR1504", at("pick ="))] == "step"  # a device that may be CUDA
    assert got[("NR1501", at("some ="))] == "step"  # on the CPU on one path only
    assert got[("NR1501", at("scaled ="))] == "step"  # a CPU scalar tensor times a device tensor: on the device
    assert got[("NR1504", at("return"))] == "step"  # a device tensor indexed by a CPU mask: the device's shape


def test_a_resize_of_a_legacy_cpu_tensor_is_host_side(tmp_path):
    got, lines = contexts(tmp_path, """
        def resize(x_np, size):
            x_t = torch.Tensor(x_np)[None, None, ...]
            return F.interpolate(x_t, size=size, mode="bicubic")[0, 0].numpy()
    """, """
        y = F.interpolate(x[None, None], size=(8, 8), mode="bicubic")
        return self.lin(x) + resize(x.detach().cpu().numpy(), (4, 4)).sum() + y.sum()
    """)
    assert got[("NR1607", line_of(lines, "return F.interpolate"))] == "host"  # torch.Tensor(...) is on the CPU
    assert got[("NR1607", line_of(lines, "y = F.interpolate"))] == "step"  # the same resize of a device tensor


def _pipeline(tmp_path, forward: str):
    tree(tmp_path, {
        "train.py": """\
            import torch
            from data.graph import subgraph
            from model import Net

            def main():
                net = Net().cuda()
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                g = subgraph(torch.randn(8, 4), torch.rand(8) > 0.5)
                for _ in range(10):
                    net(g.cuda()).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main()
        """,
        "data/__init__.py": "",
        "data/graph.py": """\
            from utils import keep_rows

            def subgraph(x, mask):
                return keep_rows(x, mask)
        """,
        "utils.py": """\
            import torch

            def keep_rows(x, mask):
                return x[mask.nonzero()[:, 0]]
        """,
        "model.py": "import torch\nfrom torch import nn\nfrom utils import keep_rows\n" + NET
                    + textwrap.indent(textwrap.dedent(forward), " " * 8),
    })
    report = run_scan(Settings(root=tmp_path, cache=False)).report
    return {(f.path, f.rule): f.context for f in report.findings + report.off_path}


def test_what_only_the_data_pipeline_calls_is_host_side(tmp_path):
    got = _pipeline(tmp_path, "return self.lin(x)\n")
    assert got[("utils.py", "NR1501")] == "host"  # called only by data/graph.py's subgraph


def test_a_helper_the_step_also_calls_stays_must_port(tmp_path):
    got = _pipeline(tmp_path, "return self.lin(keep_rows(x, x[:, 0] > 0))\n")
    assert got[("utils.py", "NR1501")] == "step"  # forward calls it too
