"""Keyword options tied to the function a call resolves to (docs/contexts.md "Keyword options"): a
keyword passed at a call overrides the parameter of the callee alone, a wrapper's own default passed
down (`Inner(flag=flag)`) is the value the callee runs with, and a default that every call overrides
never runs. Calls the scan cannot resolve keep the name-wide answer (codefacts.py `passed`,
`signatures`, `handed`; context.py `Defaults.param_value`, `always_passed`, `unused_defaults`)."""

from __future__ import annotations

import ast

from scanning import write_tree as tree
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.sources.codefacts import code_facts, unpacked

OPS = """\
    import torch

    def fast_path(x, use_fast=False):
        if use_fast:
            x = torch.nonzero(x)
        return x

    def slow_path(x, use_fast=False):
        if use_fast:
            x = torch.nonzero(x)
        return x

    class Inner(torch.nn.Module):
        def __init__(self, sparse=True):
            super().__init__()
            self.sparse = sparse

        def forward(self, x):
            if self.sparse:
                x = torch.nonzero(x)
            return x

    class Outer(torch.nn.Module):
        def __init__(self, sparse=False):
            super().__init__()
            self.inner = Inner(sparse=sparse)

        def forward(self, x):
            return self.inner(x)

    def make_buffer(n, device=torch.device("cuda")):
        return torch.zeros(n, device=device)

    def fill(n, device="cuda"):
        return torch.ones(n, device=device)
"""

TRAIN = """\
    import torch
    import ops

    def main():
        net = ops.Outer({outer})
        opt = torch.optim.SGD(net.parameters())
        x = ops.make_buffer(4{buffer}) + ops.fill(4{buffer})
        x = ops.fast_path(x, use_fast=True) + ops.slow_path(x)
        {extra}
        net(x).sum().backward()
        opt.step()

    if __name__ == "__main__":
        main()
"""

LINES = {"fast": 5, "slow": 10, "inner": 20, "default": 31, "use": 35}


def _contexts(tmp_path, outer="", buffer=", device=torch.device('cpu')", extra="pass", files=None):
    root = tree(tmp_path, {"ops.py": OPS, "train.py": TRAIN.format(outer=outer, buffer=buffer, extra=extra),
                           **(files or {})})
    report = run_scan(Settings(root=root, cache=False)).report
    got = {}
    for f in report.findings + report.off_path:
        if f.path == "ops.py":
            got.setdefault(f.line, (f.context, f.gate, f.details.get("context_reason")))
    return {what: got.get(line) for what, line in LINES.items()}


def test_a_keyword_overrides_only_the_parameter_of_the_function_the_call_resolves_to(tmp_path):
    got = _contexts(tmp_path)
    assert got["fast"][0] == "step"  # fast_path(x, use_fast=True)
    # slow_path's own parameter of the same name is not turned on by the call of fast_path
    assert got["slow"][:2] == ("opt-in", "only when use_fast (use_fast defaults to False)")


def test_a_call_that_cannot_be_resolved_keeps_the_keyword_project_wide(tmp_path):
    got = _contexts(tmp_path, extra="getattr(ops, 'slow_' + 'path')(x, use_fast=True)")
    assert got["slow"][0] == "step"  # the call names no function: it may be any `use_fast`


def test_a_wrappers_default_passed_down_is_the_value_the_callee_runs_with(tmp_path):
    # Outer() passes its own default sparse=False to Inner(sparse=sparse), whose default is True
    assert _contexts(tmp_path)["inner"][0] == "opt-in"
    # a caller that turns the wrapper's keyword on reaches the callee through the forwarding
    assert _contexts(tmp_path, outer="sparse=True")["inner"][0] == "step"
    # a second, direct construction that keeps Inner's own default keeps the branch must-port
    assert _contexts(tmp_path, extra="ops.Inner()(x)")["inner"][0] == "step"


def test_a_default_every_call_overrides_never_runs(tmp_path):
    got = _contexts(tmp_path)
    why = "every call of `{}` passes `device`: the default never runs"
    assert got["default"] == ("off-path", None, why.format("make_buffer"))  # the default expression itself
    assert got["use"] == ("off-path", None, why.format("fill"))  # `device=device`: the CUDA value is that default's


def test_a_default_some_call_leaves_or_the_facts_cannot_follow_stays_must_port(tmp_path):
    got = _contexts(tmp_path, buffer="")  # make_buffer(4), fill(4): the defaults run
    assert got["default"][0] == got["use"][0] == "step"
    assert _contexts(tmp_path, buffer=", torch.device('cpu')")["default"][0] == "off-path"  # by position
    # handed on as a value, the function may be called where no fact sees it
    assert _contexts(tmp_path, extra="fn = ops.make_buffer")["default"][0] == "step"
    # tests pass every option by design: a call only in a test is no call of the training job
    files = {"lib.py": "import torch\ndef make(n, device=torch.device('cuda')):\n    return torch.zeros(n, device=device)\n",
             "tests/test_lib.py": "import torch\nfrom lib import make\nmake(1, device=torch.device('cpu'))\n"}
    root = tree(tmp_path / "lib", files)
    report = run_scan(Settings(root=root, cache=False)).report
    assert {f.line: f.context for f in report.findings if f.path == "lib.py"} == {2: "step"}


def test_facts_record_each_call_under_its_callee_with_signatures_and_handed_names():
    src = (
        "import torch\nfrom .ops import Block\n"
        "def run(x, flag=False, *, dev=torch.device('cuda')):\n"
        "    Block(x, 3, flag=flag)\n"
        "    Block(x, 3, flag=flag)\n"  # the same call twice is one record
        "    helper(*x, k=1)\n"
        "    cb = Block\n"
    )
    facts = code_facts(ast.parse(src), "pkg.m", False)
    assert all(type(facts[k]) is str for k in ("passed", "signatures", "handed"))  # JSON text until the context pass
    facts = {k: unpacked(facts, k) for k in ("passed", "signatures", "handed")}
    assert facts["passed"]["q:pkg.ops.Block"] == [[["?", 3], {"flag": {"param": "flag", "default": False, "owner": "run"}}, 0]]
    assert facts["passed"][""] == [[0, {"k": 1}, 1]]  # names nothing resolvable; spreads *x
    assert facts["passed"]["q:torch.device"] == [[["cuda"], {}, 0]]
    assert facts["signatures"]["run"] == [["flag", 1, 3, 3], ["dev", -1, 3, 3]]
    assert "q:pkg.ops.Block" in facts["handed"]


WRAPPERS = """\
    import torch

    class Attend(torch.nn.Module):
        def __init__(self, flash=False):
            super().__init__()
            self.flash = flash

        def forward(self, x):
            if self.flash:
                x = torch.nonzero(x)
            return x

    class Attention(torch.nn.Module):
        def __init__(self, flash=False):
            super().__init__()
            self.attend = Attend(flash=flash)

    class Encoder(torch.nn.Module):
        def __init__(self, attn_flash=False):
            super().__init__()
            self.attn = Attention(flash=attn_flash)
""" + "".join(f"""
    class Unet{n}(torch.nn.Module):
        def __init__(self, attn_flash=False):
            super().__init__()
            kwargs = dict(attn_flash=attn_flash)
            self.enc = Encoder(**kwargs)
""" for n in "ABC")


def test_a_keyword_forwarded_through_calls_the_scan_cannot_resolve_keeps_the_name_wide_rule(tmp_path):
    # Attend <- Attention <- Encoder are resolved calls; Encoder(**kwargs) built from `dict(attn_flash=...)`
    # in three sibling classes is not: each forwards its own default, as the name-wide rule says
    root = tree(tmp_path, {"nets.py": WRAPPERS, "train.py": """\
        import torch
        from nets import UnetA
        def main():
            net = UnetA()
            torch.optim.SGD(net.parameters()).step()
        if __name__ == "__main__":
            main()
    """})
    report = run_scan(Settings(root=root, cache=False)).report
    got = {f.line: (f.context, f.gate) for f in report.findings + report.off_path if f.path == "nets.py"}
    assert got[10] == ("opt-in", "only when self.flash (flash defaults to False)")


def test_a_method_called_by_name_sets_only_the_parameters_of_functions_of_that_name(tmp_path):
    # `builder.build(use_fast=True)` on an object the scan cannot follow may call any `build`, so it
    # sets `build`'s parameter; it does not set the parameter of the same name of `slow_path`, whose
    # calls keep its default. A method name no project function has keeps the name-wide rule.
    got = _contexts(tmp_path, files={"builder.py": "import torch\ndef build(x, use_fast=False):\n"
                                                   "    return torch.nonzero(x) if use_fast else x\n"},
                    extra="registry['b'].build(x, use_fast=True)")
    assert got["slow"][:2] == ("opt-in", "only when use_fast (use_fast defaults to False)")
    got = _contexts(tmp_path / "other", extra="registry['b'].unknown_method(x, use_fast=True)")
    assert got["slow"][0] == "step"  # no project function is called `unknown_method`: any `use_fast`
