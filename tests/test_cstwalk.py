"""The fast walker must report exactly the lines libcst's PositionProvider reports."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from neuron_ready.sources.cstwalk import Walker, field_order

TRACKED = (cst.Name, cst.Call, cst.Attribute, cst.Subscript, cst.If, cst.SimpleStatementLine, cst.Decorator,
           cst.SimpleString, cst.Comparison, cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef)

TRICKY = '''
import os, \\
    sys
x = (
    1 +
    2
)
s = """a
b
c"""
f = f"""{x}
{s!r:>{10}}
"""
@decorator(
    arg=1,
)
@other
def g(a,
      b=(1, 2),
      *args, c: "int" = 3, **kw) -> "str":
    """doc
    string"""
    if a and \\
            b:
        return [i for i in range(3)
                if i]
    elif (a
          or b):
        pass
    lam = lambda q, \\
        r: q
    return (yield from h())


class K(Base, metaclass=Meta):
    y: int = 3
    def m(self): return self.y  # comment
match x:
    case [1, *rest] if rest:
        pass
    case {"k": v}:
        pass
    case _:
        pass
z = d["k"] if (w := 3) else -1
'''


def _walker_lines(module: cst.Module) -> list[tuple[str, int]]:
    seen: list[tuple[str, int]] = []
    w = Walker()
    for cls in TRACKED:
        w.enter[cls] = lambda node, line, seen=seen: seen.append((type(node).__name__, line))
    w.walk(module)
    return seen


def _reference_lines(module: cst.Module) -> list[tuple[str, int]]:
    pos = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out: list[tuple[str, int]] = []

    class V(cst.CSTVisitor):
        def on_visit(self, node):
            if isinstance(node, TRACKED):
                out.append((type(node).__name__, pos[node].start.line))
            return True

    module.visit(V())
    return out


def _compare(code: str) -> None:
    module = cst.parse_module(code)
    ours = sorted(_walker_lines(module))
    ref = sorted(_reference_lines(module))
    # Decorated definitions: PositionProvider starts a def at `def`, as we do; decorators are separate.
    assert ours == ref


def test_tricky_constructs_match_position_provider():
    _compare(TRICKY)


def _torch_files(limit: int) -> list[Path]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    files = sorted((root / "nn").rglob("*.py")) + sorted((root / "optim").rglob("*.py"))
    return files[:limit]


@pytest.mark.parametrize("index", range(0, 40, 4))
def test_real_files_match_position_provider(index):
    files = _torch_files(40)
    for path in files[index : index + 4]:
        _compare(path.read_text(encoding="utf-8"))


def test_field_order_covers_every_child_field():
    leaf_values = {"value", "star", "indent", "encoding", "default_indent", "default_newline",
                   "has_trailing_newline", "start", "end", "conversion"}
    for name in dir(cst):
        cls = getattr(cst, name)
        if isinstance(cls, type) and issubclass(cls, cst.CSTNode) and dataclasses.is_dataclass(cls):
            try:
                order = field_order(cls)
            except (OSError, TypeError, AttributeError):
                continue  # abstract bases
            missing = {f.name for f in dataclasses.fields(cls)} - set(order) - leaf_values
            assert not missing, f"{name}: fields {missing} would not be walked"
