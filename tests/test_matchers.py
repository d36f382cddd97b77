"""The code matchers' one home (sources/matchers.py): adding one there is all the scanner, the
screen and the prefilter need, and every matcher the built-in catalog names is complete."""

from __future__ import annotations

import ast

import pytest
from scanning import hits, scan_text

from neuron_ready.catalog import Catalog, load_catalog, load_text
from neuron_ready.ruletest import flagged_lines, run_example
from neuron_ready.sources import ScanContext
from neuron_ready.sources.matchers import MATCHERS, Matcher
from neuron_ready.sources.pyindex import build_index
from neuron_ready.sources.screen import reduce_source
from neuron_ready.sources.vocab import ast_chain


class PrintCall(Matcher):
    """A throwaway matcher: a call of the builtin print (not of a local or imported `print`)."""

    name = "test_print_call"
    triggers = ("print(",)
    screen_nodes = (ast.Call,)

    def call(self, node, callee, line):
        if callee == "builtins.print":
            self.report(line, node, "print()")

    @staticmethod
    def may(screen, node, entries):
        parts = ast_chain(node.func)
        return bool(parts) and "builtins.print" in screen.candidates(parts) and screen.any_may(entries)


RULE = '''
[[rule]]
id = "NR1490"
title = "print in a training step"
message = "`{name}` in the training loop"
category = "host-sync"
targets = ["native", "xla"]
confidence = "high"
evidence = "doc"
effort = { low = 0.1, likely = 0.2, high = 0.5, per = "occurrence" }
why = "w"
remedy = "r"
source = "https://example.com"
invalid = [
    "print(loss)  # flagged\\n",
    "def step(x):\\n    y = x + 1\\n    print(y)  # flagged\\n    return y\\n",
]
valid = [
    "log(loss)\\n",
    "print = logger.info\\nprint(loss)\\n",
    "from rich import print\\nprint(loss)\\n",
    "def f(print):\\n    print(1)\\n",
    "x = 'print(loss)'\\n",
]
[[rule.match]]
kind = "pattern"
matcher = "test_print_call"
'''


@pytest.fixture
def rule(monkeypatch):
    monkeypatch.setitem(MATCHERS, PrintCall.name, PrintCall)
    (rule,) = load_text(RULE, "extra.toml")
    return rule


def test_a_new_matcher_is_found_by_the_scanner(rule):
    assert rule.invalid and rule.valid
    for example in rule.invalid:
        for target in rule.targets:
            got, diagnostics = run_example(rule, example, target)
            assert not diagnostics
            assert got == flagged_lines(example), example
    for example in rule.valid:
        got, _ = run_example(rule, example)
        assert not got, example


def test_a_new_matcher_is_used_by_the_prefilter_and_the_screen(rule):
    catalog = Catalog({rule.id: rule})
    idx = build_index(catalog)
    assert "print(" in idx.triggers
    code = (
        "def unrelated(a, b):\n" + "".join(f"    a = a + b * {i}\n" for i in range(20)) + "    return a\n\n\n"
        "def step(loss):\n    print(loss)\n    return loss\n"
    )
    reduced = reduce_source(code, ast.parse(code), idx, "pkg.mod", False)
    assert reduced is not None and reduced.matchable  # the screen judged the file with the matcher's ast check
    assert "def unrelated(): pass" in reduced.text and "print(loss)" in reduced.text
    screened = scan_text(code, catalog, dedent=False)
    full = scan_text(code, catalog, dedent=False, screen=False)
    assert hits(screened) == hits(full) == [(26, "NR1490", "print()")]
    # Nothing the matcher could report: nothing is parsed.
    quiet = "def step(loss):\n    log(loss)\n    return loss\n\nprint = None\n"
    assert not reduce_source(quiet, ast.parse(quiet), idx, "pkg.mod", False).matchable


def test_every_matcher_of_the_catalog_is_complete():
    catalog = load_catalog()
    named = {m.matcher for r in catalog for m in r.match if m.kind == "pattern"}
    assert named and named <= set(MATCHERS)
    events = ("subscript", "test", "assign", "call", "assertion", "backward")
    for name, cls in MATCHERS.items():
        assert cls.name == name
        overrides = any(getattr(cls, ev) is not getattr(Matcher, ev) for ev in events)
        if not cls.triggers:  # a matcher of config files (config_precision): nothing in Python
            assert not overrides and not cls.screen_nodes, name
            continue
        assert all(cls.triggers)
        assert cls.screen_nodes, f"{name}: without an ast check the screen keeps every file whole"
        assert overrides, name
    # The screen is never turned off by the built-in catalog's matchers.
    ctx = ScanContext(catalog, "native")
    code = "import torch\n\ndef unrelated(a):\n    return a\n\nx = torch.zeros(3).cuda()\n"
    assert reduce_source(code, ast.parse(code), ctx.index, "pkg.mod", False) is not None


def test_cuda_test_shortcut_agrees_with_the_ast_path():
    """_cuda_test decides some expression kinds on the libcst node without rendering them
    (performance.md, stop 30): it must answer as the rendering and cuda_check would, for every kind."""
    import libcst as cst

    from neuron_ready.sources import matchers as _m
    from neuron_ready.sources.codefacts import cuda_check

    def full(code, cuda_locals):
        tree = ast.parse(code, mode="eval").body
        names = {n.id for n in ast.walk(tree) if type(n) is ast.Name}
        if not (_m._names_a_device(tree) or names & set(cuda_locals)):
            return None
        return cuda_check(tree, cuda_locals)

    codes = ['x.is_cuda', 'ok', 'self.cuda', 'not x.is_cuda', 'a and x.is_cuda', 'not ok or x.is_cuda',
             'any(t.is_cuda for t in ts)', 'all([t.is_cuda for t in ts])', 'str(d).startswith("cuda")',
             'torch.cuda.is_available()', 'f(x.is_cuda)', 'x.device.type == "cuda"', '"cuda" in str(d)',
             'd != "cuda:0"', '{"a": x.is_cuda}', '[x.is_cuda]', 'x.is_cuda if a else b', '(x.is_cuda)',
             'torch.device("cuda")', 'cfg["device"] == "cuda"', 'backend == "nccl"', 'True', 'x.cuda', '1 + 2']
    for cuda_locals in ((), ("ok", "self.cuda")):
        for code in codes:
            assert _m._cuda_test(cst.parse_expression(code), cuda_locals) == full(code, cuda_locals), (code, cuda_locals)
