"""Plain records of a trace (no torch here): what to trace, and what the trace saw.

run.py fills a TraceResult; ops.py turns it into findings and op counts; merge.py
sets the status of static findings from it. Keeping these torch-free lets the base install read,
test and render them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# Example-input dtypes accepted by --inputs, with the usual aliases.
DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64", "fp64": "float64",
    "int64": "int64", "long": "int64",
    "int32": "int32", "int": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
    "complex64": "complex64", "complex128": "complex128",
}
_INPUT = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*):)?(?P<dtype>[A-Za-z0-9_]+)\[(?P<dims>[^\]]*)\]$")


class TraceSetupError(Exception):
    """The factory or the example inputs cannot be used: one line, exit code 2."""


@dataclass(frozen=True)
class InputSpec:
    """One example input: `input_ids:int64[8,2048]` (keyword) or `float32[4,16]` (positional)."""

    name: str | None
    dtype: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{self.name + ':' if self.name else ''}{self.dtype}[{dims}]"


def parse_inputs(values: tuple[str, ...] | list[str]) -> list[InputSpec]:
    """--inputs values, each holding one or more specs separated by spaces or semicolons."""
    specs: list[InputSpec] = []
    for value in values:
        for text in re.split(r"[;\s]+", value.strip()):
            if text:
                specs.append(parse_input(text))
    names = [s.name for s in specs if s.name]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise TraceSetupError(f"--inputs names {dup!r} twice")
    first_named = next((i for i, s in enumerate(specs) if s.name), len(specs))
    if any(not s.name for s in specs[first_named:]):
        raise TraceSetupError("--inputs: positional inputs (without NAME:) must come before named ones")
    return specs


def parse_input(text: str) -> InputSpec:
    m = _INPUT.match(text)
    if not m:
        raise TraceSetupError(f"--inputs: cannot read {text!r}; expected NAME:DTYPE[DIM,...], e.g. input_ids:int64[8,2048]")
    dtype = DTYPES.get(m.group("dtype").lower())
    if dtype is None:
        raise TraceSetupError(f"--inputs: unknown dtype {m.group('dtype')!r} in {text!r} (use one of {', '.join(sorted(set(DTYPES.values())))})")
    dims_text = m.group("dims").strip()
    try:
        shape = tuple(int(d) for d in dims_text.split(",")) if dims_text else ()
    except ValueError:
        raise TraceSetupError(f"--inputs: dimensions in {text!r} must be whole numbers") from None
    if any(d < 0 for d in shape):
        raise TraceSetupError(f"--inputs: dimensions in {text!r} must not be negative")
    return InputSpec(m.group("name"), dtype, shape)


@dataclass
class TraceRequest:
    target: str  # MODULE:FACTORY, path/to/file.py:FACTORY or hf:CONFIG.json, as the user wrote it
    root: Path  # findings are reported relative to this directory (the --scan root or the cwd)
    inputs: list[InputSpec] = field(default_factory=list)
    train: bool = True  # forward + backward; False: forward only, in eval mode
    dynamic: bool = False  # batch and sequence dimensions of the inputs are symbolic
    graph_breaks: bool = True  # run torch._dynamo.explain for graph breaks


@dataclass(frozen=True, order=True)
class Site:
    """Where a traced op came from: the innermost frame of the user's code."""

    path: str  # relative to the root (posix), or to its sys.path entry for installed code
    line: int
    column: int = 1
    function: str = ""  # qualified name, e.g. "Attention.forward"
    user: bool = True  # under the root; False: installed code (e.g. transformers' modeling files)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class OpUse:
    """One aten op as called from one site in one phase, with the dtype facts its rules ask about.

    facts: "integer" / "bool" (the op's first tensor argument), "float64" / "complex" (any tensor
    argument or result), "dynamic" (the op created a data-dependent size, an unbacked symbol).
    """

    op: str  # normalised name: "aten::sort" for the default overload, "aten::sort.stable" otherwise
    site: Site | None
    phase: str  # "forward" or "backward"
    facts: frozenset[str] = frozenset()


@dataclass
class TraceEvent:
    """Something the trace met that is not an op: a graph break, a branch on data, an error."""

    kind: str  # one of catalog.TRACE_EVENTS
    message: str
    site: Site | None
    count: int = 1
    detail: str = ""


@dataclass
class TraceResult:
    target: str
    model: str = ""  # class name of the traced module
    parameters: int = 0
    inputs: list[str] = field(default_factory=list)  # the example inputs as InputSpec strings
    train: bool = True
    dynamic: bool = False
    uses: dict[OpUse, int] = field(default_factory=dict)
    events: list[TraceEvent] = field(default_factory=list)
    forward_done: bool = False
    backward_done: bool = False
    stopped: TraceEvent | None = None  # why the trace ended early (an error, or a loop on data)
    # The user's forward or backward raised a plain Python error (a missing argument, a bad key):
    # a mistake in the call, not code the trace cannot capture. The CLI reports it and exits 2.
    user_error: bool = False
    graph_breaks: str = "skipped"  # "ran", "skipped" or "failed: <why>"
    graph_count: int = 0  # graphs TorchDynamo captured (graph breaks + 1) when it ran
    shape_guards: list[dict] = field(default_factory=list)  # --dynamic: guards on symbolic input sizes
    # Coverage, for merging with a static scan: first lines of the user's functions that ran
    # (code objects' co_firstlineno, per root-relative path) and the user files that were loaded.
    executed: dict[str, set[int]] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)
