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

import ast
import re
from typing import TYPE_CHECKING, Callable

import libcst as cst

from .cstwalk import iter_subtree
from .matchers import tensor_value_read, tensor_value_reads
from .valuefacts import CUDA_DEVICE
from .vocab import NOT_TENSOR_CALLS, ast_chain, dotted_parts, literal_value, load_libcst, short_code, string_shapes

load_libcst()

if TYPE_CHECKING:  # pragma: no cover
    from .python import PythonScanner

# NumPy constructors whose default dtype is float64.
_NUMPY_FLOAT64 = frozenset({
    "numpy.linspace", "numpy.logspace", "numpy.geomspace", "numpy.zeros", "numpy.ones", "numpy.empty",
    "numpy.random.rand", "numpy.random.randn", "numpy.random.random", "numpy.random.uniform", "numpy.random.normal",
})
_FLOAT_DTYPES = frozenset({"torch.float32", "torch.float", "torch.float16", "torch.half", "torch.bfloat16"})
_OTHER_DTYPES = frozenset({"torch.float64", "torch.double", "torch.long", "torch.int64", "torch.int", "torch.int32",
                           "torch.int16", "torch.int8", "torch.uint8", "torch.bool"})
# Where a torch call's result lives when no `device=` is given (on_host): always the CPU; the CPU
# for data that is no tensor (`torch.tensor([1, 2])`, not `torch.tensor(x)`); the CPU for sizes.
# The legacy typed constructors (`torch.Tensor(x)`, `torch.LongTensor(x)`) build CPU tensors only.
_CPU_RESULTS = frozenset({"torch.from_numpy", "torch.get_rng_state", "torch.random.get_rng_state", "torch.Tensor",
                          "torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor", "torch.LongTensor",
                          "torch.IntTensor", "torch.ShortTensor", "torch.ByteTensor", "torch.CharTensor",
                          "torch.BoolTensor"})
_DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})
_SIZE_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange", "torch.range",
                             "torch.linspace", "torch.logspace", "torch.eye", "torch.rand", "torch.randn",
                             "torch.randint", "torch.randperm"})
# NumPy calls that always return an array (never a NumPy scalar): a device tensor does not combine
# with one (torch refuses a host array beside a device tensor; NumPy refuses the tensor), so
# arithmetic or a comparison with one runs on the host (cpu_origin).
_NUMPY_ARRAYS = frozenset({
    "numpy.array", "numpy.asarray", "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.arange",
    "numpy.linspace", "numpy.eye", "numpy.concatenate", "numpy.stack",
})
# Methods of pandas (and NumPy) values that a torch tensor does not have: a name one of them was
# called on since its last assignment holds no tensor (`mask = ~s.isna()` ... `s[mask]`).
# (Not `astype`: CuPy and JAX arrays, which may live on a GPU, have it too.)
_HOST_ONLY_METHODS = frozenset({"isna", "notna", "isnull", "notnull", "to_numpy", "fillna", "dropna",
                                "value_counts", "iterrows"})
_HOST_ANNOTATIONS = frozenset({"numpy.ndarray", "pandas.DataFrame", "pandas.Series"})
_JSON_LOADS = frozenset({"json.load", "json.loads"})
_NUMBER_CALLS = frozenset({"builtins.int", "builtins.float", "builtins.len", "builtins.round", "math.ceil", "math.floor"})
# Tensor methods whose result lives elsewhere than their receiver.
_MOVES = frozenset({"cuda", "type_as", "xpu", "mps"})
OPTION, COMPLEX = "option", "complex"  # branches some runs take (ValueTracker.enter_if)
# A flag named for FP16 (`fp16_enabled`, `use_fp16`, `half`), not a probe of what the device supports.
_FP16_FLAG = re.compile(r"(?i)(^|_)(fp16|float16|half)(_|$)")
_PROBE_WORD = re.compile(r"(?i)support|availab|capab")
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


def _reads_device_type(node: cst.CSTNode) -> bool:
    """`state.device.type`, `x.device.type`, `device.type`: the type of a device that already exists."""
    parts = dotted_parts(node)
    return bool(parts) and len(parts) >= 2 and parts[-1] == "type" and "device" in parts[-2].lower()


# The dtype casts of `torch.nn.Module`: a subclass's override that forwards to them picks nothing itself.
_MODULE_CASTS = frozenset({"half", "double", "float", "bfloat16"})


def _module_cast_override(node: cst.CSTNode) -> str | None:
    """`def half(self): ...; return super().half()`: a method named for an `nn.Module` dtype cast
    that ends by returning the base class's own; None for anything else."""
    if type(node) is not cst.FunctionDef or node.name.value not in _MODULE_CASTS or type(node.body) is not cst.IndentedBlock:
        return None
    last = node.body.body[-1] if node.body.body else None
    if type(last) is not cst.SimpleStatementLine or type(last.body[0]) is not cst.Return:
        return None
    call = last.body[0].value
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute or call.func.attr.value != node.name.value:
        return None
    sup = call.func.value
    ok = type(sup) is cst.Call and type(sup.func) is cst.Name and sup.func.value == "super"
    return node.name.value if ok else None


def key_of(node: cst.CSTNode) -> str | None:
    """`x` -> "x", `args.dist_backend` -> "args.dist_backend"; None for anything else."""
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


class ValueTracker:
    def __init__(self, scanner: "PythonScanner") -> None:
        self.s = scanner
        self.frames: list[tuple[str, dict[str, list]]] = [("module", {})]
        self.overrides: list[str | None] = [None]  # per frame, `_module_cast_override` of its function
        self.annotation = 0  # inside a type annotation: nothing there runs
        self.tables: set[int] = set()  # dtype nodes that are entries of a dtype conversion table or finfo/iinfo queries
        self.elements: set[int] = set()  # names that are elements of a dict, list, tuple or set literal
        self.keyed: dict[int, tuple[str, list[str]]] = {}  # a table entry looked up at once: (option, [its key])
        self.dtype_keys: dict[int, str] = {}  # dtype nodes that index a subscript (`sizes[torch.float16] = 2`)
        self.branches: dict[int, tuple[str, str]] = {}  # id of a block -> (OPTION or COMPLEX, its test) (enter_if)
        self.chained: set[int] = set()  # elifs, judged with the `if` that starts their chain
        self.open: list[tuple[str, str]] = []  # the branches the walk is in
        self.complex_arms: dict[int, str] = {}  # id of a node in a complex-only IfExp arm -> the test
        self.busy = False  # following one step only
        self.value_line: dict[int, int] = {}  # id of an assigned value -> the line of its assignment
        self.classes: list[cst.ClassDef] = []  # the classes the walk is in (class_numpy)
        # python.py `scan_module`: the file's `ast` tree, whole even when the screen cut regions
        # from what libcst parsed; "x" -> what the file's classes assign to `self.x` (class_numpy)
        self.ast_tree: ast.Module | None = None
        self.class_table: dict[str, list] | None = None
        e, lv = scanner.enter, scanner.leave
        for t in (cst.FunctionDef, cst.ClassDef):
            _chain_table(e, t, self.enter_scope)
            _chain_table(lv, t, self.leave_scope)
        _chain_table(e, cst.Param, self.enter_param)
        _chain_table(e, cst.Call, self.enter_call)
        _chain_table(e, cst.Lambda, self.enter_scope)
        _chain_table(lv, cst.Lambda, self.leave_scope)
        _chain_table(lv, cst.Assign, self.leave_assign)
        _chain_table(lv, cst.AnnAssign, self.leave_assign)
        _chain_table(e, cst.For, self.enter_for)
        _chain_table(e, cst.Annotation, self.enter_annotation)
        _chain_table(lv, cst.Annotation, self.leave_annotation)
        _chain_table(e, cst.Dict, self.enter_dict)
        _chain_table(e, cst.Subscript, self.enter_subscript)
        for t in (cst.List, cst.Tuple, cst.Set):
            _chain_table(e, t, self.enter_collection)
        _chain_table(e, cst.If, self.enter_if)
        _chain_table(e, cst.IfExp, self.enter_ifexp)
        for t in (cst.IndentedBlock, cst.SimpleStatementSuite):
            _chain_table(e, t, self.enter_block)
            _chain_table(lv, t, self.leave_block)

    # ------------------------------------------------------------------ what names were given

    def enter_scope(self, node: cst.CSTNode, line: int) -> None:
        kind = {cst.ClassDef: "class", cst.Lambda: "lambda"}.get(type(node), "function")
        self.overrides.append(_module_cast_override(node) if kind == "function" and self.frames[-1][0] == "class"
                              else None if kind != "lambda" else self.overrides[-1])
        self.frames.append((kind, {}))
        if kind == "class":
            self.classes.append(node)

    def leave_scope(self, node: cst.CSTNode, line: int) -> None:
        if self.frames.pop()[0] == "class":
            self.classes.pop()
        self.overrides.pop()

    def module_override(self) -> str | None:
        """The `nn.Module` cast a method the walk is in overrides and forwards to (`def double(self):
        ... return super().double()`), or None."""
        return self.overrides[-1]

    def record(self, key: str, value: cst.CSTNode | None) -> None:
        self.frames[-1][1].setdefault(key, []).append(value)

    def enter_param(self, node: cst.Param, line: int) -> None:
        # A lambda's defaults are not followed (valuefacts.py reads statements only).
        lam = self.frames[-1][0] == "lambda"
        self.frames[-1][1][node.name.value] = [node.default] if node.default is not None and not lam else [None]
        ann = node.annotation.annotation if node.annotation is not None else None
        if type(ann) in (cst.Name, cst.Attribute) and self.s.resolve(ann)[0] in _HOST_ANNOTATIONS:
            self.frames[-1][1][":annotated " + node.name.value] = [ann]  # `a: np.ndarray` (host_param)

    def enter_call(self, node: cst.Call, line: int) -> None:
        """`s.isna()`: s holds a pandas or NumPy value from its last assignment on (host_method).
        `torch.finfo(torch.float64).eps`: a dtype asked for its limits computes nothing in it (a
        Python number comes back), like a table entry."""
        func = node.func
        if type(func) in (cst.Name, cst.Attribute) and node.args and self.s.resolve(func)[0] in ("torch.finfo", "torch.iinfo"):
            self.tables.update(id(n) for n in iter_subtree(node.args[0].value))
        if type(func) is cst.Attribute and func.attr.value in _HOST_ONLY_METHODS:
            key = key_of(func.value)
            if key is not None:
                self.frames[-1][1][":method " + key] = [len(self.lookup(key)), func.attr.value]

    def leave_assign(self, node: cst.CSTNode, line: int) -> None:
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        value = node.value
        if value is None:
            return
        self.value_line[id(value)] = line
        for target in targets:
            key = key_of(target)
            if key is not None:
                self.record(key, value)
            elif type(target) in (cst.Tuple, cst.List):
                # `a, b = x.numpy(), y.numpy()` gives each name its own value; anything else, no value
                pairs = len(value.elements) == len(target.elements) if type(value) in (cst.Tuple, cst.List) else False
                for i, el in enumerate(target.elements):
                    k = key_of(el.value)
                    if k is not None:
                        self.record(k, value.elements[i].value if pairs else None)

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

    def assigned_at(self, value: cst.CSTNode, clause) -> list[int]:
        """The lines of the assignments that gave a name the value a keyword clause asks for
        (`impl = "flash_attention_2"` before `attn_implementation=impl`); [] when the name has a value
        from anywhere else that asks for it (a parameter default, a loop), or the value is written there."""
        if type(value) not in (cst.Name, cst.Attribute) or self.busy:
            return []
        self.busy = True
        try:
            hits = [v for v in self.travelled(value) if self.s.conditions.keyword_value(v, clause)]
        finally:
            self.busy = False
        lines = [self.value_line.get(id(v)) for v in hits]
        return [] if not lines or None in lines else sorted(set(lines))

    # ------------------------------------------------------------------ precision

    def enter_annotation(self, node: cst.CSTNode, line: int) -> None:
        self.annotation += 1

    def leave_annotation(self, node: cst.CSTNode, line: int) -> None:
        self.annotation -= 1

    def enter_dict(self, node: cst.Dict, line: int) -> None:
        """`{np.dtype("complex64"): torch.complex64, ...}` maps dtypes to dtypes: a lookup table,
        not math in those dtypes."""
        pairs = [(el.key, el.value) for el in node.elements if type(el) is cst.DictElement]
        self.elements.update(id(side) for pair in pairs for side in pair if type(side) in (cst.Name, cst.Attribute))
        if not pairs or not any(self.dtype_like(k) and self.dtype_like(v) for k, v in pairs):
            return
        for k, v in pairs:
            for side in (k, v):
                if self.dtype_like(side):
                    self.tables.update(id(n) for n in iter_subtree(side))

    def enter_subscript(self, node: cst.Subscript, line: int) -> None:
        """`{"float16": torch.float16, ...}[args.dtype]`: each entry is chosen by the option `dtype`.
        `dtype2bytes[torch.float16] = 2`: a dtype that indexes a subscript is a key of a table."""
        for el in node.slice:
            if type(el.slice) is cst.Index and type(el.slice.value) in (cst.Name, cst.Attribute) \
                    and self.dtype_like(el.slice.value):
                self.dtype_keys.update((id(n), short_code(node)) for n in iter_subtree(el.slice.value))
        if type(node.value) is not cst.Dict or len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
            return
        parts = dotted_parts(node.slice[0].slice.value)
        if not parts:
            return
        for el in node.value.elements:
            key = literal_value(el.key) if type(el) is cst.DictElement else None
            if isinstance(key, str):
                self.keyed[id(el.value)] = (parts[-1], [key])

    def enter_collection(self, node: cst.CSTNode, line: int) -> None:
        """`(torch.float16, torch.bfloat16)`, `{"fp16": torch.float16}`: a list of valid dtypes or an
        option table names a dtype, it computes nothing in it."""
        self.elements.update(id(el.value) for el in node.elements
                             if type(el) is cst.Element and type(el.value) in (cst.Name, cst.Attribute))

    def enter_if(self, node: cst.If, line: int) -> None:
        """Branches only some runs take. OPTION: a branch of an if/elif chain that compares a value
        with strings (`elif precision == "fp16":`) where a sibling branch picks bfloat16: the user
        chooses the precision and BF16 is there. COMPLEX: under `if torch.is_complex(x):` (or the
        else of its negation), which a real-valued model never takes."""
        test = node.test
        if self.complex_test(test):
            self.branches[id(node.body)] = (COMPLEX, short_code(test))
        elif type(test) is cst.UnaryOperation and type(test.operator) is cst.Not and self.complex_test(test.expression) \
                and type(node.orelse) is cst.Else:
            self.branches[id(node.orelse.body)] = (COMPLEX, short_code(test.expression))
        if id(node) in self.chained:
            return
        chain: list[tuple[cst.CSTNode | None, cst.CSTNode]] = []  # (test, body); test None for the else
        at: cst.CSTNode | None = node
        while type(at) is cst.If:
            chain.append((at.test, at.body))
            self.chained.add(id(at))
            orelse = at.orelse
            if type(orelse) is cst.Else:
                chain.append((None, orelse.body))
            at = orelse
        options = [i for i, (t, _b) in enumerate(chain) if t is not None and self.compares_strings(t)]
        flags = [i for i, (t, _b) in enumerate(chain) if t is not None and i not in options and self.flag_of(t)]
        if options or flags:
            bf16 = [self.picks_bf16(b) for _t, b in chain]
            for i in options + flags:
                if any(bf16[:i] + bf16[i + 1:]):
                    text = self.option_of(chain[i][0]) if i in options else self.flag_of(chain[i][0])
                    self.branches[id(chain[i][1])] = (OPTION, text)
            last = chain[-1]
            if last[0] is None and len(options) == len(chain) - 1 and not bf16[-1] and any(bf16[:-1]) \
                    and (text := self.else_of([t for t, _b in chain[:-1]])):
                self.branches[id(last[1])] = (OPTION, text)

    def enter_ifexp(self, node: cst.IfExp, line: int) -> None:
        """`view_as_real(x) if torch.is_complex(x) else x`: the first arm runs for complex tensors only."""
        test, arm = node.test, node.body
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, arm = test.expression, node.orelse
        if self.complex_test(test):
            text = short_code(test)
            self.complex_arms.update((id(n), text) for n in iter_subtree(arm))

    def enter_block(self, node: cst.CSTNode, line: int) -> None:
        kind = self.branches.get(id(node))
        if kind:
            self.open.append(kind)

    def leave_block(self, node: cst.CSTNode, line: int) -> None:
        if id(node) in self.branches:
            self.open.pop()

    def option_of(self, test: cst.CSTNode) -> str:
        """`precision == "amp" or precision == "fp16"` -> 'precision\tamp\tfp16': the option a branch
        test reads and the values that take the branch; "" when it is not one name against strings."""
        name, values = None, []
        tests = [test]
        while tests:
            t = tests.pop()
            if type(t) is cst.BooleanOperation and type(t.operator) is cst.Or:
                tests += [t.right, t.left]
                continue
            if type(t) is not cst.Comparison or len(t.comparisons) != 1:
                return ""
            c = t.comparisons[0]
            parts = dotted_parts(t.left)
            if not parts or (name is not None and parts[-1] != name):
                return ""
            name = parts[-1]
            lit = literal_value(c.comparator)
            if type(c.operator) is cst.Equal and isinstance(lit, str):
                values.append(lit)
            elif type(c.operator) is cst.In and type(c.comparator) in (cst.Tuple, cst.List, cst.Set):
                values += [literal_value(el.value) for el in c.comparator.elements]
            else:
                return ""
        return "\t".join([name, *values]) if name and all(isinstance(v, str) for v in values) else ""

    def flag_of(self, test: cst.CSTNode) -> str:
        """`if self.fp16_enabled():`, `elif args.use_fp16:`: a flag named for FP16 -> 'name\tTrue';
        "" for anything else (a capability probe such as `is_fp16_supported()` is no choice)."""
        if type(test) is cst.Call and not test.args:
            parts, call = dotted_parts(test.func), "()"
        else:
            parts, call = dotted_parts(test), ""
        if not parts or not _FP16_FLAG.search(parts[-1]) or _PROBE_WORD.search(parts[-1]):
            return ""
        return f"{parts[-1]}{call}\tTrue"

    def else_of(self, tests: list[cst.CSTNode]) -> str:
        """The else of a chain of string tests of one name (`if amp_type == "bfloat16": ... else:`):
        'name\t!\tbfloat16', picked by any value the tests do not name; "" when the tests read
        several names."""
        texts = [self.option_of(t) for t in tests]
        if not all(texts) or len({t.split("\t")[0] for t in texts}) != 1:
            return ""
        named = [v for t in texts for v in t.split("\t")[1:]]
        return "\t".join([texts[0].split("\t")[0], "!", *named])

    def chosen_by(self, node: cst.CSTNode) -> tuple[str, list[str]] | None:
        """(option, the values that pick it) for a precision a named option chooses: an entry of a
        table looked up by the option, or the innermost option branch when it reads one name."""
        if id(node) in self.keyed:
            return self.keyed[id(node)]
        for kind, text in reversed(self.open):
            if kind == OPTION:
                if not text:
                    return None
                name, *values = text.split("\t")
                return name, values
        return None

    def autocast_off(self, node: cst.CSTNode, symbol: str) -> str | None:
        """`autocast("cuda", enabled=False)` (a call, a `with` item or a decorator): a region that
        switches autocast off, or None for anything else."""
        if type(node) is not cst.Call or symbol.rsplit(".", 1)[-1] != "autocast":
            return None
        off = any(a.keyword is not None and a.keyword.value == "enabled" and literal_value(a.value) is False
                  for a in node.args)
        return short_code(node) if off else None

    def autocast_follows(self, node: cst.CSTNode, symbol: str) -> tuple[str, str] | None:
        """(test, read) for an autocast whose device type is `"cuda" if <test> else x.device.type`
        (or the reverse), written there or given to the name it passes (one step): it autocasts on the
        run's own device unless the test holds; None for anything else."""
        if type(node) is not cst.Call or symbol.rsplit(".", 1)[-1] != "autocast":
            return None
        arg = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "device_type"), None)
        if arg is None and node.args and node.args[0].keyword is None and not node.args[0].star:
            arg = node.args[0].value
        values = [arg] if type(arg) is cst.IfExp else self.travelled(arg) if arg is not None else []
        found = None
        for v in values:
            if type(v) is not cst.IfExp:
                return None
            for cuda, other in ((v.body, v.orelse), (v.orelse, v.body)):
                shapes = string_shapes(cuda)
                if shapes and all(CUDA_DEVICE.fullmatch(x) for x in shapes) and _reads_device_type(other):
                    found = found or (short_code(v.test), short_code(other))
                    break
            else:
                return None
        return found

    def dtype_key(self, node: cst.CSTNode) -> str | None:
        """The subscript a dtype is the key of (`dtype2bytes[torch.float16]`), or None."""
        return self.dtype_keys.get(id(node))

    def compares_strings(self, test: cst.CSTNode) -> bool:
        if type(test) is cst.BooleanOperation:
            return self.compares_strings(test.left) or self.compares_strings(test.right)
        return type(test) is cst.Comparison and any(
            type(c.operator) in (cst.Equal, cst.In) and (isinstance(literal_value(c.comparator), str) or (
                type(c.comparator) in (cst.Tuple, cst.List, cst.Set) and c.comparator.elements
                and all(isinstance(literal_value(el.value), str) for el in c.comparator.elements)))
            for c in test.comparisons)

    def picks_bf16(self, block: cst.CSTNode) -> bool:
        for n in iter_subtree(block):
            t = type(n)
            if t in (cst.Name, cst.Attribute) and self.s.resolve(n)[0] == "torch.bfloat16":
                return True
            if t is cst.Attribute and n.attr.value == "bfloat16":
                return True
            if t is cst.SimpleString and str(literal_value(n)).lower() in ("bf16", "bfloat16"):
                return True
        return False

    def complex_test(self, test: cst.CSTNode) -> bool:
        """`torch.is_complex(x)`, `x.is_complex()`, `x.dtype.is_complex`, alone or in an `and`."""
        t = type(test)
        if t is cst.BooleanOperation and type(test.operator) is cst.And:
            return self.complex_test(test.left) or self.complex_test(test.right)
        if t is cst.Call:
            test = test.func
        parts = dotted_parts(test)
        return bool(parts) and parts[-1] == "is_complex"

    def complex_only(self, node: cst.CSTNode) -> str | None:
        """The test that confines `node` to complex tensors, or None."""
        for kind, text in reversed(self.open):
            if kind == COMPLEX:
                return text
        return self.complex_arms.get(id(node))

    def dtype_like(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.Call:
            q, _ = self.s.resolve(node.func) if type(node.func) in (cst.Name, cst.Attribute) else (None, False)
            return q in ("numpy.dtype", "torch.dtype")
        q, _ = self.s.resolve(node) if type(node) in (cst.Name, cst.Attribute) else (None, False)
        return q is not None and q.split(".")[0] in ("torch", "numpy")

    def silent(self, rule, clause, node: cst.CSTNode) -> bool:
        """A hit that does nothing at run time: in a type annotation, or a dtype table entry; or a
        precision the user picks: a dtype listed in a collection literal, a branch of a string
        option whose sibling picks bfloat16. When a named option picks it (`{...}[args.dtype]`,
        `if precision == "amp":`), the hit stays with that option (`chosen_by`) for context.py to
        judge on the option's default: a default FP16 is still FP16."""
        if self.annotation > 0 or (clause.kind == "attribute" and id(node) in self.tables):
            return True
        if rule.category != "precision" or self.chosen_by(node) is not None:
            return False  # an option with a name: context.py decides from its default
        return any(kind == OPTION for kind, _ in self.open) or (clause.kind == "attribute" and id(node) in self.elements)

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

    def host_value(self, expr: cst.CSTNode, follow: bool = True) -> bool:
        """A NumPy or pandas value, not a tensor: made by `numpy.*`/`pandas.*` or `.numpy()`, or an
        element, attribute or method result of one (`df[df.kind == "a"]["kind"]`), or a name given
        one (one step). Its `.any()`, `.sum()` or `.unique()` is host work, not a tensor op."""
        while True:
            t = type(expr)
            if t is cst.Subscript or t is cst.Attribute:
                expr = expr.value
            elif t is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
                q = self.s.resolve(expr.func)[0]
                if q is not None:
                    return q.startswith(("numpy.", "pandas."))
                if type(expr.func) is not cst.Attribute:
                    return False
                if expr.func.attr.value == "numpy":
                    return True
                expr = expr.func.value
            elif t is cst.Name:
                q = self.s.resolve(expr)[0]
                if q is not None and q.split(".")[0] in ("numpy", "pandas"):
                    return True
                return follow and self.travels(expr, lambda v: self.host_value(v, follow=False))
            else:
                return False

    def on_host(self, node: cst.CSTNode, kind: str, matcher: str | None = None) -> str | None:
        """The code that puts a hit's operand on the CPU, or None: what a method is called on
        (`x.nonzero()`), a torch function's first argument (`torch.argsort(x)`), what a boolean mask
        indexes (`x[mask]`). context.py lists a dynamic shape or host read on it as host-side."""
        subject = None
        if matcher == "tensor_control_flow":
            return self.read_origin(node)
        if type(node) is cst.Subscript:
            subject = node.value
        elif type(node) is cst.Call and kind == "method" and type(node.func) is cst.Attribute:
            subject = node.func.value
        elif type(node) is cst.Call and kind == "call" and node.args and node.args[0].keyword is None \
                and not node.args[0].star:
            subject = node.args[0].value
        return self.cpu_origin(subject) if subject is not None else None

    def cpu_origin(self, expr: cst.CSTNode, follow: bool = True) -> str | None:
        """The code that makes `expr` a value on the CPU, or None when it may be on the device: a
        NumPy or pandas value; `.cpu()`, `.numpy()`, `.to("cpu")` (a dtype-only `.to`, a view, an
        element or a tensor method keeps the device); a call given `device="cpu"`; `torch.from_numpy`;
        a torch factory given no device (`torch.randn(n)`, `torch.tensor([1, 2])`, not
        `torch.tensor(x)`, which keeps x's device); a comparison or arithmetic on one; a name every
        assignment so far gave one (one step)."""
        if self.host_value(expr, follow=False):
            return short_code(expr)
        while True:
            t = type(expr)
            if t is cst.Subscript:
                expr = expr.value
            elif t in (cst.Comparison, cst.BinaryOperation):
                # on the CPU when every operand is on the CPU or a Python number: a CPU scalar tensor
                # with a device tensor (`torch.tensor(2.0) * x`) computes on the device
                operands = [expr.left, expr.right] if t is cst.BinaryOperation else \
                    [expr.left, *(c.comparator for c in expr.comparisons)]
                array = next((o for o in operands if self.numpy_array(o)), None)
                if array is not None:  # with a NumPy array, a device tensor raises: this runs on the host
                    return short_code(array)
                origins = [None if self.python_number(o) else self.cpu_origin(o, follow) for o in operands]
                if any(o is None and not self.python_number(operands[i]) for i, o in enumerate(origins)):
                    return None
                return next((o for o in origins if o), None)
            elif t is cst.UnaryOperation:
                expr = expr.expression
            elif t in (cst.Name, cst.Attribute) and key_of(expr) is not None:
                seen = (self.host_param(expr) or self.host_method(expr)) if follow else None
                if seen is None and follow and t is cst.Attribute and self.class_numpy(expr):
                    seen = f"{key_of(expr)} = {self.class_numpy(expr)}(...)"
                if seen is not None:  # (a value from elsewhere is not judged by this frame's facts)
                    return seen
                values = self.lookup(key_of(expr))
                if not values and t is cst.Attribute:
                    expr = expr.value  # `x.T`, `x.grad`: where x is
                    continue
                if not follow or self.busy or not values or any(v is None for v in values):
                    return None  # a parameter, a loop variable, an unpacked value: unknown
                self.busy = True
                try:
                    origins = [self.cpu_origin(v, follow=False) for v in values]
                finally:
                    self.busy = False
                return f"{key_of(expr)} = {origins[-1]}" if all(origins) else None
            elif t is cst.Attribute:
                expr = expr.value  # `x.T`, `x.grad`: where x is
            elif t is cst.Call:
                verdict = self._call_place(expr)
                if verdict is None:
                    return None
                if verdict is True:
                    return short_code(expr)
                expr = verdict
            else:
                return None

    def class_numpy(self, expr: cst.CSTNode) -> str | None:
        """For `self.x` in a method that does not assign it: the NumPy call (`numpy.zeros`) when
        every value a class of the file gives `self.x` (in any method, or a class attribute `x`),
        is the result of a NumPy call that makes an array; else None. Every class, not only the
        enclosing one: a subclass may assign it too. Read from the file's `ast` tree (parsed once
        for the screen and the code facts; no new parse), once per file."""
        key = key_of(expr)
        if key is None or not key.startswith("self.") or key.count(".") != 1 or self.lookup(key):
            return None
        if not self.classes or len(self.frames) < 2 or self.frames[-2][0] != "class" or self.ast_tree is None:
            return None
        if self.class_table is None:
            self.class_table = {}
            for node in ast.walk(self.ast_tree):
                if type(node) is ast.ClassDef:
                    for attr, values in _class_assignments(node).items():
                        self.class_table.setdefault(attr, []).extend(values)
        values = self.class_table.get(key[5:])
        if not values:
            return None
        calls = set()
        for v in values:
            parts = ast_chain(v.func) if type(v) is ast.Call else None
            b = self.s.names.lookup(parts[0]) if parts else None
            q = b.qualname + "".join("." + p for p in parts[1:]) if b is not None and b.qualname else None
            if q not in _NUMPY_ARRAYS:
                return None
            calls.add(q)
        return min(calls)

    def host_param(self, expr: cst.CSTNode) -> str | None:
        """`a` for a parameter annotated `np.ndarray`, `pd.DataFrame` or `pd.Series` that the
        function has not assigned since."""
        ann = self._annotated(expr)
        return f"{expr.value}: {short_code(ann)}" if ann is not None else None

    def _annotated(self, expr: cst.CSTNode) -> cst.CSTNode | None:
        if type(expr) is not cst.Name:
            return None
        frame = self.frames[-1][1]
        ann = frame.get(":annotated " + expr.value)
        return ann[0] if ann is not None and len(frame.get(expr.value, ())) == 1 else None

    def host_method(self, expr: cst.CSTNode) -> str | None:
        """`s` after `s.isna()` (a method no tensor has) with no assignment to s in between."""
        key = key_of(expr)
        mark = self.frames[-1][1].get(":method " + key) if key is not None else None
        if mark is None or mark[0] != len(self.lookup(key)):
            return None
        return f"{key}.{mark[1]}()"

    def numpy_array(self, expr: cst.CSTNode, follow: bool = True) -> bool:
        """A NumPy array, never a NumPy scalar: a call that always makes one (`np.zeros(n)`), a
        slice of a NumPy value (`v[1:]`), a parameter annotated `np.ndarray`, a name every
        assignment so far gave one (one step; for `self.x`, class_numpy)."""
        t = type(expr)
        if t is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
            return self.s.resolve(expr.func)[0] in _NUMPY_ARRAYS
        if t is cst.Subscript:
            if not any(type(el.slice) is cst.Slice for el in expr.slice):
                return False  # `v[i]` may be a NumPy scalar
            base = expr.value
            if self.host_value(base, follow=False) or self.numpy_array(base, follow):
                return True
            return follow and type(base) in (cst.Name, cst.Attribute) and self._all_bound(
                base, lambda v: self.host_value(v, follow=False))
        if t in (cst.Name, cst.Attribute) and follow:
            ann = self._annotated(expr)
            if ann is not None and self.s.resolve(ann)[0] == "numpy.ndarray":
                return True
            if t is cst.Attribute and self.class_numpy(expr):
                return True
            return self._all_bound(expr, lambda v: self.numpy_array(v, follow=False))
        return False

    def _all_bound(self, expr: cst.CSTNode, ok: Callable[[cst.CSTNode], bool]) -> bool:
        values = self.lookup(key_of(expr)) if key_of(expr) is not None else []
        return bool(values) and all(v is not None and ok(v) for v in values)

    def read_origin(self, expr: cst.CSTNode) -> str | None:
        """For control flow on a value (matchers.py tensor_control_flow): the code that puts every
        tensor the test reads on the CPU (`(counts < 0).any()` with `counts = torch.tensor([...])`),
        or None when one of them may be on the device."""
        origins = []
        for _, subject in tensor_value_reads(self.s.names, expr, self.host_value):
            origin = self.cpu_origin(subject) if subject is not None else None
            if origin is None:
                return None
            origins.append(origin)
        return origins[0] if origins else None

    def _call_place(self, call: cst.Call) -> cst.CSTNode | bool | None:
        """Where a call's result lives: True on the CPU, None unknown or the device, else the node
        whose place it keeps (a tensor method's receiver, a torch op's first argument)."""
        for a in call.args:
            if a.keyword is not None and a.keyword.value == "device":
                return True if self.names_cpu(a.value) else None
            if a.star == "**":
                return None  # a device may travel in `**factory_kwargs`
        func = call.func
        q = self.s.resolve(func)[0] if type(func) in (cst.Name, cst.Attribute) else None
        if q is not None and q.startswith("torch."):
            if q in _CPU_RESULTS:
                return True
            if q in _DATA_FACTORIES:
                data = call.args[0].value if call.args and call.args[0].keyword is None else None
                return True if data is not None and self._python_data(data) else None
            if q in _SIZE_FACTORIES:
                return True
            if q.startswith(NOT_TENSOR_CALLS) or not call.args or call.args[0].keyword is not None:
                return None
            return call.args[0].value  # `torch.sort(x)`: on x's device
        if type(func) is not cst.Attribute or q is not None:
            return None  # a project or library function: its result may live anywhere
        method = func.attr.value
        if method in ("cpu", "numpy"):
            return True
        if method == "to":
            if any(self.names_cpu(a.value) for a in call.args):
                return True
            keeps = all(a.keyword is not None and a.keyword.value in ("dtype", "non_blocking", "copy", "memory_format")
                        or self.names_dtype(a.value) for a in call.args)
            return func.value if keeps else None  # `.to(device)`, `.to(other)`: moved
        if method in _MOVES:
            return None
        return func.value  # a tensor method keeps its tensor's device

    def names_cpu(self, value: cst.CSTNode) -> bool:
        """`"cpu"`, `torch.device("cpu")`, a name given one of them: the CPU for sure (an
        `"cuda" if ok else "cpu"` may be the device)."""
        if literal_value(value) == "cpu":
            return True
        if type(value) is cst.Call and value.args and type(value.func) in (cst.Name, cst.Attribute):
            return self.s.resolve(value.func)[0] == "torch.device" and literal_value(value.args[0].value) == "cpu"
        return type(value) is cst.Name and self.travels(value, lambda v: self.names_cpu(v))

    def python_number(self, expr: cst.CSTNode, depth: int = 0) -> bool:
        """A number on the host: a literal, `int(...)`, `len(...)`, `x.item()`, a size (`x.size(0)`,
        `x.shape[1]`, `x.numel()`), arithmetic on them, a name given one (one step)."""
        t = type(expr)
        if t in (cst.Integer, cst.Float):
            return True
        if t is cst.UnaryOperation:
            return self.python_number(expr.expression, depth)
        if t is cst.BinaryOperation:
            return self.python_number(expr.left, depth) and self.python_number(expr.right, depth)
        if t is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape":
            return True
        if t is cst.Call and type(expr.func) is cst.Name:
            return self.s.resolve(expr.func)[0] in _NUMBER_CALLS
        if t is cst.Call and type(expr.func) is cst.Attribute:
            return expr.func.attr.value in ("item", "size", "numel", "dim")
        if t is cst.Name and depth == 0:
            values = self.lookup(expr.value)
            return bool(values) and all(v is not None and self.python_number(v, 1) for v in values)
        return False

    def _python_data(self, data: cst.CSTNode) -> bool:
        """Data that is no tensor: a list or tuple, a comprehension, a NumPy value (not a number:
        `torch.tensor(2.0)` is a scalar that computes on a device tensor's device)."""
        if type(data) in (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp):
            return True
        return self.host_value(data) or self.json_data(data)

    def json_data(self, data: cst.CSTNode, follow: bool = True) -> bool:
        """What `json.load`/`json.loads` returns, an element of it (`stats["counts"]`), or a name
        every assignment so far gave one (one step): Python lists, numbers and strings."""
        while type(data) is cst.Subscript:
            data = data.value
        if type(data) is cst.Call and type(data.func) in (cst.Name, cst.Attribute):
            return self.s.resolve(data.func)[0] in _JSON_LOADS
        if type(data) is cst.Name and follow:
            values = self.lookup(data.value)
            return bool(values) and all(v is not None and self.json_data(v, follow=False) for v in values)
        return False

    def names_dtype(self, value: cst.CSTNode) -> bool:
        if type(value) not in (cst.Name, cst.Attribute):
            return False
        q = self.s.resolve(value)[0]
        return q is not None and (q in _FLOAT_DTYPES or q in _OTHER_DTYPES)

    def tensor_value(self, expr: cst.CSTNode) -> bool:
        """A tensor read as a Python number: a whole reduction (`x.max()`), `torch.*` of a tensor,
        but not `.item()`/`.tolist()` (their own rule reports them) nor sizes and shapes."""
        s = self.s
        if tensor_value_read(s.names, expr) not in (None, ".item()"):
            return True
        t = type(expr)
        if t is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
            q = s.resolve(expr.func)[0]
            return q is not None and q.startswith("torch.") and not q.startswith(NOT_TENSOR_CALLS)
        return False


def _class_assignments(cls: ast.ClassDef) -> dict[str, list]:
    """values.py `class_numpy`: "x" -> each value a method of `cls` (or a function nested in one)
    assigns to `self.x`, and each class-level `x = ...`; None for one it cannot see (an
    unpacking, `self.x += ...`, `for self.x in ...`). A nested class has its own `self`."""
    table: dict[str, list] = {}
    stack: list[tuple[ast.AST, bool]] = [(st, True) for st in cls.body]
    while stack:
        node, top = stack.pop()
        t = type(node)
        if t is ast.ClassDef:
            continue
        if t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign:
            value = node.value if t is not ast.AugAssign else None
            for target in (node.targets if t is ast.Assign else [node.target]):
                _note_target(target, value, table, top)
        elif t in (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith) and not top:
            for target in [node.target] if t in (ast.For, ast.AsyncFor) else \
                    [i.optional_vars for i in node.items if i.optional_vars is not None]:
                _note_target(target, None, table, top)
        elif t is ast.NamedExpr:
            _note_target(node.target, node.value, table, top)
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
            top = False
        stack.extend((child, top) for child in ast.iter_child_nodes(node) if type(child) is not ast.ClassDef)
    return table


def _note_target(target: ast.AST, value: ast.AST | None, table: dict[str, list], top: bool) -> None:
    if type(target) in (ast.Tuple, ast.List):
        pairs = type(value) in (ast.Tuple, ast.List) and len(value.elts) == len(target.elts)
        for i, el in enumerate(target.elts):
            _note_target(el, value.elts[i] if pairs else None, table, top)
        return
    if type(target) is ast.Starred:
        _note_target(target.value, None, table, top)
    elif top and type(target) is ast.Name:
        table.setdefault(target.id, []).append(value)  # a class attribute, read as `self.x`
    elif not top and type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
        table.setdefault(target.attr, []).append(value)
