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

`cuda_choices` ([line, CPU class], `_Reader.cuda_choices`): the lines where a build script names a
CUDA build that is one side of a choice whose other side builds a CPU extension (`Ext = CppExtension
if suffix == "cpu" else CUDAExtension`; `extension = CppExtension` then `extension = CUDAExtension`
under an `if`, and the calls of such a variable; `CUDAExtension(...)` in one branch of an `if` and a
`CppExtension(...)` in the other). context.py `chosen_cuda_builds` reads them.
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
_CUDA_SOURCE = re.compile(r"\.(cu|cuh)$")


def _class_kind(qualified: str) -> str | None:
    """"cuda" or "cpu" for a qualified (or bare, `_BARE`) build class name, else None."""
    kind = BUILD_CALLS.get(qualified) or _BARE.get(qualified)
    return "cuda" if kind == "cuda" else "cpu" if kind in ("cpp", "extension") else None


def _constant_flags(tree: ast.AST) -> dict[str, bool]:
    """Names the file binds once, to True or False (`cuda = True`): a build test on one is decided."""
    stores: dict[str, int] = {}
    values: dict[str, bool] = {}
    for n in ast.walk(tree):
        if type(n) is ast.Name and type(n.ctx) is ast.Store:
            stores[n.id] = stores.get(n.id, 0) + 1
        if (type(n) is ast.Assign and len(n.targets) == 1 and type(n.targets[0]) is ast.Name
                and type(n.value) is ast.Constant and type(n.value.value) is bool):
            values[n.targets[0].id] = n.value.value
    return {name: v for name, v in values.items() if stores.get(name) == 1}


def _decided(test: ast.AST, constants: dict[str, bool]) -> bool | None:
    """The value of a build test the file fixes (`True`, `cuda` bound once to True, `not cuda`), else None."""
    if type(test) is ast.Constant and type(test.value) is bool:
        return test.value
    if type(test) is ast.Name:
        return constants.get(test.id)
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        inner = _decided(test.operand, constants)
        return None if inner is None else not inner
    return None


def build_facts(text: str) -> dict:
    """{"builds": [...]} for a Python file that declares extension builds, else {}."""
    if not any(t in text for t in _TRIGGERS):
        return {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    reader = _Reader(tree)
    builds = reader.builds()
    if not builds:
        return {}
    choices = reader.cuda_choices()
    return {"builds": builds, "cuda_choices": choices} if choices else {"builds": builds}


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

    # ------------------------------------------------------------------ CUDA builds chosen beside CPU builds

    def build_class(self, node: ast.AST) -> str | None:
        """"cuda" or "cpu" for a build class (`CUDAExtension`; `CppExtension`, setuptools `Extension`)
        or a call of one (by its sources and flags: `Extension(...)` of `.cu` sources or with nvcc
        flags is a CUDA build), else None."""
        call = node if type(node) is ast.Call else None
        ref = call.func if call is not None else node
        if type(ref) not in (ast.Name, ast.Attribute):
            return None
        kind = _class_kind(self.qualify(ref) or "")
        if kind == "cpu" and call is not None:
            src = _arg(call, 1, "sources")
            if src is not None and any(_CUDA_SOURCE.search(p) for p in self.patterns(src, 0)[0]):
                return "cuda"
            for kw in call.keywords:
                if (kw.arg == "extra_compile_args" and "'nvcc'" in ast.dump(kw.value)) or (
                        kw.arg == "with_cuda" and type(kw.value) is ast.Constant and kw.value.value is True):
                    return "cuda"
        return kind

    def cuda_choices(self) -> list[list]:
        """[line, CPU class] of each CUDA build chosen beside a CPU build of the same ops: the CUDA arm
        of a conditional expression whose other arm is a CPU build (`CppExtension if suffix == "cpu"
        else CUDAExtension`); a CUDA class assigned (or imported `as` a name) under an `if` to a name
        that holds a CPU class outside that branch (a default before it, the other branch), and the
        calls of a name that only such choices give a CUDA class; a CUDA build call in one branch of
        an `if` whose other branch calls a CPU build, or that replaces a CPU build of the same module
        name made outside its branch. An unconditional CUDA build, or one whose other case builds
        nothing, is none."""
        held: dict[str, list[tuple[str, tuple, int, str]]] = {}  # name -> (kind, if-path, line, class name)
        calls: list[tuple[ast.Call, tuple]] = []
        sites: dict[int, str] = {}
        chosen: dict[str, str] = {}  # name -> the CPU class beside the CUDA one it may hold

        constants = _constant_flags(self.tree)

        def arm_choice(n: ast.IfExp) -> str | None:
            kinds = (self.build_class(n.body), self.build_class(n.orelse))
            if set(kinds) != {"cuda", "cpu"}:
                return None
            cuda, cpu = (n.body, n.orelse) if kinds[0] == "cuda" else (n.orelse, n.body)
            if _decided(n.test, constants) is (cuda is n.body):
                return None  # `CUDAExtension if cuda else CppExtension` with `cuda = True`: the build, no choice
            sites[cuda.lineno] = self.class_name(cpu)
            return sites[cuda.lineno]

        def simple(st: ast.stmt, path: tuple) -> None:
            if type(st) is ast.ImportFrom and st.module and not st.level:
                for a in st.names:
                    kind = _class_kind(f"{st.module}.{a.name}")
                    if kind:
                        held.setdefault(a.asname or a.name, []).append((kind, path, st.lineno, a.name))
                return
            targets = st.targets if type(st) is ast.Assign else [st.target] if type(st) is ast.AnnAssign else []
            names = [t.id for t in targets if type(t) is ast.Name]
            value = getattr(st, "value", None)
            for n in ast.walk(st):
                if type(n) is ast.IfExp:
                    cpu = arm_choice(n)
                    if cpu is not None and n is value:
                        chosen.update((name, cpu) for name in names)
                elif type(n) is ast.Call:
                    calls.append((n, path))
            if names and type(value) in (ast.Name, ast.Attribute):
                kind = self.build_class(value)
                for name in names if kind else ():
                    held.setdefault(name, []).append((kind, path, value.lineno, self.class_name(value)))

        def walk(body: list, path: tuple) -> None:
            for st in body:
                t = type(st)
                if t is ast.If and (taken := _decided(st.test, constants)) is not None:
                    walk(st.body if taken else st.orelse, path)  # a test the file decides: no choice
                elif t is ast.If:
                    walk(st.body, (*path, (id(st), "body")))
                    walk(st.orelse, (*path, (id(st), "else")))
                elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While,
                           ast.With, ast.AsyncWith, ast.Try) or t.__name__ in ("TryStar", "Match"):
                    for field in ("body", "orelse", "finalbody"):
                        walk(getattr(st, field, None) or [], path)
                    for h in getattr(st, "handlers", ()):
                        walk(h.body, path)
                    for c in getattr(st, "cases", ()):
                        walk(c.body, path)
                else:
                    simple(st, path)

        walk(self.tree.body, ())

        def outside(inner: tuple, other: tuple) -> bool:
            """`other` does not sit in `inner`'s innermost branch (a default before it, another branch)."""
            return bool(inner) and other[:len(inner)] != inner

        for name, entries in held.items():
            cpu = [(p, cls) for k, p, _, cls in entries if k == "cpu"]
            cuda = [(p, line) for k, p, line, _ in entries if k == "cuda"]
            picked = [(line, beside[0]) for p, line in cuda if (beside := [cls for q, cls in cpu if outside(p, q)])]
            sites.update(picked)
            if cuda and len(picked) == len(cuda):
                chosen[name] = picked[0][1]
        direct = []  # calls of a build class by its own name, not of a variable holding one
        for call, path in calls:
            name = call.func.id if type(call.func) is ast.Name else None
            if name in chosen:
                sites[call.lineno] = chosen[name]
            elif name not in self.values and len({e[0] for e in held.get(name, ())}) < 2:
                kind = self.build_class(call)
                if kind:
                    direct.append((kind, path, call.lineno, self.name_pattern(_arg(call, 0, "name")),
                                   self.class_name(call)))
        for kind, path, line, module, _cls in direct:
            if kind != "cuda" or not path:
                continue
            for k, other, _l, mod, cls in direct:
                fork = next((i for i, (a, b) in enumerate(zip(path, other)) if a != b), None)
                if k == "cpu" and ((fork is not None and path[fork][0] == other[fork][0])
                                   or (outside(path, other) and module and mod == module)):
                    sites[line] = cls
                    break
        return sorted([line, cls] for line, cls in sites.items())

    def class_name(self, node: ast.AST) -> str:
        """The short name of a build class (`CppExtension`, `Extension`), for words."""
        ref = node.func if type(node) is ast.Call else node
        q = self.qualify(ref) if type(ref) in (ast.Name, ast.Attribute) else None
        return (q or "CppExtension").rsplit(".", 1)[-1]

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
