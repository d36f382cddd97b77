"""Scopes and name resolution for the Python scanner (python.py).

Names are resolved to fully qualified names through the file's imports and simple aliases
(`import torch.utils.cpp_extension as ext; ext.load` is `torch.utils.cpp_extension.load`;
`np.unique` is `numpy.unique`, never `torch.unique`). A local value shadows an import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .vocab import BUILTINS, dotted_parts, literal_value, load_libcst

load_libcst()


@dataclass(slots=True)
class Binding:
    qualname: str | None  # None: a local value that shadows any import
    guarded: bool = False
    type_only: bool = False
    alias: bool = False  # bound by assignment (`dt = torch.float64`), not by an import
    param: bool = False  # a parameter of the function: its value is the caller's


@dataclass(slots=True)
class Scope:
    kind: str  # module, class, function
    name: str
    bindings: dict[str, Binding] = field(default_factory=dict)
    trains: bool = False  # calls backward() or an optimizer step
    guard_rest: bool = False  # an earlier `if <capability>: return ...` makes the rest a kernel path
    candidates: list = field(default_factory=list)  # hits waiting for the scope's facts (within=)
    start: int = 0
    in_class: bool = False  # a method
    owner: str = ""  # the enclosing class of a method
    kernel_hits: list = field(default_factory=list)  # decorator hits (Triton kernels) of this def


class Names:
    """The stack of scopes at the walk's position, and what a name chain means there."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = [Scope("module", "")]
        # Node ids with a role decided by a parent: definitions, parameters, assignment targets,
        # keyword names; never free references.
        self.nonref: set[int] = set()

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def scope_name(self) -> str:
        return ".".join(s.name for s in self.scopes[1:])

    def lookup(self, name: str) -> Binding | None:
        scopes = self.scopes
        last = len(scopes) - 1
        for i in range(last, -1, -1):
            s = scopes[i]
            if s.kind == "class" and i != last:
                continue  # class bodies are not visible from their methods
            b = s.bindings.get(name)
            if b is not None:
                return b
        if name in BUILTINS:
            return Binding(f"builtins.{name}")
        return None

    def resolve(self, node: cst.CSTNode) -> tuple[str | None, bool]:
        """(qualified name, reached through a guarded import) for a name chain bound to an import."""
        parts = dotted_parts(node)
        if not parts:
            return None, False
        b = self.lookup(parts[0])
        if b is None or b.qualname is None:
            return None, False
        q = b.qualname if len(parts) == 1 else b.qualname + "." + ".".join(parts[1:])
        return q, b.guarded

    def bind(self, name: str, binding: Binding) -> None:
        self.scopes[-1].bindings[name] = binding

    def bind_local(self, target: cst.CSTNode, value: cst.CSTNode | None = None) -> None:
        """Bind an assignment target (names in tuples and lists too) to a local value, or to what
        `value` resolves to when it is a name chain (an alias)."""
        t = type(target)
        if t is cst.Name:
            self.nonref.add(id(target))
            cur = self.scope.bindings.get(target.value)
            if value is not None:
                lit = literal_value(value)
                if lit is None or lit is True or lit is False:
                    if cur is not None and cur.qualname is not None:
                        return  # `flash_attn = None` in an except branch keeps the import's meaning
                q, guarded = self.resolve(value) if type(value) in (cst.Name, cst.Attribute) else (None, False)
                if q is not None:
                    self.bind(target.value, Binding(q, guarded, alias=True))  # `F = torch.nn.functional`
                    return
            self.bind(target.value, Binding(None))
        elif t in (cst.Tuple, cst.List):
            for el in target.elements:
                self.bind_local(el.value)
        elif t is cst.StarredElement:
            self.bind_local(target.value)
