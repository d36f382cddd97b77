"""CUDA probes and CUDA runtime variables that only choose (python.py): harmless off CUDA.

On Trainium `torch.cuda.is_available()` is False and `torch.cuda.device_count()` is 0. A probe is a
porting concern only when that answer breaks or loses something the training needs: an
`assert`, a `raise` when CUDA is absent, a device that drops to the CPU, a world size of 0. A
probe whose value only picks between a CUDA path and a working alternative is not:

    use_cuda_kernel = default(use_cuda_kernel, torch.cuda.is_available())   # False: the PyTorch path
    is_cuda = device.type == "cuda" and torch.cuda.is_available()          # False: no CUDA streams
    world_size: int = field(default=max(1, torch.cuda.device_count()))      # 0 gives 1; a flag overrides
    visible = ids[: torch.cuda.device_count()]                              # 0: nothing to translate

Such a probe is a value (an assignment, a parameter default, a keyword argument), not the test of
an `if` or an `assert` (guards.py and the CUDA-only regions judge those), and the value names no
CPU device: `"cuda" if torch.cuda.is_available() else "cpu"` trains on the CPU and stays a concern
(with its `"cuda"`). A count is harmless only where 0 cannot size anything: compared, clamped
by `max(1, ...)`, or a slice bound; `nprocs=torch.cuda.device_count()` spawns nothing and stays.

Setting a CUDA runtime variable that tunes the driver or the allocator (`PYTORCH_CUDA_ALLOC_CONF`,
`CUDA_LAUNCH_BLOCKING`) is ignored off CUDA; one that picks devices (`CUDA_VISIBLE_DEVICES`)
must become `NEURON_RT_VISIBLE_CORES`, and reading or asserting one stays a concern.
"""

from __future__ import annotations

import re
from typing import Callable

import libcst as cst

from .cstwalk import iter_subtree
from .guards import raises
from .vocab import literal_value, load_libcst

load_libcst()

BOOLEAN_PROBES = frozenset({"torch.cuda.is_available", "torch.cuda.is_bf16_supported", "torch.cuda.is_initialized"})
COUNT_PROBES = frozenset({"torch.cuda.device_count"})
# The CUDA runtime's own variables (NCCL's are the collectives' and judged with them), and those of
# them that choose which devices a process sees: a real edit (NEURON_RT_VISIBLE_CORES).
CUDA_RUNTIME = re.compile(r"(?:CUDA|PYTORCH_CUDA|PYTORCH_NVML|TORCH_CUDNN|CUBLAS|CUDNN)_\w+")
DEVICE_CHOICE = re.compile(r"(?:\w+_)?VISIBLE_DEVICES")

Resolve = Callable[[cst.CSTNode], tuple]


def _names_cpu(value: cst.CSTNode) -> bool:
    """Whether a value names the CPU device (`"cpu"`, `torch.device("cpu")`)."""
    return any(type(n) is cst.SimpleString and literal_value(n) == "cpu" for n in iter_subtree(value))


def _positive_literal(arg: cst.Arg) -> bool:
    return _int_literal(arg.value) and literal_value(arg.value) >= 1


def chosen_probes(value: cst.CSTNode | None, resolve: Resolve) -> set[int]:
    """Ids of the CUDA probe calls in an assigned value, a default or a keyword argument that only
    choose (see the module docstring); none when the value names the CPU device."""
    if value is None or _names_cpu(value):
        return set()
    out: set[int] = set()
    stack: list[tuple[cst.CSTNode, bool]] = [(value, False)]  # (node, a count there cannot size anything)
    while stack:
        n, bounded = stack.pop()
        t = type(n)
        if t is cst.Call and type(n.func) in (cst.Name, cst.Attribute):
            q = resolve(n.func)[0]
            if q in BOOLEAN_PROBES or (q in COUNT_PROBES and bounded):
                out.add(id(n))
            # max(1, torch.cuda.device_count()): clamped to at least one
            clamp = type(n.func) is cst.Name and n.func.value == "max" and any(_positive_literal(a) for a in n.args)
            for a in n.args:
                stack.append((a.value, clamp))
            stack.append((n.func, False))
            continue
        if t is cst.Arg or t is cst.Element:
            stack.append((n.value, bounded))
            continue
        inner = t in (cst.Comparison, cst.ComparisonTarget, cst.Slice)
        stack.extend((c, inner) for c in n.children)
    return out


def sets_tuning_variable(name: str) -> bool:
    """A CUDA runtime variable whose setting only tunes CUDA (not which devices are seen)."""
    return bool(CUDA_RUNTIME.fullmatch(name)) and not DEVICE_CHOICE.fullmatch(name)


_OPS = {cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b, cst.LessThan: lambda a, b: a < b,
        cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThan: lambda a, b: a > b,
        cst.GreaterThanEqual: lambda a, b: a >= b}


def off_cuda(test: cst.CSTNode, resolve: Resolve) -> bool | None:
    """A test's value where every CUDA probe answers as on Trainium (False, 0), or None when other
    values decide it: `not (use_cuda_kernel and not torch.cuda.is_available())` is `not use_cuda_kernel`."""
    t = type(test)
    if t is cst.Call and type(test.func) in (cst.Name, cst.Attribute):
        return False if resolve(test.func)[0] in BOOLEAN_PROBES else None
    if t is cst.UnaryOperation and type(test.operator) is cst.Not:
        v = off_cuda(test.expression, resolve)
        return None if v is None else not v
    if t is cst.BooleanOperation:
        a, b = off_cuda(test.left, resolve), off_cuda(test.right, resolve)
        if type(test.operator) is cst.And:
            return False if False in (a, b) else (True if a is True and b is True else None)
        return True if True in (a, b) else (False if a is False and b is False else None)
    if t is cst.Comparison and len(test.comparisons) == 1:
        left, right = _count_value(test.left, resolve), _count_value(test.comparisons[0].comparator, resolve)
        op = _OPS.get(type(test.comparisons[0].operator))
        if op is not None and left is not None and right is not None:
            return op(left, right)
    return None


def _int_literal(node: cst.CSTNode) -> bool:
    v = literal_value(node)
    return isinstance(v, int) and not isinstance(v, bool)


def _count_value(node: cst.CSTNode, resolve: Resolve) -> int | None:
    if type(node) is cst.Call and type(node.func) in (cst.Name, cst.Attribute) and resolve(node.func)[0] in COUNT_PROBES:
        return 0
    return literal_value(node) if _int_literal(node) else None


def probe_calls(node: cst.CSTNode, resolve: Resolve, names: frozenset = BOOLEAN_PROBES | COUNT_PROBES) -> set[int]:
    return {id(n) for n in iter_subtree(node)
            if type(n) is cst.Call and type(n.func) in (cst.Name, cst.Attribute) and resolve(n.func)[0] in names}


def checks_an_option(test: cst.CSTNode, resolve: Resolve) -> set[int]:
    """The probes of an `assert` (or of the test of an `if` that gives up) that fails only when
    something else also asks for CUDA: `assert not (use_cuda_kernel and not torch.cuda.is_available())`
    rejects an option and passes on Trainium by default. None when the probes alone decide."""
    return probe_calls(test, resolve) if off_cuda(test, resolve) is None else set()


def counts_in_test(node: cst.If, resolve: Resolve) -> set[int]:
    """Device counts compared with another value (an id, a requested number) in the test of an `if`
    that names no CPU device (the caller checks that no branch gives up): 0 only picks a branch
    (`if any(int(i) >= torch.cuda.device_count() ...)` translates ids). A count compared with a
    literal (`if torch.cuda.device_count() > 0:`) asks whether CUDA is there, like `is_available()`
    in a test, and is judged as one (what the CUDA branch does decides)."""
    if _names_cpu(node):
        return set()
    presence = set()
    for n in iter_subtree(node.test):
        if type(n) is cst.Comparison and len(n.comparisons) == 1:
            sides = (n.left, n.comparisons[0].comparator)
            counts = probe_calls(n, resolve, COUNT_PROBES) & {id(x) for x in sides}
            if counts and any(_int_literal(x) for x in sides):
                presence |= counts
    return (chosen_probes(node.test, resolve) & probe_calls(node.test, resolve, COUNT_PROBES)) - presence


class ProbeSites:
    """Where the walk is, for a probe hit to be judged there (only on a hit, so the walk stays cheap):
    a stack of the values (assignments, parameter defaults, keyword arguments), `if` tests and
    asserts around the current node."""

    VALUE, IF, ASSERT, NONE = "value", "if", "assert", "none"

    def __init__(self, resolve: Resolve) -> None:
        self.resolve = resolve
        self.stack: list[tuple[str, cst.CSTNode | None]] = []

    def push(self, kind: str, node: cst.CSTNode | None) -> None:
        self.stack.append((kind, node))

    def pop(self) -> None:
        self.stack.pop()

    def harmless(self, call: cst.Call) -> bool:
        """Whether a probe call only chooses (the module docstring), judged at the innermost site."""
        for kind, node in reversed(self.stack):
            if kind == self.NONE or node is None:
                continue  # a positional argument, a bare annotation: the site around it decides
            if kind == self.VALUE:
                return id(call) in chosen_probes(node, self.resolve)
            if kind == self.ASSERT:
                return id(call) in checks_an_option(node.test, self.resolve)
            if not any(n is call for n in iter_subtree(node.test)):
                return False  # in the body of the `if`, not its test
            gives_up = raises(node.body) or (type(node.orelse) is cst.Else and raises(node.orelse.body))
            found = checks_an_option(node.test, self.resolve) if gives_up else counts_in_test(node, self.resolve)
            return id(call) in found
        return False
