"""Guards and fallbacks for the Python scanner (python.py): which code is an optional GPU path.

An import inside `try/except ImportError` or behind `find_spec` / `is_*_available()` is optional;
a kernel path behind `if x.is_cuda:` (or a HAS_TRITON-style flag) with a PyTorch path beside it
is a fallback; what sits under `if TYPE_CHECKING:` never runs; the `except AttributeError/TypeError:` of a try
that calls a newer torch API (`torch.amp.GradScaler(device=...)`) runs only on an older PyTorch.
The scanner enters and leaves the blocks; this module says which guards are open at each position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from .cstwalk import iter_subtree
from .pyindex import CAPABILITY
from .scopes import Scope
from .vocab import dotted_parts, literal_value, load_libcst

load_libcst()

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError"})
_RUNTIME_ERRORS = frozenset({"Exception", "BaseException", "RuntimeError", "NotImplementedError"})
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit", "builtins.exit", "builtins.quit"})
# What an older PyTorch raises for an API it lacks (a missing attribute, an unknown keyword).
_MISSING_API = frozenset({"AttributeError", "TypeError"})

IMPORT, KERNEL, TYPE, COMPAT = "import", "kernel", "type", "compat"


@dataclass(frozen=True, slots=True)
class Guard:
    """What a guarded block means, and which branch of which `if` it is (for hits on both sides)."""

    kind: str  # IMPORT: only imports inside are optional; KERNEL: a GPU path with a PyTorch path beside it;
    #            TYPE: under TYPE_CHECKING, never runs; COMPAT: the fallback for an older PyTorch
    owner: int = 0  # id of the `if` whose branches it guards; 0 for try blocks and TYPE_CHECKING
    branch: int = 0  # 0: the body, 1: the else (or elif chain)


class Guards:
    """The guards open at the walk's position, and the hits recorded in each branch of a capability `if`."""

    def __init__(self) -> None:
        self.blocks: dict[int, Guard] = {}  # id of a block (body, else) -> the guard it opens
        self.open: list[Guard] = []
        self.elifs: dict[int, Guard] = {}  # id of an elif (entered as an If, not a block) -> its guard
        self.rest: set[int] = set()  # ids of `if <capability>: ... return` statements
        self.ifexp_arms: set[int] = set()  # ids of nodes inside the arms of a capability IfExp
        self.branch_hits: dict[int, tuple[list, list]] = {}  # GPU hits per branch of a capability `if`

    # ------------------------------------------------------------------ questions

    def in_kernel_guard(self, scopes: list[Scope]) -> bool:
        return any(g.kind == KERNEL for g in self.open) or any(s.guard_rest for s in scopes if s.kind == "function")

    def import_guard(self) -> tuple[bool, bool]:
        """(guarded, type_only) for an import at the current position: an import in a capability
        branch with an alternative (`if find_spec("apex"): from apex import X else: X = nn.X`) is as
        optional as one under `try/except ImportError`."""
        return any(g.kind in (IMPORT, KERNEL) for g in self.open), any(g.kind == TYPE for g in self.open)

    def fallback(self, guarded: bool, optional: bool, node: cst.CSTNode, scopes: list[Scope]) -> tuple[bool, Guard | None]:
        """(is it a fallback, the kernel guard whose branch holds it) for a hit of a rule with a
        PyTorch path (`optional`: the rule's fallback flag) reached through a guarded import or not."""
        kernel = [g for g in self.open if g.kind == KERNEL]
        if kernel:
            return True, kernel[-1]  # judged again with the other branch (both GPU: no fallback)
        if guarded and optional:
            return True, None
        return self.in_kernel_guard(scopes) or id(node) in self.ifexp_arms, None

    def record(self, hit, owner: Guard) -> None:
        """A hit inside a branch of a capability `if`: judged again when the `if` is left."""
        if owner.owner:
            self.branch_hits.setdefault(owner.owner, ([], []))[owner.branch].append(hit)

    # ------------------------------------------------------------------ blocks

    def enter_block(self, node: cst.CSTNode) -> None:
        guard = self.blocks.get(id(node))
        if guard:
            self.open.append(guard)

    def leave_block(self, node: cst.CSTNode) -> None:
        if id(node) in self.blocks:
            self.open.pop()

    def enter_try(self, node: cst.Try, resolve=None) -> None:
        caught = set()
        runtime_fallback = False
        newer_torch = resolve is not None and _calls_torch(node.body, resolve)
        for h in node.handlers:
            names = _handler_names(h)
            if newer_torch and names and names <= _MISSING_API:
                # `try: torch.amp.GradScaler(device=d) except (AttributeError, TypeError): torch.cuda.amp...`
                self.blocks[id(h.body)] = Guard(COMPAT)
            if names & _IMPORT_ERRORS and raises(h.body):
                continue  # `except ImportError: raise ...`: the import is required, not optional
            caught |= names
            if names & _RUNTIME_ERRORS and not _only_reraises(h):
                runtime_fallback = True
        if caught & _IMPORT_ERRORS:
            self.blocks[id(node.body)] = Guard(KERNEL if runtime_fallback else IMPORT)

    def enter_if(self, node: cst.If) -> None:
        owner_guard = self.elifs.get(id(node))
        if owner_guard:
            self.open.append(owner_guard)
        test = node.test
        parts = dotted_parts(test)
        if parts and parts[-1] == "TYPE_CHECKING":
            self.blocks[id(node.body)] = Guard(TYPE)
            return
        if not is_capability_test(test):
            return
        ends_with_return = type(_last_stmt(node.body)) is cst.Return
        gives_up = node.orelse is not None and type(node.orelse) is not cst.If and raises(node.orelse.body)
        if gives_up:
            return  # `if HAS_FLASH: ... else: raise ...`: no other path
        has_alternative = node.orelse is not None or ends_with_return
        kind = KERNEL if has_alternative else IMPORT
        self.blocks[id(node.body)] = Guard(kind, id(node), 0)
        if node.orelse is not None:
            # An elif is entered as an If, not as a block: the guard spans the whole chain.
            target = self.elifs if type(node.orelse) is cst.If else self.blocks
            target[id(node.orelse)] = Guard(kind, id(node), 1)
        elif ends_with_return:
            self.rest.add(id(node))

    def leave_if(self, node: cst.If, scope: Scope) -> None:
        if id(node) in self.rest and scope.kind == "function":
            # `if not x.is_cuda: return reference(x)`: what follows in the function is the kernel path.
            scope.guard_rest = True
        if id(node) in self.elifs:
            self.open.pop()
        branches = self.branch_hits.pop(id(node), None)
        if branches and branches[0] and branches[1]:
            # GPU code on both sides (e.g. `if TRITON3: ... else: ...`) is a choice between two
            # kernel paths, not a kernel path with a PyTorch fallback.
            for hit in branches[0] + branches[1]:
                hit.fallback = False

    def enter_ifexp(self, node: cst.IfExp) -> None:
        if is_capability_test(node.test):
            # Both arms: whichever is the kernel path, the other is its fallback.
            for arm in (node.body, node.orelse):
                self.ifexp_arms.update(id(n) for n in iter_subtree(arm))


def _calls_torch(block: cst.CSTNode, resolve) -> bool:
    """Whether a block calls a device-generic torch API (`torch.amp...`, not `torch.cuda...`)."""
    for n in iter_subtree(block):
        if type(n) is cst.Call and type(n.func) in (cst.Name, cst.Attribute):
            q = resolve(n.func)[0]
            if q and q.startswith("torch.") and not q.startswith("torch.cuda."):
                return True
    return False


def _last_stmt(block: cst.CSTNode) -> cst.CSTNode | None:
    body = getattr(block, "body", None)
    if not body:
        return None
    last = body[-1]
    if type(last) is cst.SimpleStatementLine and last.body:
        return last.body[-1]
    return last


def _names_in(expr: cst.CSTNode) -> Iterator[str]:
    for n in iter_subtree(expr):
        if type(n) is cst.Name:
            yield n.value
        elif type(n) is cst.SimpleString:
            v = literal_value(n)
            if v == "cuda":
                yield "cuda"


def is_capability_test(expr: cst.CSTNode) -> bool:
    return any(CAPABILITY.search(name) for name in _names_in(expr))


def _handler_names(handler: cst.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    exprs = handler.type.elements if type(handler.type) is cst.Tuple else [handler.type]
    out = set()
    for e in exprs:
        if isinstance(e, cst.Element):
            e = e.value
        parts = dotted_parts(e)
        if parts:
            out.add(parts[-1])
    return out


def raises(block: cst.CSTNode) -> bool:
    """A block that gives up (raise, assert, sys.exit) rather than doing something else: an
    `except ImportError:` or `else:` like that is an error message, not a fallback."""
    for st in getattr(block, "body", ()):
        small = st.body if type(st) is cst.SimpleStatementLine else [st]
        for x in small:
            if type(x) in (cst.Raise, cst.Assert):
                return True
            if type(x) is cst.Expr and type(x.value) is cst.Call:
                parts = dotted_parts(x.value.func)
                if parts and ".".join(parts) in _EXITS:
                    return True
    return False


def _only_reraises(handler: cst.ExceptHandler) -> bool:
    last = _last_stmt(handler.body)
    body = getattr(handler.body, "body", [])
    return len(body) == 1 and type(last) is cst.Raise
