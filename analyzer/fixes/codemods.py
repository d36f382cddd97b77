"""The codemods of `neuron-ready fix`, with libcst, through the nodes the scanner matched.

`decide(hit, module)` says what one finding's fix is: an Edit, or why the finding is left alone.
`apply(module, edits)` rewrites the module once for all edits. A codemod replaces only the
matched node (or the one statement around it), so every comment and all formatting elsewhere stay.

Rewrites that need the device introduce it once per module, after the imports:

    # The accelerator this module runs on (CUDA, Neuron, ...), else the CPU: set by `neuron-ready fix`.
    DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")

`torch.accelerator`'s synchronize, memory and set-device calls raise on a machine without an
accelerator (torch 2.13), so those are guarded with `torch.accelerator.is_available()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

import libcst as cst

from ..sources.cstwalk import field_order, is_node_type
from ..sources.python import Hit, dotted_parts, find_arg, iter_subtree, literal_value, string_shapes

DEVICE_INIT = 'torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'
DEVICE_COMMENT = "# The accelerator this module runs on (CUDA, Neuron, ...), else the CPU: set by `neuron-ready fix`."
_CUDA_WORD = re.compile(r"(?i)cuda|gpu")
# A file that builds or loads a CUDA extension: its Python is a wrapper around CUDA-only code.
_EXTENSION_TEXT = re.compile(r"cpp_extension|load_inline|torch\.ops\.load_library|CUDAExtension")
_EXTENSION_MODULE = re.compile(r"(?i)^(_C|\w*_cuda|cuda_\w+|\w*_cuda_\w*|\w+_ext|\w+_extension)$")

Replace = Callable[[cst.CSTNode], cst.CSTNode]


@dataclass
class Edit:
    """What one finding's fix changes: node id -> a function of the (already updated) node."""

    replace: dict[int, Replace] = field(default_factory=dict)
    drops: list[tuple[int, int]] = field(default_factory=list)  # (id of a block, index of a statement)
    nodes: list[cst.CSTNode] = field(default_factory=list)  # the original nodes it touches
    device: bool = False  # uses the module's device variable
    torch: bool = False  # spells `torch.`


class ModuleContext:
    """Per-file facts the codemods share: parents (built on first use), the device variable's name."""

    def __init__(self, module: cst.Module, text: str, imports: list[str]) -> None:
        self.module = module
        self.extension = bool(_EXTENSION_TEXT.search(text)) or any(
            _EXTENSION_MODULE.match(m.rsplit(".", 1)[-1]) for m in imports
        )
        self._parents: dict[int, cst.CSTNode] | None = None
        self._device: str | None = None
        self.torch, self.imports_torch = torch_name(module)

    def code(self, text: str) -> str:
        """`text` with `torch.` spelled as the module imports it (`import torch as th`: `th.`)."""
        return text if self.torch == "torch" else re.sub(r"\btorch\.", self.torch + ".", text)

    def expr(self, text: str) -> cst.BaseExpression:
        return _expr(self.code(text))

    @property
    def parents(self) -> dict[int, cst.CSTNode]:
        if self._parents is None:
            # children read inline: on a large module (a table of constants) the map has a million
            # entries, and a generator per node took most of the time (performance.md, stop 30)
            parents: dict[int, cst.CSTNode] = {}
            stack: list[cst.CSTNode] = [self.module]
            pop, push = stack.pop, stack.append
            while stack:
                node = pop()
                for name in field_order(type(node)):
                    v = getattr(node, name)
                    tv = type(v)
                    if tv is list or tv is tuple:
                        for x in v:
                            if is_node_type(type(x)):
                                parents[id(x)] = node
                                push(x)
                    elif v is not None and is_node_type(tv):
                        parents[id(v)] = node
                        push(v)
            self._parents = parents
        return self._parents

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parents = self.parents
        p = parents.get(id(node))
        while p is not None:
            yield p
            p = parents.get(id(p))

    @property
    def device(self) -> str:
        """The module's device variable: the one a previous fix added, else a fresh name."""
        if self._device is None:
            self._device = existing_device(self.module, self) or _fresh_name(self.module, "DEVICE")
        return self._device


def torch_name(module: cst.Module) -> tuple[str, bool]:
    """How the module's top level names torch (`torch`, else the alias of `import torch as th`),
    and whether an import binds that name."""
    alias = None
    for st in module.body:
        if type(st) is cst.SimpleStatementLine:
            for small in st.body:
                if type(small) is cst.Import:
                    for a in small.names:
                        if (dotted_parts(a.name) or [""])[0] != "torch":
                            continue
                        if a.asname is None:
                            return "torch", True
                        if dotted_parts(a.name) == ["torch"] and type(a.asname.name) is cst.Name:
                            alias = alias or a.asname.name.value
    return (alias, True) if alias else ("torch", False)


def existing_device(module: cst.Module, ctx: "ModuleContext") -> str | None:
    init = ctx.code(DEVICE_INIT)
    for st in module.body:
        if type(st) is cst.SimpleStatementLine and len(st.body) == 1 and type(st.body[0]) is cst.Assign:
            a = st.body[0]
            if len(a.targets) == 1 and type(a.targets[0].target) is cst.Name and _code(a.value) == init:
                return a.targets[0].target.value
    return None


def _fresh_name(module: cst.Module, base: str) -> str:
    used = {n.value for n in iter_subtree(module) if type(n) is cst.Name}
    name, i = base, 1
    while name in used:
        name, i = f"{base}_{i}", i + 1
    return name


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _short(node: cst.CSTNode) -> str:
    text = " ".join(_code(node).split())
    return text if len(text) <= 50 else text[:49] + "…"


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


# ------------------------------------------------------------------------------------------ decide


def decide(hit: Hit, ctx: ModuleContext) -> Edit | str | None:
    """The fix of one finding, the reason it is left alone, or None when its rule has no fix."""
    rule = hit.rule
    if not rule.codemod:
        return None
    if ctx.extension:
        return "inside a CUDA extension's Python wrapper: the code around it is CUDA-only"
    branch = _cuda_branch(hit.node, ctx)
    if branch is not None:
        return f"under `{branch}`, which already has a non-CUDA branch"
    call = _enclosing_cuda_call(hit.node, ctx)
    if call is not None:
        return f"an argument of a CUDA-only call (`{call}`)"
    result = CODEMODS[rule.codemod](hit, ctx)
    if isinstance(result, Edit) and not result.nodes:
        result.nodes.append(hit.node)
    return result


def _cuda_branch(node: cst.CSTNode, ctx: ModuleContext) -> str | None:
    """The CUDA test of an `if` (or `x if test else y`) around `node` that has another branch."""
    for p in ctx.ancestors(node):
        t = type(p)
        if t is cst.If:
            parent = ctx.parents.get(id(p))
            elif_of = type(parent) is cst.If and parent.orelse is p
            if _mentions_cuda(p.test) and (p.orelse is not None or elif_of):
                return ("elif " if elif_of else "if ") + _short(p.test)
        elif t is cst.IfExp and _mentions_cuda(p.test):
            return "... if " + _short(p.test) + " else ..."
    return None


def _enclosing_cuda_call(node: cst.CSTNode, ctx: ModuleContext) -> str | None:
    """The `torch.cuda.…` call (or any `….cuda.…` call) whose arguments hold `node`, within its statement."""
    for p in ctx.ancestors(node):
        if isinstance(p, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return None
        if type(p) is cst.Call and "cuda" in (dotted_parts(p.func) or [])[:-1]:
            return ".".join(dotted_parts(p.func))
    return None


def _in_comparison(node: cst.CSTNode, ctx: ModuleContext) -> str | None:
    for p in ctx.ancestors(node):
        if isinstance(p, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return None
        if type(p) is cst.Comparison:
            return _short(p)
    return None


def _mentions_cuda(expr: cst.CSTNode, skip: set[int] = frozenset()) -> bool:
    for n in iter_subtree(expr):
        if id(n) in skip:
            continue
        t = type(n)
        if t is cst.Name and _CUDA_WORD.search(n.value):
            return True
        if t is cst.SimpleString and any(_CUDA_WORD.search(s) for s in string_shapes(n)):
            return True
    return False


# ------------------------------------------------------------------------------------------ helpers


def _matched_values(hit: Hit) -> list[cst.CSTNode]:
    """The argument values the rule's clause matched: by its keyword names or argument conditions."""
    node, clause = hit.node, hit.clause
    if clause.kind == "pattern":
        return [node]
    if type(node) is not cst.Call:
        return []
    if clause.kind == "keyword":
        out = []
        for a in node.args:
            if a.keyword is not None and a.keyword.value in clause.names:
                if any(re.fullmatch(clause.pattern or "", s) for s in string_shapes(a.value)) or literal_value(a.value) in clause.values:
                    out.append(a.value)
        return out
    out = []
    for cond in clause.args:
        if cond.pattern:
            v = find_arg(node, cond)
            if v is not None and v not in out:
                out.append(v)
    return out


def _string_refusal(value: cst.CSTNode, wanted: str) -> str:
    if type(value) is cst.IfExp:
        return f"chooses its value (`{_short(value)}`), so it already has another branch"
    return f"builds a string from {wanted!r} (`{_short(value)}`)"


def _keep_parens(old: cst.CSTNode, new: cst.BaseExpression) -> cst.BaseExpression:
    lpar, rpar = getattr(old, "lpar", ()), getattr(old, "rpar", ())
    return new.with_changes(lpar=lpar, rpar=rpar) if lpar else new


def _replace_with(code: str, ctx: ModuleContext) -> Replace:
    """Replace by `code`; `{device}` in it is the device variable's name, chosen when the edit is made."""
    return lambda updated: _keep_parens(updated, ctx.expr(code.format(device=ctx.device)))


def _statement_of(node: cst.CSTNode, ctx: ModuleContext) -> cst.SimpleStatementLine | None:
    """The statement line that is nothing but `node` (a call or an assignment to it)."""
    p = ctx.parents.get(id(node))
    if type(p) is cst.AssignTarget:
        p = ctx.parents.get(id(p))
        if type(p) is not cst.Assign or len(p.targets) != 1:
            return None
    elif type(p) is not cst.Expr:
        return None
    line = ctx.parents.get(id(p))
    if type(line) is cst.SimpleStatementLine and len(line.body) == 1:
        return line
    return None


# ------------------------------------------------------------------------------------------ codemods


def _literal_edit(hit: Hit, ctx: ModuleContext, word: str, other: Callable[[str], str], code: str) -> Edit | str:
    """Replace each matched argument that is exactly the literal `word` by `code`; `other(value)`
    says why another literal is left alone."""
    values = _matched_values(hit)
    if not values:
        return f"the value is not a literal {word!r}"
    edit = Edit(device=True)
    for v in values:
        compared = _in_comparison(v, ctx)
        if compared:
            return f"compared (`{compared}`): the code asks whether it is on CUDA itself"
        lit = literal_value(v)
        if not isinstance(lit, str):
            return _string_refusal(v, word)
        if lit.lower() != word:
            return other(lit)
        edit.replace[id(v)] = _replace_with(code, ctx)
        edit.nodes.append(v)
    return edit


def device_string(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """`"cuda"` -> `DEVICE.type`: a string stays a string, and is "cuda" on a CUDA machine."""
    return _literal_edit(hit, ctx, "cuda", lambda lit: f"names a device index ({lit!r}): choose it with "
                         "`torch.accelerator.set_device_index`", "{device}.type")


def to_device(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """`x.cuda(non_blocking=True)` -> `x.to(DEVICE, non_blocking=True)`."""
    call = hit.node
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute:
        return "not a method call"
    if any(a.keyword is None or a.keyword.value == "device" for a in call.args):
        return f"passes a device (`{_short(call)}`): choose it with `torch.accelerator.set_device_index`"

    def rewrite(updated: cst.Call) -> cst.Call:
        first = cst.Arg(_expr(ctx.device), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if updated.args else cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("to")), args=[first, *updated.args])

    return Edit({id(call): rewrite}, device=True)


# torch.cuda call -> (torch.accelerator function, what to use where there is no accelerator):
# None = it works everywhere, but its answer decides whether CUDA code runs (rewritten only as a
# test, see _guarded_cuda_code); STATEMENT = guard the statement; else the value to use instead.
STATEMENT = "statement"
TEST = None
ACCELERATOR = {
    "torch.cuda.is_available": ("is_available", TEST),
    "torch.cuda.device_count": ("device_count", TEST),
    "torch.cuda.synchronize": ("synchronize", STATEMENT),
    "torch.cuda.set_device": ("set_device_index", STATEMENT),
    "torch.cuda.empty_cache": ("empty_cache", STATEMENT),
    "torch.cuda.reset_peak_memory_stats": ("reset_peak_memory_stats", STATEMENT),
    "torch.cuda.memory_allocated": ("memory_allocated", "0"),
    "torch.cuda.max_memory_allocated": ("max_memory_allocated", "0"),
    "torch.cuda.memory_reserved": ("memory_reserved", "0"),
    "torch.cuda.max_memory_reserved": ("max_memory_reserved", "0"),
    "torch.cuda.memory_stats": ("memory_stats", "{}"),
}
_AVAILABLE = "torch.accelerator.is_available()"
# torch.cuda calls with a torch.accelerator counterpart that is still not a safe rewrite.
NOT_REWRITTEN = {
    "torch.cuda.current_device": "its answer is a CUDA device index; `torch.accelerator.current_device_index()` "
                                 "raises where there is no accelerator",
}


def accelerator(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """`torch.cuda.synchronize()` -> `if torch.accelerator.is_available(): torch.accelerator.synchronize()`;
    `torch.cuda.max_memory_allocated()` -> `(torch.accelerator.max_memory_allocated() if ... else 0)`."""
    call = hit.node
    entry = ACCELERATOR.get(hit.symbol)
    if hit.symbol in NOT_REWRITTEN:
        return NOT_REWRITTEN[hit.symbol]
    if entry is None or type(call) is not cst.Call:
        return f"`{hit.symbol}` has no device-agnostic equivalent in `torch.accelerator`"
    if any(a.keyword is not None for a in call.args):
        return f"passes a keyword argument (`{_short(call)}`), which `torch.accelerator.{entry[0]}` does not take"
    if entry[1] is TEST:
        why = _guarded_cuda_code(call, ctx)
        if why:
            return why
    func = ctx.expr(f"torch.accelerator.{entry[0]}")

    guarded = entry[1] is None or _under_availability_test(call, ctx)

    def rename(updated: cst.Call) -> cst.BaseExpression:
        new = updated.with_changes(func=func, lpar=(), rpar=())
        if guarded or entry[1] == STATEMENT:
            return _keep_parens(updated, new)
        fallback = _expr(entry[1])
        return cst.IfExp(test=ctx.expr(_AVAILABLE), body=new, orelse=fallback,
                         lpar=updated.lpar or [cst.LeftParen()], rpar=updated.rpar or [cst.RightParen()])

    edit = Edit({id(call): rename}, torch=True)
    if entry[1] == STATEMENT and not guarded:
        line = _statement_of(call, ctx)
        if line is None:
            return f"its value is used (`{_short(call)}`); only a statement of its own can be guarded"
        edit.replace[id(line)] = lambda updated: _guarded(updated, ctx)
        edit.nodes.append(line)
    return edit


_AVAILABILITY_TESTS = frozenset({"torch.cuda.is_available()", _AVAILABLE})


def _under_availability_test(node: cst.CSTNode, ctx: ModuleContext) -> bool:
    """True inside the body of `if torch.cuda.is_available():` (or torch.accelerator's): the call
    already runs only where a device is (and the test is rewritten on its own)."""
    inner = node
    for p in ctx.ancestors(node):
        if type(p) is cst.If and p.body is inner and _code(p.test).strip() in {ctx.code(t) for t in _AVAILABILITY_TESTS}:
            return True
        inner = p
    return False


def _guarded_cuda_code(call: cst.CSTNode, ctx: ModuleContext) -> str | None:
    """Why a device query cannot become device-agnostic, or None when it can: its answer decides
    whether CUDA code runs, so it is rewritten only as the test of an `if`, `while` or conditional
    expression whose guarded code no longer uses CUDA (backend flags aside, which any machine takes).
    Anywhere else (a variable, a decorator's argument) it may guard CUDA code out of sight."""
    inner = call
    for p in ctx.ancestors(call):
        t = type(p)
        if t in (cst.If, cst.While, cst.IfExp) and p.test is inner:
            own = {id(n) for n in iter_subtree(call)}
            if inner is not call and _mentions_cuda(inner, skip=own):
                return f"the test asks about CUDA itself (`{_short(inner)}`)"
            body = p.body.body if type(p.body) in (cst.IndentedBlock, cst.SimpleStatementSuite) else [p.body]
            for st in body:
                if not _sets_backend_flag(st) and _mentions_cuda(st):
                    shown = st.with_changes(leading_lines=()) if hasattr(st, "leading_lines") else st
                    return f"it guards CUDA-only code (`{_short(shown)}`), which other accelerators would then run"
            return None
        if t not in (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget):
            break
        inner = p
    return (f"its answer is used (`{_short(inner)}`) where it may decide whether CUDA code runs; "
            "only the test of an `if` whose code is device-agnostic is rewritten")


def _sets_backend_flag(st: cst.CSTNode) -> bool:
    """`torch.backends.cuda.matmul.allow_tf32 = True` and friends: flags every machine accepts."""
    if type(st) is not cst.SimpleStatementLine or len(st.body) != 1 or type(st.body[0]) is not cst.Assign:
        return False
    return all((dotted_parts(t.target) or [""])[:2] == ["torch", "backends"] for t in st.body[0].targets)


def _guarded(line: cst.SimpleStatementLine, ctx: ModuleContext) -> cst.If:
    inner = line.with_changes(leading_lines=())
    return cst.If(test=ctx.expr(_AVAILABLE), body=cst.IndentedBlock([inner]), leading_lines=line.leading_lines)


def nccl_backend(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """`init_process_group("nccl")` -> `init_process_group(torch.distributed.get_default_backend_for_device(DEVICE))`."""
    return _literal_edit(hit, ctx, "nccl", lambda lit: f"names backends per device ({lit!r}); give the accelerator "
                         "its own entry by hand", "torch.distributed.get_default_backend_for_device({device})")


_CUDA_AUTOCAST = ("torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast")


def autocast(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """`torch.cuda.amp.autocast(dtype=...)` -> `torch.autocast(DEVICE.type, dtype=...)` (same default dtype on CUDA)."""
    call = hit.node
    if hit.symbol not in _CUDA_AUTOCAST or type(call) is not cst.Call:
        return f"`{hit.symbol}` has no direct device-agnostic equivalent"
    if any(a.keyword is None for a in call.args):
        return f"passes positional arguments (`{_short(call)}`), which `torch.autocast` orders differently"

    def rewrite(updated: cst.Call) -> cst.Call:
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if updated.args else cst.MaybeSentinel.DEFAULT
        first = cst.Arg(_expr(f"{ctx.device}.type"), comma=comma)
        return updated.with_changes(func=ctx.expr("torch.autocast"), args=[first, *updated.args])

    return Edit({id(call): rewrite}, device=True)


def drop_statement(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """`torch.backends.cudnn.benchmark = True` -> removed; comments on and above it move to what follows."""
    node = hit.node
    line = _statement_of(node, ctx)
    if line is None:
        return f"not a statement of its own (`{_short(node)}`)"
    block = ctx.parents.get(id(line))
    body = getattr(block, "body", None)
    if type(body) not in (list, tuple):
        return "not in a block of statements"
    index = next(i for i, st in enumerate(body) if st is line)
    return Edit(drops=[(id(block), index)], nodes=[line])


def bfloat16(hit: Hit, ctx: ModuleContext) -> Edit | str:
    """FP16 -> BF16: `torch.float16`/`torch.half` -> `torch.bfloat16`, `.half()` -> `.bfloat16()`, `"float16"` -> `"bfloat16"`."""
    node = hit.node
    t = type(node)
    if hit.clause.kind == "method" and t is cst.Call and type(node.func) is cst.Attribute:
        if node.args:
            return f"passes arguments (`{_short(node)}`)"
        return Edit({id(node): lambda u: u.with_changes(func=u.func.with_changes(attr=cst.Name("bfloat16")))})
    if hit.clause.kind == "attribute" and t in (cst.Attribute, cst.Name):
        parts = dotted_parts(node)
        if t is cst.Attribute and parts and parts[-1] in ("float16", "half"):
            return Edit({id(node): lambda u: u.with_changes(attr=cst.Name("bfloat16"))})
        return Edit({id(node): _replace_with("torch.bfloat16", ctx)}, torch=True)
    values = _matched_values(hit)
    if not values:
        return "the dtype is not a literal string"
    edit = Edit()
    for v in values:
        if type(v) is not cst.SimpleString or not isinstance(literal_value(v), str):
            return _string_refusal(v, "float16")
        quote = v.value[len(v.prefix):][: len(v.quote)]
        edit.replace[id(v)] = lambda u, q=quote, p=v.prefix: u.with_changes(value=f"{p}{q}bfloat16{q}")
        edit.nodes.append(v)
    return edit


CODEMODS: dict[str, Callable[[Hit, ModuleContext], Edit | str]] = {
    "device_string": device_string,
    "to_device": to_device,
    "accelerator": accelerator,
    "nccl_backend": nccl_backend,
    "autocast": autocast,
    "drop_statement": drop_statement,
    "bfloat16": bfloat16,
}


# ------------------------------------------------------------------------------------------ apply


class _Apply(cst.CSTTransformer):
    def __init__(self, replace: dict[int, Replace], drops: dict[int, set[int]]) -> None:
        super().__init__()
        self.replace = replace
        self.drops = drops

    def on_leave(self, original_node, updated_node):
        fn = self.replace.get(id(original_node))
        if fn is not None:
            updated_node = fn(updated_node)
        indices = self.drops.get(id(original_node))
        if indices:
            updated_node = _drop(updated_node, indices)
        return updated_node


def _drop(block, indices: set[int]):
    """The block without the statements at `indices`; their comments go to the next statement
    (or, at the end of an indented block, to a `pass` that keeps the block valid)."""
    body = list(block.body)
    kept: list = []
    carried: list[cst.EmptyLine] = []
    for i, st in enumerate(body):
        if i not in indices:
            if carried:
                st = st.with_changes(leading_lines=[*carried, *st.leading_lines])
                carried = []
            kept.append(st)
            continue
        carried.extend(line for line in st.leading_lines if line.comment is not None)
        comment = getattr(st, "trailing_whitespace", None)
        if comment is not None and comment.comment is not None:
            carried.append(cst.EmptyLine(comment=comment.comment))
    if type(block) is cst.Module:
        return block.with_changes(body=kept, footer=[*carried, *block.footer])
    if carried or not kept:
        kept.append(cst.SimpleStatementLine([cst.Pass()], leading_lines=carried))
    return block.with_changes(body=kept)


def apply(module: cst.Module, edits: list[Edit], ctx: ModuleContext) -> cst.Module:
    """The module with every edit made, and the device variable (and `import torch`) added once
    after the imports when an edit uses them."""
    if not edits:
        return module
    replace: dict[int, Replace] = {}
    drops: dict[int, set[int]] = {}
    for e in edits:
        for k, fn in e.replace.items():
            replace.setdefault(k, fn)
        for block, index in e.drops:
            drops.setdefault(block, set()).add(index)
    at = _insert_at(module, edits, ctx)
    at -= sum(1 for i in drops.get(id(module), ()) if i < at)
    add_device = any(e.device for e in edits) and existing_device(module, ctx) is None
    add_torch = any(e.torch or e.device for e in edits) and not ctx.imports_torch
    fixed = module.visit(_Apply(replace, drops))
    header = (["import torch\n"] if add_torch else []) + ([f"{ctx.device} = {ctx.code(DEVICE_INIT)}\n"] if add_device else [])
    if not header:
        return fixed
    stmts = [cst.parse_statement(code) for code in header]
    if add_device:
        comment = [cst.EmptyLine(), cst.EmptyLine(comment=cst.Comment(DEVICE_COMMENT))]
        stmts[-1] = stmts[-1].with_changes(leading_lines=comment if at else comment[1:])
    body = list(fixed.body)
    if at < len(body) and not any(line.comment is None for line in body[at].leading_lines):
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine(), *body[at].leading_lines])
    return fixed.with_changes(body=[*body[:at], *stmts, *body[at:]])


def _insert_at(module: cst.Module, edits: list[Edit], ctx: ModuleContext) -> int:
    """After the leading imports (and the docstring), and before the first statement an edit touches."""
    first_edit = len(module.body)
    tops = {id(st): i for i, st in enumerate(module.body)}
    for e in edits:
        for node in e.nodes:
            for p in [node, *ctx.ancestors(node)]:
                if id(p) in tops:
                    first_edit = min(first_edit, tops[id(p)])
                    break
    at = 0
    for i, st in enumerate(module.body[:first_edit]):
        if type(st) is cst.SimpleStatementLine and all(type(s) in (cst.Import, cst.ImportFrom) for s in st.body):
            at = i + 1
        elif i == 0 and type(st) is cst.SimpleStatementLine and type(st.body[0]) is cst.Expr \
                and type(st.body[0].value) in (cst.SimpleString, cst.ConcatenatedString):
            at = 1
        elif type(st) in (cst.FunctionDef, cst.ClassDef):
            break
    return at


def fix_kinds(hits: list[Hit], module: cst.Module, text: str, imports: list[str]) -> dict[int, str]:
    """id(hit) -> "safe" or "unsafe" for every hit `fix` can rewrite (what `scan` counts as fixable)."""
    ctx = ModuleContext(module, text, imports)
    return {id(h): h.rule.fix for h in hits if h.rule.codemod and isinstance(decide(h, ctx), Edit)}
