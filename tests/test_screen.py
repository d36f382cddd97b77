"""The ast screen (sources/screen.py) cuts what no rule can match before libcst parses a file.

It is an optimisation only: every test here scans the same text with and without it and wants the
same findings and diagnostics, field for field, over the catalog's own examples (as written, inside
a function and inside a method), the fixture repositories, and generated files. The rest check that
it does cut (or it would not save anything) and where it must not.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_ready.catalog import load_catalog
from neuron_ready.sources import ScanContext
from neuron_ready.sources.screen import reduce_source
from scanning import scan_text

CATALOG = load_catalog()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PY_RULES = [r for r in CATALOG if r.example_file.endswith(".py")]


def report(result) -> tuple:
    return (
        [dataclasses.asdict(f) for f in result.findings],
        [dataclasses.asdict(d) for d in result.diagnostics],
        result.suppressed,
    )


def assert_same(code: str, target: str = "native", name: str = "example.py") -> tuple:
    screened = report(scan_text(code, CATALOG, name, target, screen=True, dedent=False))
    full = report(scan_text(code, CATALOG, name, target, screen=False, dedent=False))
    assert screened == full, code
    return screened


def cut(code: str, module: str = "pkg.mod"):
    ctx = ScanContext(CATALOG, "native")
    return reduce_source(code, ast.parse(code), ctx.index, module, False)


def wrapped(example: str) -> list[str]:
    """The example as written, as a function body and as a method body (imports move with it)."""
    body = textwrap.indent(example.strip("\n"), "    ")
    return [
        example,
        f"def helper_one():\n    return 1\n\n\ndef train_step():\n{body}\n",
        f"class Model:\n    def other(self):\n        return 2\n\n    def forward(self):\n{textwrap.indent(body, '    ')}\n",
    ]


@pytest.mark.parametrize("rule", PY_RULES, ids=lambda r: r.id)
def test_catalog_examples_scan_the_same_with_and_without_the_screen(rule):
    for example in rule.invalid + rule.valid:
        for code in wrapped(example):
            for target in rule.targets:
                assert_same(code, target)


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_files_scan_the_same_with_and_without_the_screen(path):
    code = path.read_text(encoding="utf-8", errors="replace")
    for target in ("native", "xla"):
        assert_same(code, target, path.name)


BIG_UNRELATED = "def unrelated(a, b):\n" + "".join(f"    a = a + b * {i}\n" for i in range(40)) + "    return a\n"


def test_unrelated_functions_are_cut_and_lines_map_back():
    code = (
        "import torch\n\n"
        + BIG_UNRELATED
        + "\n\nclass Net(torch.nn.Module):\n"
        + textwrap.indent(BIG_UNRELATED.replace("(a, b)", "(self, a, b)"), "    ")
        + "\n    def forward(self, x):\n        return x.cuda()\n"
    )
    reduced = cut(code)
    assert reduced is not None
    assert "def unrelated(): pass" in reduced.text and "    def unrelated(): pass" in reduced.text
    assert len(reduced.text) < len(code) / 3
    findings = assert_same(code)[0]
    cuda_line = code.splitlines().index("        return x.cuda()") + 1
    assert [(f["rule"], f["line"], f["scope"]) for f in findings] == [("NR1001", cuda_line, "Net.forward")]


def test_nothing_to_cut_gives_none():
    assert cut("import torch\nx = torch.zeros(3).cuda()\n") is None
    assert cut("import torch\ndef f(x):\n    return x.cuda()\n") is None



def test_a_file_nothing_can_match_is_not_parsed_by_libcst():
    # `.cuda()` is flagged only in files that import torch (the clause `requires` it).
    assert not cut("def f(x):\n    return x.cuda()\n").matchable
    assert not cut("import torch\n\ndef add(a, b):\n    return a + b\n\nclass A:\n    x = 1\n").matchable
    assert cut("import torch\n\ndef add(a, b):\n    return a + b\n\ny = add(1, 2).cuda()\n").matchable
    assert_same("def f(x):\n    return x.cuda()\n")


def test_names_resolve_through_any_alias_in_the_file():
    code = "import torch\n\ndev = torch.cuda\n\ndef sync():\n    dev.synchronize()\n\ndef other():\n    return dev\n"
    assert cut(code).text.endswith("def other(): pass\n")  # `dev` is torch.cuda: sync() stays
    assert [f["rule"] for f in assert_same(code)[0]] == ["NR1007"]


def test_an_import_a_rule_requires_is_kept_when_only_a_cut_function_has_it():
    # NR1001 (`.cuda()`) requires the file to import torch; here only an otherwise empty function does.
    code = "def setup():\n    import torch\n    return 1\n\nx = model.cuda()\n"
    assert cut(code) is None
    assert [f["rule"] for f in assert_same(code)[0]] == ["NR1001"]
    code2 = "import torch\n\ndef setup():\n    import torch\n    return 1\n\nx = model.cuda()\n"
    assert "def setup(): pass" in cut(code2).text


def test_triton_kernels_stay_for_their_launches():
    code = textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def _add(x_ptr, n):
            pid = tl.program_id(0)

        def unrelated():
            return 3

        def add(x):
            _add[(1,)](x, 4)
    ''')
    reduced = cut(code)
    assert reduced is not None and "@triton.jit" in reduced.text and "def unrelated(): pass" in reduced.text
    rules = {f["rule"] for f in assert_same(code)[0]}
    assert {"NR1801", "NR1803"} <= rules, rules  # the kernel, and its launch in add()


@pytest.mark.parametrize("call", ["_scale = triton.jit(_scale)", "if True:\n    _scale = triton.jit(_scale)",
                                  "triton.jit(_scale)", "def build():\n    return triton.jit(_scale)"])
def test_a_kernel_made_by_a_call_stays_wherever_the_call_is(call):
    # python.py reports any call of a kernel decorator on a module function; the screen keeps the
    # same calls and defs, so screened and full scans agree whatever statement holds the call
    code = "import triton\nimport triton.language as tl\n\ndef _scale(x_ptr, n):\n" \
           "    tl.store(x_ptr, tl.load(x_ptr) * 2)\n\n" + call + "\n"
    assert "NR1801" in {f["rule"] for f in assert_same(code)[0]}


def test_decorators_comments_and_crlf_keep_their_lines():
    code = (
        "import torch\r\n"
        "import functools\r\n\r\n"
        "@functools.lru_cache()\r\n"
        "# a comment inside the decorated region\r\n"
        "def cached(n):\r\n"
        "    return n * 2\r\n\r\n"
        "y = torch.zeros(1).cuda()  # noqa\r\n"
    )
    reduced = cut(code)
    assert reduced is not None and "@functools" not in reduced.text
    findings = assert_same(code)[0]
    assert [(f["rule"], f["line"]) for f in findings] == [("NR1001", 9)]


def test_a_lone_carriage_return_turns_the_screen_off():
    assert cut("import torch\rdef f():\r    return 1\rx = 1\n") is None


def test_syntax_errors_are_reported_as_before():
    code = "import torch\n\ndef ok():\n    return 1\n\ndef broken(:\n    pass\n"
    diagnostics = assert_same(code)[1]
    assert diagnostics and diagnostics[0]["kind"] == "syntax-error"


# Generated files: random functions, methods and guarded blocks around catalog snippets and plain code.
SNIPPETS = [e for r in PY_RULES for e in r.invalid + r.valid if len(e) < 600] + [
    "x = a + b\nreturn x",
    "for i in range(n):\n    total += i",
    "if mask is None:\n    mask = ones\nreturn y[mask]",
    "with torch.no_grad():\n    out = model(x)",
]


def _function(name: str, body: str, indent: str = "") -> str:
    return textwrap.indent(f"def {name}(self, x):\n" + textwrap.indent(body.strip("\n") or "pass", "    ") + "\n", indent)


@st.composite
def files(draw):
    parts = [draw(st.sampled_from(["import torch\n", "import torch as t\nimport torch.nn.functional as F\n", ""]))]
    for i in range(draw(st.integers(1, 5))):
        body = draw(st.sampled_from(SNIPPETS))
        shape = draw(st.sampled_from(["module", "function", "method", "guarded", "decorated"]))
        if shape == "module":
            parts.append(body.replace("return ", "_ = ") + "\n")
        elif shape == "function":
            parts.append(_function(f"f{i}", body))
        elif shape == "method":
            parts.append(f"class C{i}:\n    attr = {i}\n" + _function(draw(st.sampled_from(["forward", "step", f"m{i}"])), body, "    "))
        elif shape == "guarded":
            parts.append("try:\n    import triton\nexcept ImportError:\n" + _function(f"g{i}", body, "    "))
        else:
            parts.append("@torch.no_grad()\n" + _function(f"d{i}", body))
    return "\n\n".join(parts)


@given(files(), st.sampled_from(["native", "xla"]))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_files_scan_the_same_with_and_without_the_screen(code, target):
    assert_same(code, target)
