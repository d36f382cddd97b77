"""The rule catalog: rules/*.toml (and users' extra files) loaded into validated Rule objects.

A rule is data. Its `match` clauses use a small set of matcher kinds; code exists only per kind
(sources/python.py, native.py, deps.py and trace/ops.py), never per rule. Every error names the file,
the rule id and the field, so a broken catalog is fixed in one look.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from .fixes import CODEMODS, FIX_KINDS
from .model import CATEGORIES, CONFIDENCES, TARGETS
from .numbers import plural
from .tomlcheck import TomlSyntaxError, parse, unknown_keys

RULE_ID = re.compile(r"^NR\d{4}$")
# Two digits after NR name the category, so "NR10" selects every device rule.
CATEGORY_PREFIX = {c: f"NR{10 + i}" for i, c in enumerate(CATEGORIES)}
EVIDENCE = ("doc", "issue", "3rd", "derived", "unverified")
PER = ("occurrence", "task")
WITHIN = ("train_step", "forward", "collate")
# `dynamic`: the op created a data-dependent size (an unbacked symbol) in its result.
ATEN_WHEN = ("always", "integer", "integer_or_bool", "float64", "complex", "dynamic")
# What trace mode meets besides ops: TorchDynamo graph breaks, Python branches on tensor data,
# and code the trace cannot capture.
TRACE_EVENTS = ("graph-break", "data-dependent-branch", "trace-error")
# How the effort model (effort.py) costs a rule's findings. "catalog": from the rule's own numbers,
# grown with its sites or files (by category). The others read what the findings measured
# (model.KernelFacts): "cuda-kernel" a CUDA source per file, whose kernels walk the CUDA kernel
# learning curve on this rule's numbers; "cuda-host" the host C++ files of an extension; "triton-kernel"
# a @triton.jit kernel, on the Triton learning curve; "triton-autotune" and "triton-launch" join their
# kernel's task; "kernel" every finding is a kernel of its own (inline CUDA, CuPy, Numba, other DSLs).
COSTINGS = ("catalog", "cuda-kernel", "cuda-host", "triton-kernel", "triton-autotune", "triton-launch", "kernel",
            "load-library")
# Categories where a guarded import or a kernel path with a PyTorch path beside it is a fallback.
FALLBACK_CATEGORIES = ("custom-cuda", "triton", "gpu-library")

NATIVE_SOURCE_GLOBS = ("*.cu", "*.cuh", "*.cpp", "*.cc", "*.cxx", "*.c", "*.h", "*.hpp", "*.hh", "*.inl")


class CatalogError(Exception):
    """A catalog file that cannot be used: the message names file, rule and field. `rule` (an id)
    and `field`, `index` (0-based, of a rule with no usable id) or `line` say where, for line_in()."""

    def __init__(self, message: str, rule: str | None = None, field: str = "", index: int | None = None,
                 line: int | None = None):
        super().__init__(message)
        self.rule, self.field, self.index, self.line = rule, field, index, line

    def line_in(self, text: str) -> int:
        """The line of `text` (the catalog file) the problem is on: the field's key in its rule's table,
        else the rule's `id` (or its `[[rule]]` header), else 1."""
        if self.line:
            return self.line
        lines = text.splitlines()
        header = re.compile(r"^\s*\[\[\s*rule\s*\]\]")
        starts = [n for n, line in enumerate(lines) if header.match(line)]
        if self.rule:
            rx = re.compile(r"^\s*id\s*=\s*[\"']" + re.escape(self.rule) + r"[\"']")
            at = next((n for n, line in enumerate(lines) if rx.match(line)), None)
        else:
            at = starts[self.index] if self.index is not None and self.index < len(starts) else None
        if at is None:
            return 1
        keys = re.findall(r"[A-Za-z_]+", self.field)
        if keys:
            start = max((s for s in starts if s <= at), default=0)
            end = min((s for s in starts if s > at), default=len(lines))
            key = re.compile(r"^\s*" + re.escape(keys[-1]) + r"\s*=")
            return next((n + 1 for n in range(start, end) if key.match(lines[n])), at + 1)
        return at + 1


@dataclass(frozen=True)
class ArgCond:
    """A condition on one argument of a call: found by keyword and/or position."""

    keyword: str | None = None
    position: int | None = None
    equals: tuple = ()  # literal values (str, int, float, bool, None via "None")
    pattern: str | None = None  # regex, full match, on a string literal or any string in a list literal
    names: tuple[str, ...] = ()  # qualified names the value must resolve to, e.g. torch.float16
    literal: bool | None = None  # True: value is a number/str literal; False: it is not
    missing: bool | None = None  # True: absent, and not forwarded in a spread parameter (conditions.py); False: present
    string: bool | None = None  # True: value is a string (literal, f-string, concatenation); False: not
    maybe_none: bool | None = None  # True: value is None or an if-expression with a None arm
    int_like: bool | None = None  # True: value looks like a Python int (literal, `x.shape[0]`, `num_heads`)
    tensor_like: bool | None = None  # True: value is shown to be a tensor (a torch call, a tensor method, a name given one)


def conds_hold(conds: tuple[ArgCond, ...], find, value_ok) -> bool:
    """Argument conditions over any syntax tree (libcst in python.py, ast in screen.py):
    `find(cond)` gives the argument or None, `value_ok(cond, value)` judges a present value."""
    for cond in conds:
        value = find(cond)
        if cond.missing is not None:
            if cond.missing != (value is None):
                return False
            if cond.missing:
                continue
        if value is None or not value_ok(cond, value):
            return False
    return True


@dataclass(frozen=True)
class Match:
    kind: str
    names: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    args: tuple[ArgCond, ...] = ()
    calls: tuple[str, ...] = ()  # keyword kind: restrict to these callees ("torch.compile", ".to")
    exclude_calls: tuple[str, ...] = ()  # keyword kind: never in these callees
    result_used: bool | None = None  # call/method kinds: the call's value is used (not a bare statement)
    values: tuple = ()  # keyword kind: literal values that match
    pattern: str | None = None  # keyword/environ kinds: regex on the string value or env var name
    value_names: tuple[str, ...] = ()  # keyword kind: qualified names that match (torch.float16)
    context: str = "any"  # attribute kind: load, store, any
    within: str | None = None  # only inside a training step or a forward method
    requires: tuple[str, ...] = ()  # the file must import one of these modules
    matcher: str | None = None  # pattern kind: the name of a code matcher
    regex: tuple[str, ...] = ()  # native kind
    files: tuple[str, ...] = ()  # native kind: file name globs
    cuda_only: bool = True  # native kind: only files that are CUDA (suffix or CUDA include)
    per: str = "line"  # native kind: one finding per "line" or per "file" (with kernel counts)
    cuda_pin: bool = False  # dependency kind: CUDA-pinned wheels, CUDA index URLs, conda CUDA
    ops: tuple[str, ...] = ()  # aten kind: "aten::sort" or "sort"
    when: str = "always"  # aten kind: dtype condition
    events: tuple[str, ...] = ()  # trace kind: TRACE_EVENTS

    def triggers(self) -> tuple[str, ...]:
        """Strings one of which must occur in a file's text for this clause to match it."""
        if self.kind == "import":
            return tuple(m.split(".")[-1] for m in self.modules)
        if self.kind in ("call", "attribute", "decorator"):
            return tuple(_last_literal_segment(n) for n in self.names)
        if self.kind == "method":
            return self.names
        if self.kind == "keyword":
            return self.names
        if self.kind == "environ":
            return ("environ", "getenv", "putenv")
        return ()


def _last_literal_segment(name: str) -> str:
    parts = [p for p in name.split(".") if p and "*" not in p and "?" not in p]
    return parts[-1] if parts else ""


@dataclass(frozen=True)
class Effort:
    low: float
    likely: float
    high: float
    per: str  # occurrence or task


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    category: str
    targets: tuple[str, ...]
    match: tuple[Match, ...]
    effort: Effort
    confidence: str
    remedy: str
    why: str
    source: str
    evidence: str
    message: str = ""
    source_date: str = ""  # YYYY-MM-DD: the date of the source page (or its release) the facts are as of
    remedy_xla: str = ""
    see_also: tuple[str, ...] = ()
    fallback: bool = False  # a guarded use counts as a fallback
    housekeeping: bool = False  # behind a CUDA-only check (`if x.is_cuda:`) it is skipped off CUDA, nothing lost
    invalid: tuple[str, ...] = ()  # examples that must be flagged
    valid: tuple[str, ...] = ()  # examples that must not be flagged
    example_file: str = "example.py"
    origin: str = ""  # the catalog file it came from
    fix: str = ""  # "safe" or "unsafe": `neuron-ready fix` can rewrite what the rule finds; "" = no fix
    codemod: str = ""  # the codemod that does it (fixes/codemods.py)
    fix_examples: tuple[tuple[str, str], ...] = ()  # (before, after) pairs, run as tests
    costing: str = "catalog"  # how the effort model costs it (COSTINGS)

    def remedy_for(self, target: str) -> str:
        return self.remedy_xla if target == "xla" and self.remedy_xla else self.remedy

    def render_message(self, symbol: str, details: dict | None = None) -> str:
        """The message with `{name}` (what matched), `{key}` for a detail such as `{kernel}`, and
        `{key:noun}` for a count with its noun in the right number (`{kernels:kernel}`: 1 kernel)."""
        text = self.message or self.title
        for key, value in (details or {}).items():
            if isinstance(value, int):
                text = re.sub(r"\{" + re.escape(key) + r":([^}]+)\}", lambda m: plural(value, m.group(1)), text)
            text = text.replace("{" + key + "}", str(value))
        return text.replace("{name}", symbol) if symbol else text.replace(" `{name}`", "")

    @property
    def static(self) -> bool:
        """True when some clause matches source (not only aten ops or events in trace mode)."""
        return any(m.kind not in ("aten", "trace") for m in self.match)

    @property
    def trace_twin(self) -> bool:
        """True when the rule matches source and aten ops: the static scan and the trace both find it."""
        return self.static and any(m.kind == "aten" for m in self.match)


@dataclass
class Catalog:
    rules: dict[str, Rule] = field(default_factory=dict)

    def __iter__(self):
        return iter(sorted(self.rules.values(), key=lambda r: r.id))

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, rule_id: str) -> Rule | None:
        return self.rules.get(rule_id.upper())

    def costed(self, costing: str) -> Rule | None:
        """The rule (lowest id) the effort model costs as `costing`, e.g. the CUDA kernel unit."""
        return next((r for r in self if r.costing == costing), None)

    def select(self, target: str | None = None, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> "Catalog":
        """The rules active for a target under select/ignore lists of ids, prefixes or categories."""
        sel = list(select)
        ign = list(ignore)
        out = {}
        for r in self:
            if target and target not in r.targets:
                continue
            if sel and not any(selector_matches(s, r.id, r.category) for s in sel):
                continue
            if any(selector_matches(s, r.id, r.category) for s in ign):
                continue
            out[r.id] = r
        return Catalog(out)


def selector_matches(selector: str, rule_id: str, category: str) -> bool:
    """A selector is "ALL", a rule id, an id prefix ("NR10") or a category name ("device")."""
    s = selector.strip()
    if s.upper() == "ALL":
        return True
    if s in CATEGORIES:
        return category == s
    return rule_id.startswith(s.upper())


def valid_selector(selector: str) -> bool:
    s = selector.strip()
    return s.upper() == "ALL" or s in CATEGORIES or bool(re.fullmatch(r"NR\d{0,4}", s.upper()))


def selector_problem(catalog: "Catalog", selector: str) -> str | None:
    """Why a well-formed selector selects nothing in `catalog` (with a did-you-mean), or None."""
    s = selector.strip()
    if s.upper() == "ALL" or s in CATEGORIES or any(r.id.startswith(s.upper()) for r in catalog):
        return None
    close = _nearest_id(s.upper(), [r.id for r in catalog])
    hint = f" (did you mean {close}?)" if close else ""
    return f"{s!r} matches no rule in the catalog{hint}; `neuron-ready rules` lists them"


def _nearest_id(s: str, ids: list[str]) -> str | None:
    """The rule of the longest shared category prefix (NR10..), numerically nearest: NR1099 -> NR1029."""
    for n in range(len(s) - 1, 3, -1):
        same = [i for i in ids if i.startswith(s[:n])]
        if same:
            return min(same, key=lambda i: abs(int(i[2:]) - int(s[2:].ljust(4, "0"))))
    return None


def not_a_selector(selector: str) -> str:
    """The message for a selector that is not even well formed, with a did-you-mean category."""
    close = difflib.get_close_matches(selector.strip().lower(), CATEGORIES, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{selector!r} is not a rule id, id prefix (e.g. NR10) or category{hint}"


def check_selectors(catalog: "Catalog", where: str, selectors: Iterable[str]) -> None:
    """One line naming the first selector (of --select, --ignore, ...) that selects nothing."""
    for s in selectors:
        problem = selector_problem(catalog, s)
        if problem:
            raise CatalogError(f"{where}: {problem}")


# ---------------------------------------------------------------------------------------------
# Loading and validation


class _Checker:
    """Field-level validation that reports file, rule id and dotted field path."""

    def __init__(self, origin: str, rule_id: str):
        self.origin = origin
        self.rule_id = rule_id

    def fail(self, fieldname: str, problem: str) -> CatalogError:
        return CatalogError(f"{self.origin}: {self.rule_id}: field '{fieldname}': {problem}", rule=self.rule_id,
                            field=fieldname)

    def string(self, d: dict, key: str, fieldname: str, required: bool = True, default: str = "") -> str:
        if key not in d:
            if required:
                raise self.fail(fieldname, "is required")
            return default
        v = d[key]
        if not isinstance(v, str) or (required and not v.strip()):
            raise self.fail(fieldname, f"expected a non-empty string, got {v!r}")
        return v

    def strings(self, d: dict, key: str, fieldname: str, required: bool = False) -> tuple[str, ...]:
        if key not in d:
            if required:
                raise self.fail(fieldname, "is required")
            return ()
        v = d[key]
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise self.fail(fieldname, f"expected a list of strings, got {v!r}")
        if required and not v:
            raise self.fail(fieldname, "must not be empty")
        return tuple(v)

    def choice(self, d: dict, key: str, fieldname: str, choices: tuple, default: str | None = None) -> str:
        if key not in d:
            if default is None:
                raise self.fail(fieldname, f"is required (one of {', '.join(choices)})")
            return default
        v = d[key]
        if v not in choices:
            raise self.fail(fieldname, f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    def boolean(self, d: dict, key: str, fieldname: str, default: bool | None = None) -> bool | None:
        if key not in d:
            return default
        v = d[key]
        if not isinstance(v, bool):
            raise self.fail(fieldname, f"expected true or false, got {v!r}")
        return v

    def regex(self, value: str, fieldname: str) -> str:
        try:
            re.compile(value)
        except re.error as e:
            raise self.fail(fieldname, f"invalid regular expression: {e}") from None
        return value

    def unknown(self, d: dict, allowed: Iterable[str], fieldname: str) -> None:
        extra = sorted(unknown_keys(d, allowed))
        if extra:
            raise self.fail(f"{fieldname}{extra[0]}" if fieldname else extra[0], "unknown field")


RULE_FIELDS = (
    "id", "title", "category", "targets", "match", "effort", "confidence", "remedy", "remedy_xla",
    "why", "source", "evidence", "message", "see_also", "fallback", "housekeeping", "invalid", "valid",
    "example_file", "fix", "codemod", "fix_example", "costing", "source_date",
)
MATCH_FIELDS: dict[str, tuple[str, ...]] = {
    "import": ("modules",),
    "call": ("names", "args", "within", "requires", "result_used"),
    "method": ("names", "args", "within", "requires", "result_used"),
    "attribute": ("names", "context", "within", "requires"),
    "decorator": ("names", "args"),
    "keyword": ("names", "calls", "exclude_calls", "values", "pattern", "value_names", "args", "within", "requires"),
    "environ": ("pattern",),
    "pattern": ("matcher", "within", "requires"),
    "dependency": ("packages", "cuda_pin"),
    "native": ("regex", "files", "cuda_only", "per"),
    "binary": ("files",),
    "aten": ("ops", "when"),
    "trace": ("events",),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "import": ("modules",),
    "call": ("names",),
    "method": ("names",),
    "attribute": ("names",),
    "decorator": ("names",),
    "keyword": ("names",),
    "environ": ("pattern",),
    "pattern": ("matcher",),
    "native": ("regex",),
    "aten": ("ops",),
    "trace": ("events",),
}
ARG_FIELDS = ("keyword", "position", "equals", "pattern", "names", "literal", "missing", "string", "maybe_none", "int_like",
              "tensor_like")


def _parse_arg(c: _Checker, raw: Any, fieldname: str) -> ArgCond:
    if not isinstance(raw, dict):
        raise c.fail(fieldname, f"expected a table, got {raw!r}")
    c.unknown(raw, ARG_FIELDS, fieldname + ".")
    keyword = c.string(raw, "keyword", fieldname + ".keyword", required=False) or None
    position = raw.get("position")
    if position is not None and (not isinstance(position, int) or isinstance(position, bool) or position < 0):
        raise c.fail(fieldname + ".position", f"expected a non-negative integer, got {position!r}")
    if keyword is None and position is None:
        raise c.fail(fieldname, "needs 'keyword' or 'position'")
    equals = raw.get("equals", [])
    if not isinstance(equals, list):
        equals = [equals]
    pattern = raw.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise c.fail(fieldname + ".pattern", "expected a string")
        c.regex(pattern, fieldname + ".pattern")
    names = c.strings(raw, "names", fieldname + ".names")
    literal = c.boolean(raw, "literal", fieldname + ".literal")
    missing = c.boolean(raw, "missing", fieldname + ".missing")
    string = c.boolean(raw, "string", fieldname + ".string")
    maybe_none = c.boolean(raw, "maybe_none", fieldname + ".maybe_none")
    int_like = c.boolean(raw, "int_like", fieldname + ".int_like")
    tensor_like = c.boolean(raw, "tensor_like", fieldname + ".tensor_like")
    flags = (literal, missing, string, maybe_none, int_like, tensor_like)
    if not (equals or pattern or names or any(x is not None for x in flags)):
        raise c.fail(fieldname, "needs one of equals, pattern, names, literal, missing, string, maybe_none, int_like, "
                                "tensor_like")
    return ArgCond(keyword, position, tuple(equals), pattern, names, literal, missing, string, maybe_none, int_like,
                   tensor_like)


def _parse_match(c: _Checker, raw: Any, idx: int) -> Match:
    fieldname = f"match[{idx}]"
    if not isinstance(raw, dict):
        raise c.fail(fieldname, f"expected a table, got {raw!r}")
    kind = c.choice(raw, "kind", fieldname + ".kind", tuple(MATCH_FIELDS))
    c.unknown(raw, ("kind",) + MATCH_FIELDS[kind], fieldname + ".")
    for req in REQUIRED.get(kind, ()):
        if req not in raw:
            raise c.fail(f"{fieldname}.{req}", f"is required for kind '{kind}'")
    kw: dict[str, Any] = {"kind": kind}
    for key in ("names", "modules", "packages", "calls", "exclude_calls", "value_names", "requires", "files", "ops", "events"):
        if key in raw:
            kw[key] = c.strings(raw, key, f"{fieldname}.{key}", required=True)
    if "regex" in raw:
        kw["regex"] = tuple(c.regex(r, f"{fieldname}.regex") for r in c.strings(raw, "regex", f"{fieldname}.regex", True))
    if "pattern" in raw:
        kw["pattern"] = c.regex(c.string(raw, "pattern", f"{fieldname}.pattern"), f"{fieldname}.pattern")
    if "matcher" in raw:
        kw["matcher"] = c.choice(raw, "matcher", f"{fieldname}.matcher", _matchers())
    if "args" in raw:
        if not isinstance(raw["args"], list) or not raw["args"]:
            raise c.fail(f"{fieldname}.args", "expected a non-empty list of tables")
        kw["args"] = tuple(_parse_arg(c, a, f"{fieldname}.args[{i}]") for i, a in enumerate(raw["args"]))
    if "values" in raw:
        v = raw["values"]
        kw["values"] = tuple(v if isinstance(v, list) else [v])
    if "context" in raw:
        kw["context"] = c.choice(raw, "context", f"{fieldname}.context", ("load", "store", "any"))
    if "within" in raw:
        kw["within"] = c.choice(raw, "within", f"{fieldname}.within", WITHIN)
    if "result_used" in raw:
        kw["result_used"] = c.boolean(raw, "result_used", f"{fieldname}.result_used")
    if "cuda_only" in raw:
        kw["cuda_only"] = c.boolean(raw, "cuda_only", f"{fieldname}.cuda_only")
    if "cuda_pin" in raw:
        kw["cuda_pin"] = c.boolean(raw, "cuda_pin", f"{fieldname}.cuda_pin")
    if "per" in raw:
        kw["per"] = c.choice(raw, "per", f"{fieldname}.per", ("line", "file"))
    if "when" in raw:
        kw["when"] = c.choice(raw, "when", f"{fieldname}.when", ATEN_WHEN)
    for event in kw.get("events", ()):
        if event not in TRACE_EVENTS:
            raise c.fail(f"{fieldname}.events", f"expected some of {', '.join(TRACE_EVENTS)}, got {event!r}")
    if kind == "dependency" and not (kw.get("packages") or kw.get("cuda_pin")):
        raise c.fail(fieldname, "a dependency match needs 'packages' or 'cuda_pin = true'")
    if kind == "keyword" and not (kw.get("values") or kw.get("pattern") or kw.get("value_names")):
        raise c.fail(fieldname, "a keyword match needs 'values', 'pattern' or 'value_names'")
    m = Match(**kw)
    if kind in ("method", "keyword"):
        for n in m.names:
            if not re.fullmatch(r"[A-Za-z_]\w*", n):
                raise c.fail(f"{fieldname}.names", f"{kind} names are identifiers, got {n!r}")
    elif kind not in ("pattern", "native", "binary", "dependency", "aten", "trace", "environ") and not all(m.triggers()):
        raise c.fail(f"{fieldname}.names", "every name needs a literal segment (not only wildcards)")
    return m


def _matchers() -> tuple[str, ...]:
    """The code matchers a `kind = "pattern"` clause may name (imported late: the scanner imports us)."""
    from .sources.matchers import MATCHERS

    return tuple(MATCHERS)


def _number(c: _Checker, d: dict, key: str) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise c.fail(f"effort.{key}", f"expected a number of person-days, got {v!r}")
    if v < 0:
        raise c.fail(f"effort.{key}", f"must not be negative, got {v!r}")
    return float(v)


def _parse_fix(c: _Checker, raw: dict) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """`fix = "safe" | "unsafe"`, `codemod = NAME` and `[[rule.fix_example]]` tables (before, after)."""
    if "fix" not in raw:
        for key in ("codemod", "fix_example"):
            if key in raw:
                raise c.fail(key, "needs 'fix' (safe or unsafe)")
        return "", "", ()
    kind = c.choice(raw, "fix", "fix", FIX_KINDS)
    codemod = c.choice(raw, "codemod", "codemod", tuple(CODEMODS))
    examples = raw.get("fix_example")
    if isinstance(examples, dict):
        examples = [examples]
    if not isinstance(examples, list) or not examples:
        raise c.fail("fix_example", "a rule with a fix needs at least one [[rule.fix_example]] with before and after")
    pairs = []
    for i, ex in enumerate(examples):
        name = f"fix_example[{i}]"
        if not isinstance(ex, dict):
            raise c.fail(name, f"expected a table, got {ex!r}")
        c.unknown(ex, ("before", "after"), name + ".")
        pairs.append((c.string(ex, "before", name + ".before"), c.string(ex, "after", name + ".after")))
    return kind, codemod, tuple(pairs)


def parse_rule(raw: Any, origin: str, index: int) -> Rule:
    if not isinstance(raw, dict):
        raise CatalogError(f"{origin}: rule #{index + 1}: expected a table", index=index)
    rid = raw.get("id")
    if not isinstance(rid, str) or not RULE_ID.match(rid):
        raise CatalogError(f"{origin}: rule #{index + 1}: field 'id': expected NR followed by four digits, got {rid!r}",
                           field="id", index=index)
    c = _Checker(origin, rid)
    c.unknown(raw, RULE_FIELDS, "")
    category = c.choice(raw, "category", "category", CATEGORIES)
    if not rid.startswith(CATEGORY_PREFIX[category]):
        raise c.fail("id", f"rules of category '{category}' use ids {CATEGORY_PREFIX[category]}xx")
    targets = c.strings(raw, "targets", "targets", required=True)
    for t in targets:
        if t not in TARGETS:
            raise c.fail("targets", f"expected native and/or xla, got {t!r}")
    matches = raw.get("match")
    if isinstance(matches, dict):
        matches = [matches]
    if not isinstance(matches, list) or not matches:
        raise c.fail("match", "expected at least one match table")
    match = tuple(_parse_match(c, m, i) for i, m in enumerate(matches))
    effort_raw = raw.get("effort")
    if not isinstance(effort_raw, dict):
        raise c.fail("effort", "expected a table with low, likely, high, per")
    c.unknown(effort_raw, ("low", "likely", "high", "per"), "effort.")
    low, likely, high = (_number(c, effort_raw, k) for k in ("low", "likely", "high"))
    if not low <= likely <= high:
        raise c.fail("effort", f"needs low <= likely <= high, got {low}, {likely}, {high}")
    per = c.choice(effort_raw, "per", "effort.per", PER)
    source = c.string(raw, "source", "source")
    if not re.match(r"^https?://", source):
        raise c.fail("source", f"expected an http(s) link, got {source!r}")
    source_date = c.string(raw, "source_date", "source_date", required=False)
    if source_date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", source_date):
        raise c.fail("source_date", f"expected a date YYYY-MM-DD, got {source_date!r}")
    see_also = c.strings(raw, "see_also", "see_also")
    for s in see_also:
        if not re.match(r"^https?://", s):
            raise c.fail("see_also", f"expected http(s) links, got {s!r}")
    invalid = c.strings(raw, "invalid", "invalid")
    valid = c.strings(raw, "valid", "valid")
    fix, codemod, fix_examples = _parse_fix(c, raw)
    rule = Rule(
        id=rid,
        title=c.string(raw, "title", "title"),
        category=category,
        targets=targets,
        match=match,
        effort=Effort(low, likely, high, per),
        confidence=c.choice(raw, "confidence", "confidence", CONFIDENCES),
        remedy=c.string(raw, "remedy", "remedy"),
        remedy_xla=c.string(raw, "remedy_xla", "remedy_xla", required=False),
        why=c.string(raw, "why", "why"),
        source=source,
        source_date=source_date,
        evidence=c.choice(raw, "evidence", "evidence", EVIDENCE),
        message=c.string(raw, "message", "message", required=False),
        see_also=see_also,
        fallback=bool(c.boolean(raw, "fallback", "fallback", default=category in FALLBACK_CATEGORIES)),
        housekeeping=bool(c.boolean(raw, "housekeeping", "housekeeping", default=False)),
        invalid=invalid,
        valid=valid,
        example_file=c.string(raw, "example_file", "example_file", required=False, default="example.py"),
        origin=origin,
        fix=fix,
        codemod=codemod,
        fix_examples=fix_examples,
        costing=c.choice(raw, "costing", "costing", COSTINGS, default="catalog"),
    )
    # A compiled library has no text example: tests/test_binary.py scans a built one instead.
    if not invalid and any(m.kind not in ("aten", "trace", "binary") for m in rule.match):
        raise c.fail("invalid", "a rule that matches source needs at least one example that it flags")
    return rule


def load_text(text: str, origin: str) -> list[Rule]:
    try:
        data = parse(text)
    except TomlSyntaxError as e:
        raise CatalogError(f"{origin}: invalid TOML: {e}", line=e.line) from None
    extra = set(data) - {"rule"}
    if extra:
        raise CatalogError(f"{origin}: unknown top-level key '{sorted(extra)[0]}' (rules go in [[rule]] tables)")
    raws = data.get("rule", [])
    if not isinstance(raws, list):
        raise CatalogError(f"{origin}: 'rule' must be an array of tables ([[rule]])")
    return [parse_rule(r, origin, i) for i, r in enumerate(raws)]


def _add(catalog: Catalog, rules: list[Rule]) -> None:
    for r in rules:
        if r.id in catalog.rules:
            other = catalog.rules[r.id].origin
            raise CatalogError(f"{r.origin}: {r.id}: field 'id': duplicate of the rule in {other}", rule=r.id, field="id")
        catalog.rules[r.id] = r


def builtin_files() -> list[tuple[str, str]]:
    """(name, text) of every built-in catalog file, in name order."""
    pkg = resources.files("neuron_ready.rules")
    out = []
    for entry in sorted(pkg.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            out.append((f"rules/{entry.name}", entry.read_text(encoding="utf-8")))
    return out


def load_catalog(extra_files: Iterable[str | Path] = ()) -> Catalog:
    """The built-in catalog plus users' extra catalog files. Raises CatalogError."""
    catalog = Catalog()
    for name, text in builtin_files():
        _add(catalog, load_text(text, name))
    for path in extra_files:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise CatalogError(f"{p}: cannot read catalog file: {e.strerror or e}") from None
        _add(catalog, load_text(text, str(p)))
    return catalog


def catalog_fingerprint(catalog: Catalog) -> str:
    """A digest of the active rules, for cache keys: any change to any rule changes it."""
    import hashlib

    h = hashlib.sha256()
    for r in catalog:
        h.update(repr(r).encode())
    return h.hexdigest()[:16]
