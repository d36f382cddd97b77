"""Values that travel: what a name was given, one assignment or default away from where a rule looks.

A rule sees `dist.init_process_group(backend=backend)`; the value that matters was written a few
lines up (`backend = "nccl"`), as a parameter default (`def setup(backend="nccl")`) or into an
attribute (`args.dist_backend = "nccl"`). `ValueTracker` rides along python.py's walk and keeps,
per function (and for the module), every value each name or dotted name was assigned so far, in
source order; a condition that looks for a value (a pattern, a literal, a string) also tries those
(conditions.py). Only one step is followed (`a = "x"; b = a` gives b the name a, not "x"), and every
assignment counts (`if gpu: backend = "nccl" else: backend = "gloo"` can be nccl).

The code matchers that need a value's origin (`cuda_device_arg`, `backend_setting`,
`argparse_cuda_default`, `numpy_float64`, `batch_max_pad`, `host_read`) are registered in
matchers.py, with their triggers and checks; they ask the tracker (the scanner's `values`) what a
name carries, and use its readers below: `names_cuda`, `float64_array`, `batch_max`, `tensor_value`.

And two precision checks the scanner asks: whether a subscript is a lookup in a dict or by a string
key (not boolean-mask indexing, matchers.py's bool_mask_index), and whether a hit is inside a type
annotation or is only an entry of a dtype conversion table (python.py's add).

screen.py asks valuefacts.py's `ScreenFacts` which names may carry such values, so it keeps the
regions they reach (its regions are cut only when nothing in them can match).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

import libcst as cst

from .cstwalk import iter_subtree
from .matchers import tensor_value_read
from .valuefacts import CUDA_DEVICE
from .vocab import dotted_parts, literal_value, load_libcst, string_shapes

load_libcst()

if TYPE_CHECKING:  # pragma: no cover
    from .python import PythonScanner

# NumPy constructors whose default dtype is float64.
_NUMPY_FLOAT64 = frozenset({
    "numpy.linspace", "numpy.logspace", "numpy.geomspace", "numpy.zeros", "numpy.ones", "numpy.empty",
    "numpy.random.rand", "numpy.random.randn", "numpy.random.random", "numpy.random.uniform", "numpy.random.normal",
})
_NOT_TENSOR_CALLS = ("torch.Size", "torch.finfo", "torch.iinfo", "torch.cuda.", "torch.distributed.", "torch.get_",
                     "torch.device", "torch.dtype", "torch.is_", "torch.jit.", "torch.compiler.", "torch.backends.")
_FLOAT_DTYPES = frozenset({"torch.float32", "torch.float", "torch.float16", "torch.half", "torch.bfloat16"})
_KEY_NAME = re.compile(r"(?i)(_key|_name|_type|_id|_kind|_str|keys?|names?)$")


def _chain_table(table: dict, t: type, fn: Callable) -> None:
    """Add `fn` to a Walker table after any callback already there."""
    old = table.get(t)
    if old is None:
        table[t] = fn
    else:
        def both(node, line, _old=old, _fn=fn):
            _old(node, line)
            _fn(node, line)
        table[t] = both


def key_of(node: cst.CSTNode) -> str | None:
    """`x` -> "x", `args.dist_backend` -> "args.dist_backend"; None for anything else."""
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


class ValueTracker:
    def __init__(self, scanner: "PythonScanner") -> None:
        self.s = scanner
        self.frames: list[tuple[str, dict[str, list]]] = [("module", {})]
        self.annotation = 0  # inside a type annotation: nothing there runs
        self.tables: set[int] = set()  # dtype nodes that are entries of a dtype conversion table
        self.busy = False  # following one step only
        e, lv = scanner.enter, scanner.leave
        for t in (cst.FunctionDef, cst.ClassDef):
            _chain_table(e, t, self.enter_scope)
            _chain_table(lv, t, self.leave_scope)
        _chain_table(e, cst.Param, self.enter_param)
        _chain_table(e, cst.Lambda, self.enter_scope)
        _chain_table(lv, cst.Lambda, self.leave_scope)
        _chain_table(lv, cst.Assign, self.leave_assign)
        _chain_table(lv, cst.AnnAssign, self.leave_assign)
        _chain_table(e, cst.For, self.enter_for)
        _chain_table(e, cst.Annotation, self.enter_annotation)
        _chain_table(lv, cst.Annotation, self.leave_annotation)
        _chain_table(e, cst.Dict, self.enter_dict)

    # ------------------------------------------------------------------ what names were given

    def enter_scope(self, node: cst.CSTNode, line: int) -> None:
        kind = {cst.ClassDef: "class", cst.Lambda: "lambda"}.get(type(node), "function")
        self.frames.append((kind, {}))

    def leave_scope(self, node: cst.CSTNode, line: int) -> None:
        self.frames.pop()

    def record(self, key: str, value: cst.CSTNode | None) -> None:
        self.frames[-1][1].setdefault(key, []).append(value)

    def enter_param(self, node: cst.Param, line: int) -> None:
        # A lambda's defaults are not followed (valuefacts.py reads statements only).
        lam = self.frames[-1][0] == "lambda"
        self.frames[-1][1][node.name.value] = [node.default] if node.default is not None and not lam else [None]

    def leave_assign(self, node: cst.CSTNode, line: int) -> None:
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            key = key_of(target)
            if key is not None:
                self.record(key, value)
            elif type(target) in (cst.Tuple, cst.List):
                for el in target.elements:
                    k = key_of(el.value)
                    if k is not None:
                        self.record(k, None)

    def enter_for(self, node: cst.For, line: int) -> None:
        """`for key in ("a_mask", "b_mask"):` gives key each element; anything else, no value."""
        key = key_of(node.target)
        if key is None:
            return
        if type(node.iter) in (cst.List, cst.Tuple):
            for el in node.iter.elements:
                self.record(key, el.value)
        else:
            self.record(key, None)

    def lookup(self, key: str) -> list:
        """Every value `key` was given so far in the innermost scope that gives it one."""
        last = len(self.frames) - 1
        for i in range(last, -1, -1):
            kind, values = self.frames[i]
            if kind == "class" and i != last:
                continue
            if key in values:
                return values[key]
        return []

    def travelled(self, value: cst.CSTNode) -> list[cst.CSTNode]:
        """The values a name or dotted name carries here (one step), without unknowns."""
        key = key_of(value)
        return [v for v in self.lookup(key) if v is not None] if key else []

    def travels(self, value: cst.CSTNode, ok: Callable[[cst.CSTNode], bool]) -> bool:
        """Some value the name `value` was given satisfies `ok` (one step, never recursively)."""
        if self.busy or type(value) not in (cst.Name, cst.Attribute):
            return False
        self.busy = True
        try:
            return any(ok(v) for v in self.travelled(value))
        finally:
            self.busy = False

    def arg_travels(self, cond, value: cst.CSTNode) -> bool:
        """conditions.py's value test for a condition that looks for a value, on what the name carries."""
        if not (cond.pattern or cond.equals or cond.string):
            return False  # absence conditions (literal = false, ...) judge the expression as written
        return self.travels(value, lambda v: self.s.conditions.value(cond, v))

    def keyword_travels(self, value: cst.CSTNode, clause) -> bool:
        return self.travels(value, lambda v: self.s.conditions.keyword_value(v, clause))

    # ------------------------------------------------------------------ precision

    def enter_annotation(self, node: cst.CSTNode, line: int) -> None:
        self.annotation += 1

    def leave_annotation(self, node: cst.CSTNode, line: int) -> None:
        self.annotation -= 1

    def enter_dict(self, node: cst.Dict, line: int) -> None:
        """`{np.dtype("complex64"): torch.complex64, ...}` maps dtypes to dtypes: a lookup table,
        not math in those dtypes."""
        pairs = [(el.key, el.value) for el in node.elements if type(el) is cst.DictElement]
        if not pairs or not any(self.dtype_like(k) and self.dtype_like(v) for k, v in pairs):
            return
        for k, v in pairs:
            for side in (k, v):
                if self.dtype_like(side):
                    self.tables.update(id(n) for n in iter_subtree(side))

    def dtype_like(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Call:
            q, _ = self.s.resolve(node.func) if type(node.func) in (cst.Name, cst.Attribute) else (None, False)
            return q in ("numpy.dtype", "torch.dtype")
        q, _ = self.s.resolve(node) if type(node) in (cst.Name, cst.Attribute) else (None, False)
        return q is not None and q.split(".")[0] in ("torch", "numpy")

    def silent(self, clause, node: cst.CSTNode) -> bool:
        """A hit that does nothing at run time: in a type annotation, or a dtype table entry."""
        return self.annotation > 0 or (clause.kind == "attribute" and id(node) in self.tables)

    def not_a_mask(self, node: cst.Subscript, index: cst.CSTNode) -> bool:
        """`masks[mask_key]`, `cfg[name]` with `name = "attn_mask"`, a lookup in a dict or list
        literal: indexing by a key, not by a boolean mask."""
        if type(index) is cst.Name and _KEY_NAME.search(index.value):
            return True
        if any(string_shapes(v) for v in self.travelled(index)):
            return True
        return any(type(v) in (cst.Dict, cst.DictComp, cst.List, cst.ListComp)
                   or (type(v) is cst.Call and type(v.func) is cst.Name and v.func.value in ("dict", "list"))
                   for v in self.travelled(node.value))

    def boolean_travels(self, expr: cst.CSTNode, looks_boolean: Callable[[cst.CSTNode], bool]) -> bool:
        """`keep = labels != ignore_index` ... `logits[keep]`."""
        return type(expr) is cst.Name and self.travels(expr, looks_boolean)

    # ------------------------------------------------------------------ readers for matchers.py's value matchers

    def names_float(self, value: cst.CSTNode) -> bool:
        return type(value) in (cst.Name, cst.Attribute) and self.s.resolve(value)[0] in _FLOAT_DTYPES

    def names_cuda(self, value: cst.CSTNode, depth: int = 0, calls_only: bool = False) -> bool:
        """`torch.cuda.current_device()`, and unless `calls_only` `"cuda:0"` or
        `torch.device("cuda", i)`; in a list, or given to a name one assignment before."""
        t = type(value)
        if not calls_only and any(CUDA_DEVICE.fullmatch(v) for v in string_shapes(value)):
            return True
        if t in (cst.List, cst.Tuple):
            return any(self.names_cuda(el.value, depth, calls_only) for el in value.elements)
        if t is cst.Call and type(value.func) in (cst.Name, cst.Attribute):
            q = self.s.resolve(value.func)[0]
            if q == "torch.device" and value.args and not calls_only:
                return any(CUDA_DEVICE.fullmatch(v) for v in string_shapes(value.args[0].value))
            return q is not None and q.startswith("torch.cuda.")
        if t in (cst.Name, cst.Attribute) and depth == 0:
            return any(self.names_cuda(v, 1, calls_only) for v in self.travelled(value))
        return False

    def float64_array(self, value: cst.CSTNode) -> bool:
        if type(value) is not cst.Call or type(value.func) not in (cst.Name, cst.Attribute):
            return False
        q = self.s.resolve(value.func)[0]
        if any(a.keyword is not None and a.keyword.value == "dtype" for a in value.args):
            return False
        if q == "numpy.arange":  # float64 only with a float start, stop or step
            return any(isinstance(literal_value(a.value), float) for a in value.args)
        return q in _NUMPY_FLOAT64

    def batch_max(self, value: cst.CSTNode, depth: int = 0) -> bool:
        """`max(x.shape[-1] for x in batch)`, in a size list or arithmetic, or given to a name (two
        steps at most: `max_h = max(...)`, `shape = [n, 3, max_h, max_w]`, `torch.zeros(shape)`)."""
        t = type(value)
        if t in (cst.List, cst.Tuple):
            return any(self.batch_max(el.value, depth) for el in value.elements)
        if t is cst.BinaryOperation:
            return self.batch_max(value.left, depth) or self.batch_max(value.right, depth)
        if t is cst.Name:
            return depth < 2 and any(self.batch_max(v, depth + 1) for v in self.travelled(value))
        if t is not cst.Call or type(value.func) is not cst.Name:
            return False
        if self.s.resolve(value.func)[0] != "builtins.max" or len(value.args) != 1:
            return False
        arg = value.args[0].value
        return type(arg) in (cst.GeneratorExp, cst.ListComp) and any(
            (type(n) is cst.Attribute and n.attr.value in ("shape", "size")) or (type(n) is cst.Name and n.value == "len")
            for n in iter_subtree(arg)
        )

    def tensor_value(self, expr: cst.CSTNode) -> bool:
        """A tensor read as a Python number: a whole reduction (`x.max()`), `torch.*` of a tensor,
        but not `.item()`/`.tolist()` (their own rule reports them) nor sizes and shapes."""
        s = self.s
        if tensor_value_read(s.names, expr) not in (None, ".item()"):
            return True
        t = type(expr)
        if t is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
            q = s.resolve(expr.func)[0]
            return q is not None and q.startswith("torch.") and not q.startswith(_NOT_TENSOR_CALLS)
        return False
