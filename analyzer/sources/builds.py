"""Which native sources a Python build compiles, and into which module: the `builds` fact.

setup.py `CUDAExtension(name="pkg._C", sources=[...])`, `CppExtension`, setuptools `Extension`,
and the JIT builds `torch.utils.cpp_extension.load(name, sources)` / `load_inline(...)`. Reachability
(reach.py) needs these to know which `.cu` files are compiled at all and which Python module a
compiled extension becomes.

Sources are rarely plain lists. They are evaluated to path patterns relative to the file's
directory: string literals, f-strings, `os.path.join`, `pathlib` `/`, `glob.glob`, list `+`,
`.append`/`.extend` and names assigned in the file. Anything that cannot be read statically becomes
`**` (any path): a build we cannot read is assumed to compile what it might, never nothing.
Uses Python's `ast` (not libcst) so it runs on every file, parsed by the rule walker or not.
"""

from __future__ import annotations

import ast
import posixpath
import re

# Qualified callee -> build kind.
BUILD_CALLS = {
    "torch.utils.cpp_extension.CUDAExtension": "cuda",
    "torch.utils.cpp_extension.CppExtension": "cpp",
    "torch.utils.cpp_extension.load": "load",
    "torch.utils.cpp_extension.load_inline": "load_inline",
    "setuptools.Extension": "extension",
    "setuptools.extension.Extension": "extension",
    "distutils.core.Extension": "extension",
    "distutils.extension.Extension": "extension",
    "pybind11.setup_helpers.Pybind11Extension": "extension",
}
# Names distinctive enough to count even when their import cannot be resolved (star imports).
_BARE = {"CUDAExtension": "cuda", "CppExtension": "cpp", "load_inline": "load_inline"}
_TRIGGERS = ("Extension", "cpp_extension", "load_inline")
ANY = "**"
_FILE = "\0file"  # the value of __file__
_NOT_NATIVE = re.compile(r"\.(py|pyx|pxd|txt|md|json|toml|cfg|ya?ml)$")
_MAX_DEPTH = 8


def build_facts(text: str) -> dict:
    """{"builds": [...]} for a Python file that declares extension builds, else {}."""
    if not any(t in text for t in _TRIGGERS):
        return {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    builds = _Reader(tree).builds()
    return {"builds": builds} if builds else {}


def _dotted(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


class _Reader:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}  # local name -> qualified name
        self.values: dict[str, list[ast.AST]] = {}  # name -> every value assigned or appended
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    self._bind(t, node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, ast.For):  # a loop variable takes the values it iterates over
                self._bind(node.target, node.iter)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                if node.func.attr in ("append", "extend", "insert") and isinstance(node.func.value, ast.Name):
                    self.values.setdefault(node.func.value.id, []).append(
                        ast.List([node.args[-1]], ast.Load()) if node.func.attr != "extend" else node.args[0]
                    )

    def _bind(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.values.setdefault(target.id, []).append(value)

    def qualify(self, func: ast.AST, seen: frozenset = frozenset()) -> str | None:
        parts = _dotted(func)
        if not parts:
            return None
        head = self.aliases.get(parts[0])
        if head is None:
            if len(parts) == 1 and parts[0] not in seen:  # `ext = CUDAExtension if cuda else CppExtension`
                for v in self.values.get(parts[0], []):
                    for cand in (v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,):
                        ok = isinstance(cand, (ast.Name, ast.Attribute))
                        q = self.qualify(cand, seen | {parts[0]}) if ok else None
                        if q and (q in BUILD_CALLS or q in _BARE):
                            return q
            return _BARE.get(parts[-1]) and parts[-1]
        return ".".join([head, *parts[1:]])

    def builds(self) -> list[dict]:
        out = []
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            q = self.qualify(node.func)
            kind = BUILD_CALLS.get(q or "") or _BARE.get(q or "")
            if kind is None:
                continue
            name_node = _arg(node, 0, "name")
            build: dict = {"kind": kind, "line": node.lineno, "name": self.name_pattern(name_node)}
            if kind == "load_inline":
                build["sources"] = []
                build["cuda"] = _arg(node, 2, "cuda_sources") is not None
            else:
                src = _arg(node, 1, "sources")
                patterns = self.patterns(src, 0)[0] if src is not None else [ANY]
                build["sources"] = sorted({p for p in patterns if not _NOT_NATIVE.search(p)})
            out.append(build)
        return sorted(out, key=lambda b: (b["line"], b["kind"]))

    def name_pattern(self, node: ast.AST | None) -> str:
        if node is None:
            return ""
        pats = self.patterns(node, 0)[0]
        return pats[0] if len(pats) == 1 and pats[0] != ANY else ""

    # ------------------------------------------------------------------ expression -> path patterns

    def patterns(self, node: ast.AST, depth: int, seen: frozenset = frozenset()) -> tuple[list[str], bool]:
        """(patterns, is_list): the paths an expression may denote, relative to the file's directory."""
        if depth > _MAX_DEPTH:
            return [ANY], False
        d = depth + 1
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value], False
        if isinstance(node, ast.JoinedStr):
            return ["".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)], False
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[str] = []
            for el in node.elts:
                out += self.patterns(el.value if isinstance(el, ast.Starred) else el, d, seen)[0]
            return out, True
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            self._bind_comprehension(node)
            return self.patterns(node.elt, d, seen)[0], True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):  # set(a) - set(b): within a
            return self.patterns(node.left, d, seen)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
            left, llist = self.patterns(node.left, d, seen)
            right, rlist = self.patterns(node.right, d, seen)
            if isinstance(node.op, ast.Add) and (llist or rlist):
                return left + right, True
            sep = "/" if isinstance(node.op, ast.Div) else ""
            return _product(left, right, sep), False
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return [_FILE], False
            if node.id in seen:  # `x = sorted(set(x) - ...)` adds nothing to x's other values
                return [], False
            if node.id not in self.values:
                return [ANY], False
            out, is_list = [], False
            for v in self.values[node.id]:
                pats, lst = self.patterns(v, d, seen | {node.id})
                out += pats
                is_list = is_list or lst
            return out, is_list
        if isinstance(node, ast.Attribute):
            if node.attr == "parent":
                return [_dirname(p) for p in self.patterns(node.value, d, seen)[0]], False
            return [ANY], False
        if isinstance(node, ast.Call):
            return self._call(node, d, seen)
        return [ANY], False

    def _bind_comprehension(self, node: ast.AST) -> None:
        """A comprehension variable takes the values of what it iterates over."""
        for gen in node.generators:
            if isinstance(gen.target, ast.Name) and gen.iter not in self.values.get(gen.target.id, []):
                self.values.setdefault(gen.target.id, []).append(gen.iter)

    def _call(self, node: ast.Call, d: int, seen: frozenset) -> tuple[list[str], bool]:
        parts = _dotted(node.func) or []
        last = parts[-1] if parts else ""
        q = self.qualify(node.func) or ""
        args = node.args
        if last in ("join",) and (q.startswith(("os.path", "posixpath")) or parts[:2] == ["os", "path"]):
            out = [""]
            for a in args:
                out = _product(out, self.patterns(a, d, seen)[0], "/")
            return out, False
        if q in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath") or last in ("Path", "PurePath"):
            out = [""]
            for a in args:
                out = _product(out, self.patterns(a, d, seen)[0], "/")
            return out, False
        if last in ("glob", "iglob", "rglob") and args:
            pats = self.patterns(args[0], d, seen)[0]
            if isinstance(node.func, ast.Attribute) and q not in ("glob.glob", "glob.iglob"):
                base = self.patterns(node.func.value, d, seen)[0]  # Path(...).glob("*.cu")
                pats = _product(base, ["**/" + p if last == "rglob" else p for p in pats], "/")
            return pats, True
        if last == "dirname" and args:
            return [_dirname(p) for p in self.patterns(args[0], d, seen)[0]], False
        if last in ("abspath", "realpath", "normpath", "expanduser", "str", "fspath") and args:
            return self.patterns(args[0], d, seen)
        if last in ("resolve", "absolute", "as_posix", "expanduser") and isinstance(node.func, ast.Attribute):
            return self.patterns(node.func.value, d, seen)
        if last == "replace" and isinstance(node.func, ast.Attribute) and len(args) == 2:
            old, new = (a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in args)
            pats = self.patterns(node.func.value, d, seen)[0]
            return ([p.replace(old, new) for p in pats] if old is not None and new is not None else [ANY]), False
        if last in ("sorted", "list", "set", "tuple") and args:
            return self.patterns(args[0], d, seen)[0], True
        return [ANY], False


def _arg(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return call.args[position]
    return None


def _dirname(p: str) -> str:
    if p == _FILE:
        return ""
    if p.startswith(_FILE):
        p = p[len(_FILE):].lstrip("/")
    return posixpath.dirname(p) if "/" in p else ("" if p != ANY else ANY)


def _product(left: list[str], right: list[str], sep: str) -> list[str]:
    out = []
    for a in left[:64]:
        for b in right[:64]:
            if b.startswith("/"):  # an absolute part replaces what came before it
                out.append(b)
            elif sep and a and b:
                out.append(f"{a}{sep}{b}")
            else:
                out.append(a + b if not sep else (a or b))
    return out[:256]


def normalise(pattern: str) -> str:
    """A pattern relative to its anchor directory: no `./`, no `..` where avoidable, `**` runs merged."""
    p = pattern.replace("\\", "/").replace(_FILE, "")
    p = re.sub(r"/+", "/", p).lstrip("/")
    parts: list[str] = []
    for seg in p.split("/"):
        if seg in ("", "."):
            continue
        if seg == ".." and parts and parts[-1] != ANY:
            parts.pop()
            continue
        if seg == ANY and parts and parts[-1] == ANY:
            continue
        parts.append(seg)
    return "/".join(parts)
