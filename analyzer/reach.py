"""Reachability: which files lie on the training path, and which native sources a build compiles.

The import graph (networkx) has one node per Python file or notebook and one per compiled
extension. Training entry points are the files named with `--entry` (or `entry = [...]`), else the
files that have a `__main__` guard and train (call `backward`, step or build an optimizer, use a
Trainer), console scripts whose module trains, and notebooks that train. Everything an entry
imports, transitively, is on the path. With no entry point (a library, a kernel collection) every
module is on the path.

Never on the path, unless an explicitly named entry reaches them:
- tests, benchmarks, examples and docs folders (and `test_*.py`, `*_test.py`, `conftest.py`);
- with no entry point, standalone scripts that do not train (a `__main__` guard, imported by nothing);
- with no entry point, test support: a module named as support (`_helper.py`, `*_utils.py`) that only
  tests, benchmarks and other test support import;
- vendored third-party code: git submodules, `third_party/`-style folders, well-known vendored
  C++ libraries (cutlass, composable_kernel, ...) and sub-folders with their own licence file.
Native sources are on the path only when a build compiles them (setup.py / `load` / `load_inline`
sources, CMake targets, and the project headers those include) into an extension that is itself
on the path. docs/effort-model.md explains each choice.
"""

from __future__ import annotations

import configparser
import fnmatch
import os
import posixpath
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .config import ConfigError
from .sources.builds import ANY, normalise

if TYPE_CHECKING:
    import networkx as nx

EXCLUDED_DIRS = frozenset({
    "test", "tests", "testing", "unittests", "benchmark", "benchmarks", "bench", "example", "examples", "doc", "docs",
})
_MAX_META_SIZE = 2 * 1024 * 1024  # packaging files read in the main process
_TEST_FILE = re.compile(r"^(test_\w*\.py|\w+_test\.py|conftest\.py|testing(_\w+)?\.py)$")
VENDOR_DIRS = frozenset({"third_party", "third-party", "thirdparty", "3rdparty", "vendor", "vendored", "external", "extern"})
# Native libraries projects copy into their tree rather than port (their users port their own kernels).
VENDORED_LIBRARIES = frozenset({
    "cutlass", "cccl", "cub", "thrust", "composable_kernel", "composable_kernel_tiled", "pybind11", "eigen",
    "googletest", "flash-attention",
})
_LICENSE = re.compile(r"(?i)^(licen[cs]e|copying)([.\-_][\w.\-]*)?$")
PACKAGING_FILES = frozenset({"setup.py"})

# Why a file is off the path (the JSON's `off_path_reason`).
EXCLUDED = "in a tests, benchmarks, examples or docs folder"
UNREACHED = "no training entry point imports it"
UNBUILT = "no build compiles it"
VENDORED = "vendored third-party code ({project})"
EXT_UNREACHED = "compiled into {ext}, which no training entry point imports"
STANDALONE = "a standalone script that does not train (a tool run on its own)"
TEST_SUPPORT = "imported only by tests and benchmarks: {importers}"
# Names that say a module serves tests or measurements rather than users: a private module (`_helper.py`),
# or a word for tests, helpers or utilities (`attn_bias_utils.py`); of its folders, privacy or a word for tests.
_SUPPORT_WORDS = r"tests?|testing|helpers?|fixtures?|mocks?|bench|benchmarks?"
_SUPPORT_MODULE = re.compile(rf"(?i)^_(?!_)|(^|_)({_SUPPORT_WORDS}|utils?)(_|$)")
_SUPPORT_FOLDER = re.compile(rf"(?i)^_(?!_)|(^|_)({_SUPPORT_WORDS})(_|$)")


class EntryError(ConfigError):
    """An --entry that names nothing in the scanned tree."""


@dataclass
class Extension:
    id: str  # the module it becomes (`fusedops._C`), or `<kind>@<file>:<line>` when unnamed
    name: str  # module name or fnmatch pattern; "" when it cannot be read
    kind: str  # cuda, cpp, extension, load, load_inline, cmake
    build: str  # the file that declares it
    line: int
    sources: list[str] = field(default_factory=list)  # compiled files and the project headers they include
    on_path: bool = False

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "build": self.build, "line": self.line,
                "files": len(self.sources), "on_path": self.on_path}


@dataclass
class Reach:
    mode: str  # "entries", "library" (no entry point), "files" (files given one by one)
    entries: list[str] = field(default_factory=list)
    detected: bool = False  # entries found automatically rather than named
    entry_reasons: dict[str, str] = field(default_factory=dict)  # entry -> why it was chosen
    entry_functions: list[tuple[str, str]] = field(default_factory=list)  # (file, function) a detected console script runs
    # `--entry module:name`: the name as given -> (its files, the nodes it resolves to, filled by context.py)
    symbols: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    graph: object = field(default=None, repr=False, compare=False)  # context.Graph built for detection, reused
    reasons: dict[str, str] = field(default_factory=dict)  # path -> why it is off the path
    extensions: list[Extension] = field(default_factory=list)
    extension_of: dict[str, str] = field(default_factory=dict)  # native path -> extension id
    build_sites: dict[tuple[str, int], str] = field(default_factory=dict)  # (file, line) -> extension id
    vendored: dict[str, str] = field(default_factory=dict)  # path -> vendored project folder
    vendored_used: dict[str, list[str]] = field(default_factory=dict)  # project -> compiled files
    includes: dict[str, list[str]] = field(default_factory=dict)  # native file a build reaches -> project files it includes
    demos: dict[str, str] = field(default_factory=dict)  # library mode: module -> why its `__main__` block is a demo

    def build_site(self, path: str, line: int, any_line: bool = False) -> str | None:
        """The extension built at (path, line); with any_line (a build rule's finding), in a file that
        builds one extension only, any line of it (`Extension = CppExtension if cpu else CUDAExtension`
        a line above the call is its build)."""
        ext_id = self.build_sites.get((path, line))
        if ext_id is None and any_line:
            ids = {e for (p, _), e in self.build_sites.items() if p == path}
            ext_id = ids.pop() if len(ids) == 1 else None
        return ext_id

    def same_code(self, ext_id: str) -> str:
        """The extension whose task ext_id's work joins: a second build of a module name with no sources of
        its own (flash-attn's ROCm build in the same setup.py), or of sources another extension
        already builds (torch-scatter's CMakeLists.txt beside its setup.py) is that extension's, since
        the code is ported, or switched off, once."""
        ext = self.extension(ext_id)
        if ext is not None and not ext.sources and "#" in ext_id and self.extension(ext_id.split("#")[0]):
            return ext_id.split("#")[0]  # another build of the same module with no sources of its own
        owners = {self.extension_of.get(src) for src in ext.sources} if ext is not None and ext.sources else set()
        return owners.pop() if len(owners) == 1 and None not in owners and ext_id not in owners else ext_id

    def reason(self, path: str, line: int = 0) -> str:
        """"" when (path, line) is on the training path, else why not."""
        ext_id = self.build_sites.get((path, line))
        if ext_id is not None:
            ext = self.extension(ext_id)
            if ext is not None and not ext.on_path:
                return self.reasons.get(path) or EXT_UNREACHED.format(ext=ext.id)
            return self.reasons.get(path, "") if path in self.vendored else ""
        return self.reasons.get(path, "")

    def extension(self, ext_id: str) -> Extension | None:
        for e in self.extensions:
            if e.id == ext_id:
                return e
        return None

    def to_dict(self) -> dict:
        out = {
            "mode": self.mode,
            "entries": list(self.entries),
            "detected": self.detected,
            "entry_reasons": {e: self.entry_reasons[e] for e in self.entries if e in self.entry_reasons},
            "extensions": [e.to_dict() for e in self.extensions],
            "vendored": sorted(set(self.vendored.values())),
        }
        if self.symbols:  # `--entry module:name`: the name as given -> the definitions it names
            out["entry_symbols"] = {name: nodes for name, (_, nodes) in sorted(self.symbols.items())}
        return out


@dataclass(frozen=True)
class FileInfo:
    """What reach needs of a scanned file: its kind and its facts (sources.FileResult)."""

    rel: str
    kind: str
    facts: dict


# ------------------------------------------------------------------------------------------ folders


# Whether a file has a `__main__` guard and trains: read from its code facts (sources/codefacts.py,
# from the ast), the one place that decides them. A file without code facts (it does not parse) has neither.

def main_guard(facts: dict) -> bool:
    return bool((facts.get("code") or {}).get("main_guard"))


def trains_at_top(facts: dict) -> bool:
    """Module-level code (outside functions and the `__main__` block) calls backward, steps an optimizer or runs a Trainer."""
    return bool((facts.get("code") or {}).get("top_trains"))


def steps_once_at_top(facts: dict) -> bool:
    """Module-level code steps an optimizer or calls backward, but in no loop and with no trainer run:
    an installation check or a demo unless it calls a function of the project that trains."""
    return bool((facts.get("code") or {}).get("top_steps_once"))


def trains_anywhere(facts: dict) -> bool:
    """Some code of the file trains: at the top, in the `__main__` block or in any function or class."""
    code = facts.get("code") or {}
    return bool(code.get("top_trains") or code.get("top_steps_once") or code.get("main_trains")
                or any("trains" in d[3] for d in (code.get("defs") or {}).values()))


def excluded(rel: str) -> bool:
    *dirs, name = rel.split("/")  # rel: a normalised relative posix path (string work: called per file)
    return any(part.lower() in EXCLUDED_DIRS for part in dirs) or bool(_TEST_FILE.match(name))


def vendored_projects(root: Path, rels: list[str]) -> dict[str, str]:
    """path -> the vendored project folder it belongs to (outermost match wins)."""
    submodules = _gitmodules(root)
    cache: dict[str, bool] = {}

    def licensed(d: str) -> bool:
        if d not in cache:
            try:
                names = os.listdir(root / d)
            except OSError:
                names = []
            cache[d] = (
                any(_LICENSE.match(n) for n in names)
                and not {"__init__.py", "setup.py", "pyproject.toml"} & set(names)
            )
        return cache[d]

    out: dict[str, str] = {}
    for rel in rels:
        parts = rel.split("/")[:-1]
        for i in range(len(parts)):
            d = "/".join(parts[: i + 1])
            name = parts[i].lower()
            if name in VENDOR_DIRS:
                out[rel] = "/".join(parts[: i + 2]) if i + 1 < len(parts) else d
                break
            if d in submodules or name in VENDORED_LIBRARIES or licensed(d):
                out[rel] = d
                break
    return out


def _tree_text(path: Path) -> str | None:
    """A small regular file of the scanned tree, read here in the main process (no worker timeout
    guards it): a FIFO would block forever and a huge file would stall the scan, so neither is read."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_META_SIZE:
            return None
        with open(path, "rb") as fh:
            return fh.read(_MAX_META_SIZE).decode("utf-8", errors="replace")
    except OSError:
        return None


def _gitmodules(root: Path) -> set[str]:
    text = _tree_text(root / ".gitmodules") or ""
    return {m.strip().strip("/") for m in re.findall(r"^[ \t]*path[ \t]*=[ \t]*(.+)$", text, re.M)}


# ------------------------------------------------------------------------------------------ modules


def module_names(rels: list[str]) -> dict[str, list[str]]:
    """Dotted module name -> files. Each Python file is known by its path from the scanned root
    (how relative imports were resolved) and from its outermost package (how others import it:
    `src/pkg/mod.py` is `pkg.mod`); a script outside any package by its own name."""
    package_dirs = {posixpath.dirname(r) for r in rels if r.endswith("/__init__.py")}
    index: dict[str, set[str]] = {}
    for rel in rels:
        if not rel.endswith((".py", ".pyw", ".ipynb")):
            continue
        parts = rel[: rel.rindex(".")].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts:
            continue
        index.setdefault(".".join(parts), set()).add(rel)
        d = posixpath.dirname(rel)
        top = d.count("/") + 1 if d else 0
        while d and d in package_dirs:
            top -= 1
            d = posixpath.dirname(d)
        rooted = parts[top:]
        if rooted:
            index.setdefault(".".join(rooted), set()).add(rel)
    return {k: sorted(v) for k, v in index.items()}


def _closest(importer: str, rels: list[str]) -> list[str]:
    """Of several files with one module name, those nearest the importer."""
    if len(rels) == 1:
        return rels
    here = PurePosixPath(importer).parts[:-1]

    def shared(r: str) -> int:
        n = 0
        for a, b in zip(here, PurePosixPath(r).parts[:-1]):
            if a != b:
                break
            n += 1
        return n

    best = max(shared(r) for r in rels)
    return [r for r in rels if shared(r) == best]


# ------------------------------------------------------------------------------------------ builds


def _segment_matches(pattern: str, name: str) -> bool:
    """fnmatch's `*` and `?` within one path segment, everything else literal. Greedy with one saved
    star, so time is at most len(pattern) * len(name): a regex for `*a*a*a...b` backtracks
    exponentially, and the pattern comes from the scanned repository."""
    p = n = 0
    star, mark = -1, 0
    while n < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, mark = p, n
            p += 1
        elif p < len(pattern) and pattern[p] in ("?", name[n]):
            p += 1
            n += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1
            n = mark
        else:
            return False
    return pattern[p:].strip("*") == ""


def glob_matches(pattern: str, path: str) -> bool:
    """A glob over `/`-separated paths: `*` and `?` stay within a folder, `**` spans folders."""
    segs, parts = pattern.split("/"), path.split("/")
    states = {0}  # how many path segments the pattern so far can have consumed
    for i, seg in enumerate(segs):
        if seg == ANY and i == len(segs) - 1:
            return any(k < len(parts) for k in states)  # the rest of the path, whatever it is
        if seg == ANY:
            states = {k for low in states for k in range(low, len(parts))}
        else:
            states = {k + 1 for k in states if k < len(parts) and _segment_matches(seg, parts[k])}
        if not states:
            return False
    return len(parts) in states


def _match_sources(patterns: list[str], anchors: list[str], native: list[str], vendored: dict[str, str]) -> set[str]:
    hits: set[str] = set()
    for raw in patterns:
        for anchor in anchors:
            pat = normalise(f"{anchor}/{raw}" if anchor else raw)
            if not pat:
                continue
            # A build we cannot read (`**`) compiles its project's sources, not vendored ones.
            pool = native if normalise(raw) != ANY else [r for r in native if r not in vendored]
            found = {r for r in pool if glob_matches(pat, r)}
            if found:
                hits |= found
                break
    return hits


def _included(rel: str, facts: dict[str, dict], by_name: dict[str, list[str]], memo: dict[str, list[str]]) -> list[str]:
    """The project files one native file includes: beside it, else any file whose path ends with the
    include (`#include "natten/cuda/x.h"`), resolved once per file (memo)."""
    got = memo.get(rel)
    if got is None:
        here = posixpath.dirname(rel)
        found: set[str] = set()
        for inc in facts.get(rel, {}).get("includes", ()):
            local = normalise(f"{here}/{inc}" if here else inc)
            if local in facts:
                found.add(local)
            else:
                found.update(r for r in by_name.get(posixpath.basename(inc), ()) if r == inc or r.endswith("/" + inc))
        got = memo[rel] = sorted(found)
    return got


def _include_closure(start: set[str], facts: dict[str, dict], by_name: dict[str, list[str]],
                     memo: dict[str, list[str]]) -> set[str]:
    seen = set(start)
    todo = sorted(start)
    while todo:
        for t in _included(todo.pop(), facts, by_name, memo):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def _extensions(files: list[FileInfo], vendored: dict[str, str], native: list[str],
                includes: dict[str, list[str]]) -> list[Extension]:
    """The builds' extensions and their sources; `includes` gets the resolved project includes of each
    file a build reaches (Reach.includes)."""
    facts = {f.rel: f.facts for f in files}
    by_name: dict[str, list[str]] = {}
    for r in native:
        by_name.setdefault(posixpath.basename(r), []).append(r)
    exts: list[Extension] = []
    for f in files:
        if f.rel in vendored:
            continue  # a vendored project's own builds are not this project's
        here = posixpath.dirname(f.rel)
        for b in f.facts.get("builds", ()):
            ident = b["name"] if b["name"] and "*" not in b["name"] and b["kind"] not in ("load", "load_inline") else ""
            ext = Extension(ident or f"{b['kind']}@{f.rel}:{b['line']}", b["name"], b["kind"], f.rel, b["line"])
            compiled = _match_sources(b.get("sources", []), [here, ""] if here else [""], native, vendored)
            ext.sources = sorted(_include_closure(compiled, facts, by_name, includes))
            exts.append(ext)
        for prog in f.facts.get("programs", ()):
            # A CUDA program built by make, a shell script or CMake: the training program itself when it
            # has no Python loop around it; ported as one rewrite (effort.py), never per file.
            if prog.get("cuda") is False:
                continue
            ext = Extension(f"program:{prog['name']}@{f.rel}", prog["name"], "program", f.rel, int(prog.get("line") or 1))
            compiled = _match_sources(list(prog.get("sources") or ()), [here, ""] if here else [""], native, vendored)
            ext.sources = sorted(_include_closure(compiled, facts, by_name, includes))
            if ext.sources:
                exts.append(ext)
        if f.kind == "cmake" and f.facts.get("cmake_build"):
            line = min((s[0] for s in f.facts.get("cmake_sources", ())), default=1)
            ext = Extension(f"cmake@{f.rel}", "", "cmake", f.rel, line)
            compiled = _match_sources([s[1] for s in f.facts.get("cmake_sources", ())], [here], native, vendored)
            ext.sources = sorted(_include_closure(compiled, facts, by_name, includes))
            if ext.sources:
                exts.append(ext)
    seen: dict[str, int] = {}
    for e in exts:  # two builds of one module name (CUDA and ROCm variants) stay apart
        seen[e.id] = seen.get(e.id, 0) + 1
        if seen[e.id] > 1:
            e.id = f"{e.id}#{seen[e.id]}"
    return exts


# ------------------------------------------------------------------------------------------ entries


def console_scripts(root: Path) -> list[tuple[str, str]]:
    """(module, function) of every console script the project declares."""
    mods: list[tuple[str, str]] = []
    try:
        data = tomllib.loads(_tree_text(root / "pyproject.toml") or "")
        for target in (data.get("project", {}).get("scripts", {}) or {}).values():
            if isinstance(target, str):
                mod, _, func = target.partition(":")
                mods.append((mod.strip(), func.strip()))
    except (tomllib.TOMLDecodeError, AttributeError, RecursionError):
        pass
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(_tree_text(root / "setup.cfg") or "")
        text = cfg.get("options.entry_points", "console_scripts", fallback="")
    except configparser.Error:
        text = ""
    text += "\n" + (_tree_text(root / "setup.py") or "")
    # a name starts only where a word starts, so a long word is tried once (no quadratic rescans)
    mods += re.findall(r"(?<![\w.-])[\w.-]+[ \t]*=[ \t]*([A-Za-z_][\w.]*)[ \t]*:[ \t]*([\w.]+)", text)
    return mods


def split_entry(value: str) -> tuple[str, str]:
    """An --entry as (file or module, symbol): `pkg.mod:Class`, `pkg/mod.py:func`, `pkg:Class.method`;
    a value with no `:` names no symbol."""
    v = value.strip()
    target, colon, name = v.rpartition(":")
    if not colon or not target.strip() or os.path.exists(v):
        return v, ""
    if not name.strip():
        return target.strip(), ""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name.strip()):
        return v, ""  # no name after the colon: a path (`runs/a::b/train.py`), found or not as one
    return target.strip(), name.strip()


def resolve_entry(value: str, root: Path, rels: set[str], modules: dict[str, list[str]]) -> list[str]:
    """The files an --entry names: a file (relative to the working directory or the root), a
    module name, either with `:symbol`, or a folder (every Python file in it)."""
    v, symbol = split_entry(value)
    candidates = []
    for base in (Path.cwd(), root):
        p = Path(v) if os.path.isabs(v) else base / v
        try:
            rel = os.path.relpath(os.path.abspath(p), os.path.abspath(root)).replace(os.sep, "/")
        except ValueError:
            continue
        if not rel.startswith(".."):
            candidates.append(rel)
    for rel in candidates:
        if rel in rels:
            return [rel]
        if symbol:  # a name is imported from a module: a folder is its package's `__init__.py`
            init = posixpath.join(rel, "__init__.py") if rel != "." else "__init__.py"
            if init in rels:
                return [init]
            continue
        inside = sorted(r for r in rels if r.startswith(rel.rstrip("/") + "/") and r.endswith((".py", ".ipynb")))
        if rel != "." and inside:
            return inside
    if v in modules:
        return modules[v]
    raise EntryError(f"entry {value!r}: no Python file, notebook, folder or module of that name in the scanned tree")


# ------------------------------------------------------------------------------------------ analysis


def analyse(root: Path, files: list[FileInfo], entries: list[str] = (), explicit_files: bool = False) -> Reach:
    files = sorted(files, key=lambda f: f.rel)  # the report must not depend on the order files were scanned in
    rels = [f.rel for f in files]
    info = {f.rel: f for f in files}
    vendored = vendored_projects(root, rels)
    native = [f.rel for f in files if f.kind == "native"]
    includes: dict[str, list[str]] = {}
    exts = _extensions(files, vendored, native, includes)
    modules = module_names(rels)
    python = [f.rel for f in files if f.kind in ("python", "notebook")]

    named: list[str] = []
    symbols: dict[str, tuple[list[str], list[str]]] = {}
    for e in entries:
        named_files = resolve_entry(e, root, set(rels), modules)
        named += named_files
        _, name = split_entry(e)
        if name:  # `pkg.train:main`, `gsplat:rasterization`: that function or class runs, not the module's `__main__`
            symbols[e.strip()] = (named_files, [])
    reach = Reach(mode="files" if explicit_files else "entries", vendored=vendored, includes=includes)
    if named:
        reach.entries = sorted(set(named))
        reach.entry_reasons = {e: "named with --entry" for e in reach.entries}
        reach.symbols = symbols
    elif not explicit_files:
        reach.entry_reasons, reach.entry_functions, reach.graph = _detect_entries(root, info, python, modules, vendored)
        reach.entries = sorted(reach.entry_reasons)
        reach.detected = bool(reach.entries)
        if not reach.entries:
            reach.mode = "library"

    import networkx as nx  # here, not at the top: the main process imports it while workers parse

    graph = _import_graph(info, python, modules, exts)
    reached: set[str] = set()
    for e in reach.entries:
        reached.add(e)
        reached |= nx.descendants(graph, e)
    named_reach = reached if named else set()

    def python_reason(rel: str) -> str:
        if rel in vendored:
            return VENDORED.format(project=vendored[rel])
        if rel in named_reach:
            return ""
        if excluded(rel):
            return EXCLUDED
        if rel.rsplit("/", 1)[-1] in PACKAGING_FILES or reach.mode == "files":
            return ""
        if reach.mode == "library":
            facts = info[rel].facts
            standalone = main_guard(facts) and not trains_anywhere(facts) and not any(graph.predecessors(rel))
            return STANDALONE if standalone else ""
        return "" if rel in reached else UNREACHED

    for rel in python:
        why = python_reason(rel)
        if why:
            reach.reasons[rel] = why
    if reach.mode == "library":
        reach.demos = library_demos(info, python, graph, vendored)
        for rel, why in test_support(info, python, graph, vendored, reach.reasons).items():
            reach.reasons.setdefault(rel, why)
    for e in exts:
        if e.build in vendored or (excluded(e.build) and e.build not in named_reach):
            e.on_path = False
        elif reach.mode in ("library", "files") or e.kind in ("cmake", "program"):
            e.on_path = True
        elif e.kind in ("load", "load_inline"):
            e.on_path = e.build in reached
        else:
            e.on_path = f"ext:{e.id}" in reached or not any(graph.predecessors(f"ext:{e.id}"))
    reach.extensions = exts
    for e in exts:
        reach.build_sites[(e.build, e.line)] = e.id
    for e in sorted(exts, key=lambda x: (not x.on_path, x.kind != "program", x.kind == "cmake", x.id)):
        for src in e.sources:
            reach.extension_of.setdefault(src, e.id)
            if src in vendored and e.on_path and src in _compiled_directly(e, info):
                reach.vendored_used.setdefault(vendored[src], []).append(src)
    for proj in reach.vendored_used:
        reach.vendored_used[proj] = sorted(set(reach.vendored_used[proj]))
    by_id = {e.id: e for e in exts}
    for f in files:
        rel = f.rel
        if f.kind in ("python", "notebook"):
            continue
        if rel in vendored:
            if rel not in reach.vendored_used.get(vendored[rel], ()):  # compiled: replaced as a whole
                reach.reasons[rel] = VENDORED.format(project=vendored[rel])
        elif excluded(rel):
            reach.reasons[rel] = EXCLUDED
        elif f.kind == "native" and not explicit_files:
            ext = by_id.get(reach.extension_of.get(rel, ""))
            if ext is None:
                reach.reasons[rel] = UNBUILT
            elif not ext.on_path:
                reach.reasons[rel] = EXT_UNREACHED.format(ext=ext.id)
    return reach


def _compiled_directly(ext: Extension, info: dict[str, FileInfo]) -> set[str]:
    """Sources a build names (not headers reached only through #include)."""
    return {s for s in ext.sources if not s.endswith((".h", ".hpp", ".hh", ".cuh", ".inl"))}


# Folders whose scripts are side tools or variants, not the trainer a user runs first.
SIDE_DIRS = re.compile(r"(?i)^(experiments?|projects?|scripts?|tools?|utils?|misc|contrib|legacy|archive|eval\w*|evaluation"
                       r"|inference|export\w*|demos?|notebooks?|playground|sandbox|research)$")
TRAIN_STEM = re.compile(r"(?i)^(train|pretrain|finetune|fine_tune|main|run_train|run_pretrain|run_finetune)\w*$")


def _side(rel: str) -> bool:
    return any(SIDE_DIRS.match(p) for p in rel.split("/")[:-1])


def _detect_entries(root: Path, info: dict[str, FileInfo], python: list[str], modules: dict[str, list[str]],
                    vendored: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]], object]:
    """Training entry points a user would pick, each with why: launch commands in scripts, Makefiles,
    READMEs and launcher configs; scripts that train (their own code, or through the project
    functions their `__main__` guard calls); notebooks that train; console scripts that train.
    Scripts in side folders (experiments/, tools/, eval*/ ...) count only when nothing else does."""
    from . import context

    graph = context.Graph(list(info.values()), modules, context.Defaults(list(info.values())))
    trains_cache: dict[str, str | None] = {}

    def trains(rel: str) -> str | None:
        if rel not in trains_cache:
            if trains_at_top(info[rel].facts):
                trains_cache[rel] = "trains"
            else:
                via = context.trains_from(graph, rel)
                via_rel, via_scope = context.split_node(via or "")
                trains_cache[rel] = None if via is None else (
                    "trains" if via_rel == rel else f"calls `{via_scope}` ({via_rel}), which trains")
        return trains_cache[rel]

    def usable(rel: str) -> bool:
        # a profiler or benchmark measures a model: even one that runs backward is no trainer a user picks
        return rel in info and rel not in vendored and not excluded(rel) and not context.developer_tool(rel)

    out: dict[str, str] = {}
    entry_functions: list[tuple[str, str]] = []
    for rel, fi in sorted(info.items()):  # launch commands: what the user actually runs
        for launch in fi.facts.get("launches", ()):
            for target in _launch_targets(launch, rel, modules, info):
                if usable(target) and (trains(target) or TRAIN_STEM.match(posixpath.basename(target).rsplit(".", 1)[0])):
                    cmd = f"{launch.get('launcher', 'python')} {launch.get('target', '')}".strip()
                    out.setdefault(target, f"launched by `{cmd}` in {rel}:{launch.get('line', 1)}")
    found: dict[str, str] = {}
    for rel in python:
        if not usable(rel):
            continue
        facts = info[rel].facts
        guard = main_guard(facts)
        notebook = info[rel].kind == "notebook"
        if not (guard or notebook or trains_at_top(facts) or steps_once_at_top(facts)):
            continue
        why = trains(rel)
        if why:
            shape = "a notebook" if notebook else "a `__main__` guard" if guard else "top-level code"
            found[rel] = f"{shape} that {why}" if why != "trains" else f"{shape} that trains"
    for mod, func in console_scripts(root):
        for rel in modules.get(mod, ()):
            if not usable(rel):
                continue
            via = context.trains_from(graph, rel, start=f"{rel}::{func}") if func else None
            if via or trains(rel):
                found.setdefault(rel, f"console script `{mod}:{func}` that trains")
                if func:
                    entry_functions.append((rel, func))
                continue
            # a console script dispatching subcommands from a table: the ones that train are entries
            for name, node in context.subcommands(graph, rel, func) if func else ():
                target, scope = context.split_node(node)
                if usable(target) and context.trains_from(graph, target, start=node):
                    found.setdefault(target, f"subcommand `{name}` of console script `{mod}:{func}`, which trains")
                    entry_functions.append((target, scope))
    preferred = {r: w for r, w in found.items() if not _side(r)}
    for rel, why in (preferred or found).items():
        out.setdefault(rel, why)
    return out, [(r, f) for r, f in entry_functions if r in out], graph


def _launch_targets(launch: dict, launch_file: str, modules: dict[str, list[str]], info: dict) -> list[str]:
    """The project files a launch command runs: a module name, or a script path relative to the
    launch file's folder or to the root."""
    target = str(launch.get("target") or "")
    if launch.get("kind") == "module":
        return list(modules.get(target, ()))
    target = target.lstrip("./") if target.startswith("./") else target
    here = posixpath.dirname(launch_file)
    out = []
    for cand in (posixpath.normpath(posixpath.join(here, target)) if here else target, posixpath.normpath(target)):
        if cand in info and cand not in out:
            out.append(cand)
    return out


def library_demos(info: dict[str, FileInfo], python: list[str], graph: nx.DiGraph, vendored: dict[str, str]) -> dict[str, str]:
    """Library mode: the library modules whose `__main__` block is a demo, each with why it is a
    library module. The block runs only when someone runs the file as a script; a user of the
    library imports the module, and importing never runs it. A module is the library's when another
    project module imports it (tests, examples and docs aside), or when it is a module of a package
    (an `__init__.py` beside it) and its block runs the module's own classes or functions (a demo of
    what it defines). A script nobody imports outside a package may be what the user runs: not one.
    A package's `__main__.py` is a demo as a whole: `python -m pkg` runs it, importing the library never does."""
    from .sources.codefacts import MAIN

    out: dict[str, str] = {}
    for rel in python:
        facts = info[rel].facts
        folder = posixpath.dirname(rel)
        if (posixpath.basename(rel) == "__main__.py" and posixpath.join(folder, "__init__.py") in info
                and rel not in vendored and not excluded(rel)):
            # `python -m pkg` runs the package's `__main__.py` (a self-check, a CLI): importing never does
            out[rel] = f"the command `python -m {folder.replace('/', '.') or '.'}`"
            continue
        if not main_guard(facts) or rel in vendored or excluded(rel):
            continue
        importers = sorted(p for p in graph.predecessors(rel) if p in info and p not in vendored and not excluded(p))
        if importers:
            out[rel] = f"`{importers[0]}` imports it"
            continue
        folder = posixpath.dirname(rel)
        code = facts.get("code") or {}
        defs = code.get("defs") or {}
        own = sorted({ref[2:].split(".", 1)[0] for ref, _region in (code.get("refs") or {}).get(MAIN, ())
                      if ref.startswith("l:")} & set(defs))
        if own and posixpath.join(folder, "__init__.py") in info:
            out[rel] = f"a module of the package `{folder or '.'}` whose block runs its own `{own[0]}`"
    return out


EXERCISE_DIRS = EXCLUDED_DIRS - {"example", "examples", "doc", "docs"}  # examples are what users start from


def exercises(rel: str) -> bool:
    """A test or benchmark file (the excluded folders and test files, examples and docs aside: a user
    starts from those)."""
    *dirs, name = rel.split("/")
    return any(d.lower() in EXERCISE_DIRS for d in dirs) or bool(_TEST_FILE.match(name))


def support_name(rel: str) -> bool:
    """A module whose name or folder says it serves tests or measurements (`_SUPPORT_MODULE`)."""
    *dirs, name = rel.split("/")
    return bool(_SUPPORT_MODULE.search(name.rsplit(".", 1)[0])) or any(_SUPPORT_FOLDER.search(d) for d in dirs)


def test_support(info: dict[str, FileInfo], python: list[str], graph: nx.DiGraph, vendored: dict[str, str],
                 reasons: dict[str, str]) -> dict[str, str]:
    """Library mode: the modules kept inside the package for its tests (a loader of bundled test
    data, a reference implementation to compare against), each with why. Such a module is imported,
    and only imported, by test files or by other such modules: no library module imports it, no
    package `__init__` re-exports it, no example, benchmark or doc imports it, and it is no script
    (no `__main__` block). A training job that uses the library never imports it. A module nothing
    imports stays the library's surface (a user imports it), as does every package `__init__`. A
    library's public modules are often used only by its users and its tests (an op, a checker, a
    hot-swap utility), so the module's name must also say it is support: private, or named for tests,
    helpers, benchmarks or utilities (`_SUPPORT_MODULE`), or in a private or test-named folder."""
    out: dict[str, str] = {}
    changed = True
    while changed:  # a helper imported only by another test helper is one too
        changed = False
        for rel in python:
            if (rel in out or rel in reasons or rel in vendored or excluded(rel) or info[rel].kind != "python"
                    or posixpath.basename(rel) == "__init__.py" or main_guard(info[rel].facts) or not support_name(rel)):
                continue
            importers = sorted(p for p in graph.predecessors(rel) if p != rel)
            if importers and all(p in out or (exercises(p) and p not in vendored) for p in importers):
                shown = [p for p in importers if p not in out] or importers
                names = ", ".join(shown[:2]) + (f" and {len(shown) - 2} more" if len(shown) > 2 else "")
                via = [p for p in importers if p in out]
                out[rel] = TEST_SUPPORT.format(importers=names) if not via else \
                    f"imported only by tests, benchmarks and their helper {via[0]}"
                changed = True
    return out


def _import_graph(info: dict[str, FileInfo], python: list[str], modules: dict[str, list[str]],
                  exts: list[Extension]) -> nx.DiGraph:
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(python)
    named_exts = [(e, e.name) for e in exts if e.name and e.kind not in ("load", "load_inline", "cmake", "program")]
    for e in exts:
        g.add_node(f"ext:{e.id}")
        if e.kind in ("load", "load_inline"):
            g.add_edge(e.build, f"ext:{e.id}")
    # Per import name: the files of each prefix that is a module, and the files the import runs
    # when no prefix is ambiguous (then they do not depend on the importer; almost always).
    resolved: dict[str, tuple[list[str] | None, list[list[str]]]] = {}
    for rel in python:
        # Ordered, without repeats: every import from a package brings its __init__ files again.
        targets: dict[str, None] = {}
        for imp in info[rel].facts.get("imports", ()):
            entry = resolved.get(imp)
            if entry is None:
                found = _module_prefixes(imp, modules)
                entry = resolved[imp] = (_resolve(found, "") if all(len(r) == 1 for r in found) else None, found)
            fixed, found = entry
            targets.update(dict.fromkeys(fixed if fixed is not None else _resolve(found, rel)))
            for e, name in named_exts:
                if imp == name or imp.endswith("." + name) or fnmatch.fnmatchcase(imp, name):
                    targets[f"ext:{e.id}"] = None
        targets.pop(rel, None)
        g.add_edges_from((rel, target) for target in targets)
    for e, name in named_exts:  # loaded by a path or torch.ops.load_library: its package loads it
        node = f"ext:{e.id}"
        if not any(g.predecessors(node)) and "." in name:
            for target in modules.get(name.rsplit(".", 1)[0], ()):
                g.add_edge(target, node)
    return g


def _module_prefixes(imp: str, modules: dict[str, list[str]]) -> list[list[str]]:
    """The files of each prefix of `imp` that is a module, longest first."""
    parts = imp.split(".")
    return [rels for i in range(len(parts), 0, -1) if (rels := modules.get(".".join(parts[:i])))]


def _resolve(prefixes: list[list[str]], importer: str) -> list[str]:
    """Files an import runs: the longest prefix that is a module, and the packages above it."""
    if not prefixes:
        return []
    out = list(_closest(importer, prefixes[0]))
    for rels in prefixes[1:]:
        out += [r for r in _closest(importer, rels) if r.endswith("__init__.py")]
    return out
