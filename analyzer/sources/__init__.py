"""One file in, findings and diagnostics out. Never raises: every failure becomes a diagnostic.

`scan_file` is the unit of work the engine hands to a process pool and caches by content, so it
reads only its job and a ScanContext (both picklable) and returns a FileResult.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import io
import itertools
import os
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from ..catalog import Catalog, Rule, selector_matches
from ..model import Diagnostic, Finding
from ..numbers import size as byte_size
from ..suppress import Suppressions
from . import binary as binary_mod
from . import deps as deps_mod
from . import native as native_mod

if TYPE_CHECKING:
    from .pyindex import PyIndex
    from .python import Hit, PyResult

# libcst (and python.py, which walks its trees) load on first use: the main process of a
# parallel scan, and scans the screen finds nothing to parse in, never need them. The
# scanners (load_scanners) load on first use too: discovery and a cached report never need them.


def load_scanners() -> None:
    """Import what scanning a file needs; a parallel scan calls it before forking, so no worker
    imports it again."""
    from . import builds, codefacts, configs, imports, launch, notebook, pyindex, screen  # noqa: F401


KINDS = ("python", "notebook", "native", "cmake", "binary", "deps", "launch", "config")


@dataclass(frozen=True)
class FileJob:
    path: str  # filesystem path to read
    rel: str  # posix path relative to the scanned root, as reported
    kind: str


@dataclass
class ScanContext:
    catalog: Catalog
    target: str
    max_file_size: int = 2 * 1024 * 1024
    per_path_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    first_party: frozenset[str] = frozenset()  # the scanned project's own top-level packages
    screen: bool = True  # cut what no rule can match before libcst parses (same report; tests turn it off)
    _index: PyIndex | None = field(default=None, repr=False)
    _native: list | None = field(default=None, repr=False)
    _deps: list | None = field(default=None, repr=False)

    @property
    def index(self) -> PyIndex:
        if self._index is None:
            from .pyindex import build_index

            self._index = build_index(self.catalog)
        return self._index

    def entries(self, kind: str) -> list:
        return [(r, m) for r in self.catalog for m in r.match if m.kind == kind]

    @property
    def native_entries(self) -> list:
        if self._native is None:
            self._native = self.entries("native")
        return self._native

    @property
    def dep_entries(self) -> list:
        if self._deps is None:
            self._deps = self.entries("dependency")
        return self._deps

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_index"] = state["_native"] = state["_deps"] = None  # rebuilt in each worker
        return state


@dataclass
class FileResult:
    rel: str
    kind: str
    findings: list[Finding] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    suppressed: int = 0
    parsed: bool = False  # matched as Python (the text prefilter let it through)
    facts: dict[str, Any] = field(default_factory=dict)


def module_name_of(rel: str) -> tuple[str, bool]:
    p = PurePosixPath(rel)
    parts = list(p.with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


# ------------------------------------------------------------------------------------------ reading


class _Skip(Exception):
    def __init__(self, kind: str, message: str, line: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line


def read_bytes(path: str, max_size: int) -> bytes:
    """The bytes a scan reads: at most max_size + 1 (enough to tell that a file is too large).
    The engine hashes exactly these for the cache key. Raises OSError."""
    with open(path, "rb") as fh:
        # Ask for what is there (read(max_size + 1) allocates 2 MiB per file); a size of 0 may
        # also be a pipe or a /proc file, read as before.
        size = os.fstat(fh.fileno()).st_size
        return fh.read(min(size, max_size) + 1 if size else max_size + 1)


def read_limit(job: FileJob, ctx: "ScanContext") -> int:
    """How many bytes a scan reads, and the cache keys: a prebuilt library whole (its ELF tables sit
    at its end, so a key of its first bytes would miss a change), any other file up to max-file-size."""
    return binary_mod.MAX_LIBRARY_SIZE if job.kind == "binary" else ctx.max_file_size


def read_text(job: FileJob, max_size: int, data: bytes | None = None) -> str:
    if data is None:
        try:
            data = read_bytes(job.path, max_size)
        except IsADirectoryError:
            raise _Skip("unreadable", "is a directory") from None
        except OSError as e:
            raise _Skip("unreadable", f"cannot read: {e.strerror or e}") from None
    if len(data) > max_size:
        raise _Skip("too-large", f"larger than the {byte_size(max_size)} limit (raise max-file-size to scan it)")
    if b"\0" in data:
        raise _Skip("binary", "contains NUL bytes (binary or corrupt); skipped")
    encoding = "utf-8-sig"
    if job.kind == "python":
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as e:
            if "encoding problem" in str(e) or "unknown encoding" in str(e):
                raise _Skip("decode-error", f"bad encoding declaration: {e}") from None
            encoding = "utf-8"  # no cookie and not UTF-8: the decode below says where it breaks
    try:
        # Launch files (READMEs, scripts) are read for commands: a stray byte must not hide them.
        text = data.decode(encoding, errors="replace" if job.kind == "launch" else "strict")
    except LookupError:
        raise _Skip("decode-error", f"unknown encoding {encoding!r} declared") from None
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _Skip("decode-error", f"not valid {encoding} text (byte {e.start}: {e.reason})", line) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


# ------------------------------------------------------------------------------------------ findings


def _column(line_text: str, snippet: str, symbol: str) -> int:
    first = snippet.split(" ")[0] if snippet else ""
    for needle in (snippet, first, symbol.lstrip(".").split("(")[0].split(".")[-1]):
        if needle:
            i = line_text.find(needle)
            if i >= 0:
                return i + 1
    return len(line_text) - len(line_text.lstrip()) + 1


def _finding(rule: Rule, ctx: ScanContext, rel: str, line: int, column: int, symbol: str, snippet: str,
             scope: str = "", fallback: bool = False, details: dict | None = None, cell: int | None = None) -> Finding:
    details = dict(details or {})
    return Finding(
        rule=rule.id,
        category=rule.category,
        path=rel,
        line=line,
        column=column,
        message=rule.render_message(symbol, details),
        remedy=rule.remedy_for(ctx.target),
        fallback=fallback,
        confidence=rule.confidence,
        symbol=symbol,
        snippet=snippet,
        scope=scope,
        cell=cell,
        details=details,
    )


class _Collector:
    """Applies suppressions and per-path ignores while findings are added."""

    def __init__(self, result: FileResult, ctx: ScanContext, suppressions: Suppressions) -> None:
        self.result = result
        self.ctx = ctx
        self.suppressions = suppressions
        named = sorted({(line, s) for line, sel in suppressions.lines.items() if sel for s in sel})
        if named:  # the engine warns about ids that match no rule (a typo suppresses nothing)
            result.facts["suppression_selectors"] = [[line, s] for line, s in named]
        import pathspec

        self.ignored_selectors = tuple(
            sel for pattern, sel in ctx.per_path_ignores
            if pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(result.rel)
        )
        self.seen: set[tuple] = set()
        self.reported: set[tuple] = set()

    def add(self, f: Finding, suppress_line: int | None = None) -> bool:
        """True when the finding is reported (not a duplicate, not suppressed)."""
        key = (f.rule, f.cell, f.line, f.symbol)  # one rule, one line, one symbol: one finding
        if key in self.seen:
            return key in self.reported
        self.seen.add(key)
        if self.suppressions.covers(f.rule, f.category, suppress_line or f.line) or any(
            selector_matches(s, f.rule, f.category) for sels in self.ignored_selectors for s in sels
        ):
            self.result.suppressed += 1
            return False
        self.reported.add(key)
        self.result.findings.append(f)
        return True


class _TooDeep(Exception):
    pass


class Unparseable(Exception):
    """libcst rejected the source: a syntax error, an invalid identifier, or a parser panic."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.raw_line = line


_LIBCST_CHARS = [0]  # characters handed to libcst in this process (workers.py recycles after many)


def libcst_chars() -> int:
    return _LIBCST_CHARS[0]


def parse_module(text: str):
    """libcst's parse of `text` (a cst.Module); Unparseable when it cannot."""
    from .cstparse import parse_cst

    _LIBCST_CHARS[0] += len(text)
    return parse_cst(text)


def nesting_risk(text: str) -> bool:
    """True when a file may be nested deeper than parsers can bear (machine-generated code).

    libcst's native parser can overflow its stack or backtrack for minutes on such input, which
    would take the whole process down; CPython's own parser rejects it quickly. Cheap checks first:
    a very long line, or brackets nested more than 100 deep.
    """
    if len(text) >= 4000 and max(map(len, text.split("\n"))) >= 4000:
        return True
    if text.count("\\\n") > 100 and _longest_continuation(text) > 100:
        return True  # one logical line over 100 physical lines (`not \` 30,000 times crashed libcst)
    brackets = _NOT_BRACKET.sub("", text)
    return max(itertools.accumulate(map(_BRACKET_DEPTH.__getitem__, brackets)), default=0) > 100


def _longest_continuation(text: str) -> int:
    longest = run = 0
    for line in text.split("\n"):
        run = run + 1 if line.endswith("\\") else 0
        longest = max(longest, run)
    return longest


_NOT_BRACKET = re.compile(r"[^()\[\]{}]+")
_BRACKET_DEPTH = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


def _ast_parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: the file's business, not the report's
        return ast.parse(text)


def parse_tree(text: str) -> ast.Module | None:
    """Python's own parse of a file, once per file: the screen, the code facts and the syntax check
    all read it. None when Python cannot parse it (libcst's diagnostic says where and why);
    _TooDeep when the file is nested deeper than any parser should try."""
    risky = nesting_risk(text)
    try:
        return _ast_parse(text)
    except (RecursionError, MemoryError):
        if risky:
            raise _TooDeep("nested too deeply for Python's own parser; skipped") from None
    except SyntaxError as e:
        if risky and ("too many nested" in str(e) or "too complex" in str(e)):
            raise _TooDeep(f"{e.msg}; skipped") from None
    except ValueError:  # NUL bytes: libcst's diagnostic follows
        pass
    return None


def _python_hits(text: str, rel: str, ctx: ScanContext, collect_setup: bool, tree: ast.Module | None,
                 screen: bool = False) -> PyResult | None:
    """Match a Python source. `screen`: cut what no rule can match before libcst parses it
    (sources/screen.py); the hits come back with the file's own line numbers, and None means the
    screen found nothing any rule can match (then neither libcst nor python.py is loaded)."""
    module_name, is_package = module_name_of(rel)
    screen = screen and ctx.screen and not collect_setup
    reduced = None
    if tree is not None and screen:
        from .screen import reduce_source

        try:
            reduced = reduce_source(text, tree, ctx.index, module_name, is_package)
        except RecursionError:  # a pathological expression: libcst decides on the whole file
            reduced = None
    if reduced is not None and not reduced.matchable:
        return None
    from .python import scan_module

    module = None
    if reduced is not None:
        try:
            module = parse_module(reduced.text)
        except Unparseable:
            reduced = None  # the whole file then says where and why
    if module is None:
        module = parse_module(text)
    res = scan_module(module, ctx.index, module_name, is_package, collect_setup, ctx.first_party, tree)
    if reduced is not None:
        for h in res.hits:
            h.line = reduced.original_line(h.line)
            if "value_lines" in h.details:  # python.py: where a keyword's value was chosen
                h.details["value_lines"] = [reduced.original_line(n) for n in h.details["value_lines"]]
    return res


def _code_facts(tree: ast.Module | None, module_name: str, is_package: bool, text: str | None = None) -> dict:
    if tree is None:
        return {}
    from .codefacts import code_facts
    from .optional_imports import guarded_only_imports

    try:
        code = code_facts(tree, module_name, is_package, text)
        guarded = guarded_only_imports(tree, module_name, is_package)
    except RecursionError:  # a pathological expression: the module-level answer stands
        return {}
    if guarded:
        code["guarded_imports"] = guarded  # context.optional_modules
    return {"code": code}


def _add_python_hits(hits: list[Hit], lines: list[str], col: _Collector, ctx: ScanContext, rel: str,
                     where: list[tuple[int, int]] | None = None,
                     fixes: dict[int, str] | None = None) -> list[tuple[Hit, Finding]]:
    """Add the hits' findings; the (hit, finding) pairs reported. `fixes`: id(hit) -> the kind of
    fix `neuron-ready fix` has for it, kept as the finding's `fix` detail."""
    from .python import snippet_of

    reported = []
    for h in hits:
        line_text = lines[h.line - 1] if 0 < h.line <= len(lines) else ""
        snippet = snippet_of(h.node)
        column = _column(line_text, snippet, h.symbol)
        cell, line = (None, h.line)
        if where is not None and 0 < h.line <= len(where):
            cell, line = where[h.line - 1]
        f = _finding(h.rule, ctx, rel, line, column, h.symbol, snippet, h.scope, h.fallback, h.details, cell)
        if fixes and id(h) in fixes:
            f.details["fix"] = fixes[id(h)]
        if col.add(f, suppress_line=h.line):
            reported.append((h, f))
    return reported


def _fixes_for(res: PyResult, text: str, imports: list[str]) -> dict[int, str] | None:
    """Which hits `neuron-ready fix` can rewrite (libcst is loaded already: hits came from it).
    `imports`: the file's imports as python_facts reads them from the whole text."""
    if not any(h.rule.codemod for h in res.hits):
        return None
    from ..fixes.codemods import fix_kinds

    return fix_kinds(res.hits, res.module, text, imports)


def reported_hits(text: str, rel: str, ctx: ScanContext) -> tuple[PyResult, list[tuple[Hit, Finding]]]:
    """What `scan` reports for a Python file, from one full parse (no screen, so every hit's node
    is in the returned module): the hits `neuron-ready fix` rewrites through. Raises Unparseable."""
    from .python import scan_module

    module_name, is_package = module_name_of(rel)
    try:
        tree = parse_tree(text)  # as `scan` has it (values.py reads a class's assignments from it)
    except _TooDeep:
        tree = None
    res = scan_module(parse_module(text), ctx.index, module_name, is_package, False, ctx.first_party, tree)
    col = _Collector(FileResult(rel, "python"), ctx, Suppressions(text))
    return res, _add_python_hits(res.hits, text.splitlines(), col, ctx, rel)


def _syntax_diagnostic(rel: str, e: Unparseable, text: str,
                       where: list[tuple[int, int]] | None = None) -> Diagnostic:
    """Where and why a file does not parse. CPython's own parser names the line of the mistake
    and says why in words (libcst points at the token after it), so it is asked first."""
    line = e.raw_line
    reason = str(e.message).splitlines()[0] if getattr(e, "message", None) else "invalid syntax"
    reason = re.sub(r"^parser error: error at \d+:\d+: ", "", reason)
    m = re.match(r"(expected one of )(.*)$", reason)
    if m and len(reason) > 80:
        reason = m.group(1) + ", ".join(m.group(2).split(", ")[:6]) + ", …"
    try:
        _ast_parse(text)
    except SyntaxError as se:
        if se.lineno:
            line, reason = se.lineno, se.msg
    except (ValueError, RecursionError, MemoryError):
        pass
    lines = text.splitlines()
    source_line = lines[line - 1] if 0 < line <= len(lines) else ""
    where_text = f"line {line}"
    if where is not None and 0 < line <= len(where):
        cell, cline = where[line - 1]
        where_text = f"cell {cell}, line {cline}"
        line = cline
    py2 = re.search(r"^\s*(print\s+[^(\s=]|exec\s+[\"'\w])|^\s*except\s+\w+\s*,\s*\w+\s*:|`", source_line)
    hint = " (Python 2 code?)" if py2 and "Python 2" not in reason else ""
    return Diagnostic(rel, "syntax-error", f"cannot parse at {where_text}: {reason}{hint}", line)


def _scan_python(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    from .builds import build_facts
    from .imports import python_facts
    from .pyindex import passes_prefilter

    module_name, is_package = module_name_of(job.rel)
    result.facts.update(python_facts(text, module_name, is_package))
    result.facts.update(build_facts(text))
    tree = parse_tree(text)
    result.facts.update(_code_facts(tree, module_name, is_package, text))
    idx = ctx.index
    is_setup = PurePosixPath(job.rel).name == "setup.py"
    collect_setup = is_setup and bool(ctx.dep_entries)
    if not (passes_prefilter(text, idx) or collect_setup):
        # Nothing here can match; still report a file that is not Python at all (ast is ~10x
        # cheaper than libcst; its rare disagreements, e.g. newer syntax, are settled by libcst).
        if tree is not None:
            return
        try:
            parse_module(text)
        except Unparseable as e:
            result.diagnostics.append(_syntax_diagnostic(job.rel, e, text))
        return
    try:
        res = _python_hits(text, job.rel, ctx, collect_setup, tree, screen=True)
    except Unparseable as e:
        result.diagnostics.append(_syntax_diagnostic(job.rel, e, text))
        return
    del tree
    result.parsed = True
    if res is None:
        return  # nothing to add (setup.py files, whose requirements are read here, are not screened)
    col = _Collector(result, ctx, Suppressions(text))
    _add_python_hits(res.hits, text.splitlines(), col, ctx, job.rel, fixes=_fixes_for(res, text, result.facts.get("imports", [])))
    if collect_setup:
        reqs = deps_mod.parse_dependencies("setup.py", text, res.requirements)
        _add_dependency_hits(reqs, text.splitlines(), col, ctx, job.rel)


_TOO_COMPLEX = (_TooDeep, RecursionError, MemoryError)


def _cell_diagnostic(rel: str, e: BaseException, source: str, where: list[tuple[int, int]]) -> Diagnostic:
    if isinstance(e, Unparseable):
        return _syntax_diagnostic(rel, e, source, where)
    why = {RecursionError: "nested too deeply to analyse; skipped",
           MemoryError: "ran out of memory analysing it; skipped"}.get(type(e), str(e))
    cells = sorted({cell for cell, _ in where})
    return Diagnostic(rel, "too-complex", f"cell {cells[0]}: {why}" if len(cells) == 1 else why, 1 if len(cells) == 1 else None)


def _scan_notebook(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    from .imports import python_facts
    from .notebook import NotebookError, join_cells, notebook_cells
    from .pyindex import passes_prefilter

    try:
        cells = notebook_cells(text)
    except NotebookError as e:
        result.diagnostics.append(Diagnostic(job.rel, "notebook", f"cannot read notebook: {e}"))
        return
    source, where = join_cells(cells)
    module_name, _ = module_name_of(job.rel)
    result.facts.update(python_facts(source, module_name, False))
    try:
        tree, whole = parse_tree(source), True
    except _TooDeep:
        tree, whole = None, False  # too complex as a whole: the cells are judged one by one below
    code = _code_facts(tree, module_name, False)
    if code:
        code["code"]["regions"] = []  # lines of the joined cells, not of a cell: not comparable
        result.facts.update(code)
    if not passes_prefilter(source, ctx.index):
        return
    try:
        if not whole:
            raise _TooDeep("a cell is nested too deeply")
        res = _python_hits(source, job.rel, ctx, False, tree)
    except (Unparseable, *_TOO_COMPLEX):
        # One broken or too complex cell must not hide the others: judge each cell alone, report
        # those that fail, scan the rest together (so imports in one cell still resolve names in the next).
        good = []
        for number, cell_lines in cells:
            cell_source = "\n".join(cell_lines) + "\n"
            cell_where = [(number, i) for i in range(1, len(cell_lines) + 2)]
            try:
                _python_hits(cell_source, job.rel, ctx, False, parse_tree(cell_source))
                good.append((number, cell_lines))
            except (Unparseable, *_TOO_COMPLEX) as e:
                result.diagnostics.append(_cell_diagnostic(job.rel, e, cell_source, cell_where))
        source, where = join_cells(good)
        try:
            res = _python_hits(source, job.rel, ctx, False, parse_tree(source))
        except (Unparseable, *_TOO_COMPLEX) as e:  # cells that pass alone but not together
            result.diagnostics.append(_cell_diagnostic(job.rel, e, source, where))
            return
    result.parsed = True
    col = _Collector(result, ctx, Suppressions(source))
    _add_python_hits(res.hits, source.splitlines(), col, ctx, job.rel, where)


def _scan_native(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    name = PurePosixPath(job.rel).name
    hits, facts = native_mod.scan_native(name, text, ctx.native_entries)
    result.facts.update(facts)
    col = _Collector(result, ctx, Suppressions(text))
    lines = text.splitlines()
    for h in hits:
        line_text = lines[h.line - 1] if 0 < h.line <= len(lines) else ""
        column = _column(line_text, h.symbol if h.symbol != name else "", h.symbol)
        col.add(_finding(h.rule, ctx, job.rel, h.line, column, h.symbol, h.snippet, details=h.details))


def _add_dependency_hits(reqs, lines: list[str], col: _Collector, ctx: ScanContext, rel: str) -> None:
    for rule, clause, req in deps_mod.match_requirements(reqs, ctx.dep_entries):
        line_text = lines[req.line - 1] if 0 < req.line <= len(lines) else ""
        symbol = req.name or req.text
        column = _column(line_text, req.text.split()[0] if req.text else "", symbol)
        snippet = " ".join(line_text.split())[:160]
        # listed only in an optional extra or dependency group: context.py makes it opt-in or off the path
        details = {"extra": req.extra} if req.extra else None
        col.add(_finding(rule, ctx, rel, req.line, column, symbol, snippet, details=details))


def _scan_deps(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    kind = deps_mod.dependency_kind(job.rel)
    if kind is None:
        return
    try:
        reqs = deps_mod.parse_dependencies(kind, text)
    except deps_mod.tomllib.TOMLDecodeError as e:
        line = getattr(e, "lineno", None)
        result.diagnostics.append(Diagnostic(job.rel, "syntax-error", f"invalid TOML: {e}", line))
        return
    if ctx.dep_entries:
        _add_dependency_hits(reqs, text.splitlines(), _Collector(result, ctx, Suppressions(text)), ctx, job.rel)


def _scan_launch(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    from . import launch as launch_mod

    result.facts.update(launch_mod.launch_facts(PurePosixPath(job.rel).name, text))


def _scan_config(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    from . import configs as configs_mod  # PyYAML loads only for configuration files

    try:
        result.facts.update(configs_mod.config_facts(job.rel, text))
    except configs_mod.ConfigError as e:
        result.diagnostics.append(Diagnostic(job.rel, e.kind, e.message, e.line))
    _add_config_hits(job, text, ctx, result)


def _add_config_hits(job: FileJob, text: str, ctx: ScanContext, result: FileResult) -> None:
    """FP16 or loss scaling chosen in a training config (configvalues.py)."""
    from .configvalues import MATCHER, precision_settings

    entries = ctx.index.patterns.get(MATCHER)
    if not entries or not result.facts.get("values"):
        return
    lines = text.splitlines()
    col = _Collector(result, ctx, Suppressions(text))
    for line, setting in precision_settings(result.facts["values"]):
        line_text = lines[line - 1] if 0 < line <= len(lines) else ""
        for rule, _ in entries:
            col.add(_finding(rule, ctx, job.rel, line, _column(line_text, "", setting.split(":")[0].split(".")[-1]),
                             setting, " ".join(line_text.split())[:160]))


def _scan_binary(job: FileJob, ctx: ScanContext, result: FileResult, data: bytes | None = None) -> None:
    """A prebuilt shared library: its ELF tables, never its text (see binary.py). `data`: the whole
    file when the caller read it for the cache key, so it is not read a second time."""
    name = PurePosixPath(job.rel).name
    clauses = [(r, m) for r, m in ctx.entries("binary")
               if any(fnmatch.fnmatchcase(name, g) for g in (m.files or ("*.so", "*.so.*")))]
    if not clauses:
        return
    try:
        with (io.BytesIO(data) if data is not None else open(job.path, "rb")) as fh:
            facts = binary_mod.read_binary(fh)
    except binary_mod.NotReadable as e:
        raise _Skip("binary", str(e)) from None
    except OSError as e:
        raise _Skip("unreadable", f"cannot read: {e.strerror or e}") from None
    if not facts.cuda:
        return
    result.parsed = True
    details = {"kernels": len(facts.exports), "kernel_names": facts.exports, "kernel_loc": 0, "loc": 0,
               "prebuilt": True, "evidence": facts.evidence}
    col = _Collector(result, ctx, Suppressions(""))
    for rule, _clause in clauses:
        col.add(_finding(rule, ctx, job.rel, 1, 1, name, "", details=details))


_HANDLERS = {
    "python": _scan_python,
    "notebook": _scan_notebook,
    "native": _scan_native,
    "cmake": _scan_native,
    "deps": _scan_deps,
    "launch": _scan_launch,
    "config": _scan_config,
}


def scan_file(job: FileJob, ctx: ScanContext, data: bytes | None = None) -> FileResult:
    """`data`: the file's bytes when the caller has read them already (see read_bytes)."""
    result = FileResult(job.rel, job.kind)
    try:
        if job.kind == "binary":
            if data is not None and len(data) > binary_mod.MAX_LIBRARY_SIZE:
                raise _Skip("too-large", f"larger than the {byte_size(binary_mod.MAX_LIBRARY_SIZE)} limit for a library")
            _scan_binary(job, ctx, result, data)  # read through its ELF tables
        else:
            text = read_text(job, ctx.max_file_size, data)
            _HANDLERS[job.kind](job, text, ctx, result)
            if result.findings and job.kind in ("native", "cmake"):  # copied native trees are one port (copies.py)
                result.facts["digest"] = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    except _Skip as s:
        result.diagnostics.append(Diagnostic(job.rel, s.kind, s.message, s.line))
    except _TooDeep as e:
        result.findings.clear()
        result.diagnostics.append(Diagnostic(job.rel, "too-complex", str(e)))
    except RecursionError:
        result.findings.clear()
        result.diagnostics.append(Diagnostic(job.rel, "too-complex", "nested too deeply to analyse; skipped"))
    except MemoryError:
        result.findings.clear()
        result.diagnostics.append(Diagnostic(job.rel, "too-complex", "ran out of memory analysing it; skipped"))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - a bug of ours (or a native panic) must not stop the scan
        result.findings.clear()
        result.diagnostics.append(
            Diagnostic(job.rel, "internal-error", f"neuron-ready failed on this file ({type(e).__name__}: {e}); please report it")
        )
    result.findings.sort(key=Finding.sort_key)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result
