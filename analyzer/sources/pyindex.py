"""An index of the active catalog's Python match clauses, built once per process and reused per file."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from ..catalog import Catalog, Rule
from .matchers import MATCHERS

# Identifiers that make an `if` test a capability check (an optional fast path with a fallback): the
# scanner's fallback detection (python.py) and the code facts that follow it across calls (codefacts.py).
CAPABILITY = re.compile(
    r"(?i)^(is_cuda|find_spec|\w*available\w*|\w*installed\w*|(has|have|use|with|enable|can)_\w+)$"
    r"|(triton|flash|fused|kernel|apex|xformers|cuda|cupy|bnb|bitsandbytes|deepspeed|liger|mamba|gpu)"
)

PY_KINDS = ("import", "call", "method", "attribute", "decorator", "keyword", "environ", "pattern")

Entry = tuple  # (Rule, Match)


class NameTable:
    """Exact names in a dict, wildcard names as compiled regexes."""

    def __init__(self) -> None:
        self.exact: dict[str, list[Entry]] = {}
        self.globs: list[tuple[re.Pattern, Entry]] = []
        self.prefixes: tuple[str, ...] = ()  # the literal starts of the globs: most names have none

    def add(self, name: str, entry: Entry) -> None:
        if any(ch in name for ch in "*?["):
            self.globs.append((re.compile(fnmatch.translate(name)), entry))
            self.prefixes += (re.split(r"[*?\[]", name, maxsplit=1)[0],)
        else:
            self.exact.setdefault(name, []).append(entry)

    def lookup(self, name: str) -> list[Entry]:
        hits = self.exact.get(name, [])
        if self.globs and name.startswith(self.prefixes):
            extra = [e for rx, e in self.globs if rx.match(name)]
            if extra:
                return hits + extra
        return hits

    def __bool__(self) -> bool:
        return bool(self.exact or self.globs)


@dataclass
class PyIndex:
    imports: list[tuple[str, Entry]] = field(default_factory=list)
    calls: NameTable = field(default_factory=NameTable)
    methods: dict[str, list[Entry]] = field(default_factory=dict)
    attributes: NameTable = field(default_factory=NameTable)
    decorators: NameTable = field(default_factory=NameTable)
    keywords: dict[str, list[Entry]] = field(default_factory=dict)
    environ: list[tuple[re.Pattern, Entry]] = field(default_factory=list)
    patterns: dict[str, list[Entry]] = field(default_factory=dict)
    triggers: tuple[str, ...] = ()
    has_dependency_rules: bool = False
    requires: frozenset[str] = frozenset()  # modules some Python clause needs the file to import

    def empty(self) -> bool:
        return not (
            self.imports or self.calls or self.methods or self.attributes or self.decorators
            or self.keywords or self.environ or self.patterns or self.has_dependency_rules
        )


def build_index(catalog: Catalog) -> PyIndex:
    idx = PyIndex()
    triggers: set[str] = set()
    requires: set[str] = set()
    rule: Rule
    for rule in catalog:
        for m in rule.match:
            entry = (rule, m)
            if m.kind in PY_KINDS:
                requires.update(m.requires)
            if m.kind == "import":
                for mod in m.modules:
                    idx.imports.append((mod, entry))
            elif m.kind == "call":
                for n in m.names:
                    idx.calls.add(n, entry)
            elif m.kind == "method":
                for n in m.names:
                    idx.methods.setdefault(n, []).append(entry)
            elif m.kind == "attribute":
                for n in m.names:
                    idx.attributes.add(n, entry)
            elif m.kind == "decorator":
                for n in m.names:
                    idx.decorators.add(n, entry)
            elif m.kind == "keyword":
                for n in m.names:
                    idx.keywords.setdefault(n, []).append(entry)
            elif m.kind == "environ":
                idx.environ.append((re.compile(m.pattern or ".*"), entry))
            elif m.kind == "pattern":
                idx.patterns.setdefault(m.matcher or "", []).append(entry)
                matcher = MATCHERS.get(m.matcher or "")
                triggers.update(matcher.triggers if matcher is not None else ("",))  # the code matchers' (matchers.py)
            elif m.kind == "dependency":
                idx.has_dependency_rules = True
            else:
                continue
            if m.kind in PY_KINDS and m.kind != "pattern":
                triggers.update(t for t in m.triggers() if t)
    idx.triggers = tuple(sorted(triggers))
    idx.requires = frozenset(requires)
    return idx


def passes_prefilter(text: str, idx: PyIndex) -> bool:
    """True when some trigger string occurs: only then can a rule match and is parsing worth it."""
    return any(t in text for t in idx.triggers)


def name_in(q: str, names: tuple[str, ...]) -> bool:
    """A qualified name is one of `names` (which may hold wildcards)."""
    return any(q == n or ("*" in n and fnmatch.fnmatchcase(q, n)) for n in names)


def callee_in(callee: str | None, method: str | None, calls: tuple[str, ...]) -> bool:
    """A keyword clause's `calls`: "*", a method name (".to"), or qualified names."""
    for c in calls:
        if c == "*":
            return True
        if c.startswith("."):
            if method == c[1:]:
                return True
        elif callee is not None and name_in(callee, (c,)):
            return True
    return False


NAME_KINDS = ("import", "call", "attribute", "decorator")


def name_roots(catalog: Catalog) -> frozenset[str] | None:
    """The first segment of every name an import, call, attribute or decorator clause matches.

    A hit of such a clause is reported under a name with one of these roots, so only these roots
    can make the scanned project's own (first-party) packages change a result. None when some
    pattern starts with a wildcard and any root is possible.
    """
    roots = set()
    for rule in catalog:
        for m in rule.match:
            if m.kind in NAME_KINDS:
                roots.update(n.split(".", 1)[0] for n in (m.modules if m.kind == "import" else m.names))
    if any(ch in r for r in roots for ch in "*?["):
        return None
    return frozenset(roots)
