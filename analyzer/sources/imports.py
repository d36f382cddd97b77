"""Cheap facts about every Python file, parsed or not: what it imports.

These feed the import graph (reach.py). They come from the text, not the CST, so they are the
same whether or not the prefilter let a file be parsed, and cost almost nothing. (Whether a file
has a `__main__` guard or trains is read from the ast, in codefacts.py.)
"""

from __future__ import annotations

import re

_IMPORT = re.compile(r"^[ \t]*import[ \t]+(?P<names>[\w. \t,]+)", re.M)
_FROM = re.compile(r"^[ \t]*from[ \t]+(?P<dots>\.*)(?P<mod>[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#;]+)", re.M)
_TRIPLE = re.compile(r"(\"\"\"|''')")


def _code_only(text: str) -> str:
    """Blank out triple-quoted strings (docstrings often show `import` lines) keeping line numbers."""
    if '"""' not in text and "'''" not in text:
        return text
    out = []
    pos = 0
    while True:
        m = _TRIPLE.search(text, pos)
        if not m:
            out.append(text[pos:])
            break
        out.append(text[pos : m.start()])
        end = text.find(m.group(1), m.end())
        if end < 0:
            break
        out.append("\n" * text.count("\n", m.start(), end + 3))
        pos = end + 3
    return "".join(out)


_TYPE_CHECKING = re.compile(r"^([ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#.*)?$")


def _without_type_checking(code: str) -> str:
    """Blank the bodies of `if TYPE_CHECKING:` blocks: those imports never run (lazy-module packages
    such as transformers list every submodule there)."""
    if "TYPE_CHECKING" not in code:
        return code
    lines = code.split("\n")
    i = 0
    while i < len(lines):
        m = _TYPE_CHECKING.match(lines[i])
        i += 1
        if not m:
            continue
        indent = len(m.group(1).expandtabs())
        while i < len(lines):
            body = lines[i]
            if body.strip() and len(body.expandtabs()) - len(body.expandtabs().lstrip()) <= indent:
                break
            lines[i] = ""
            i += 1
    return "\n".join(lines)


def absolute(module: str, level: int, module_name: str, is_package: bool) -> str:
    if not level:
        return module
    base = module_name.split(".") if module_name else []
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: max(0, len(base) - (level - 1))]
    return ".".join([*base, module] if module else base)


def python_facts(text: str, module_name: str, is_package: bool) -> dict:
    code = _without_type_checking(_code_only(text))
    imports: set[str] = set()
    for m in _IMPORT.finditer(code):
        for part in m.group("names").split(","):
            name = part.strip().split()[0] if part.strip() else ""
            if re.fullmatch(r"[\w.]+", name):
                imports.add(name)
    for m in _FROM.finditer(code):
        mod = absolute(m.group("mod"), len(m.group("dots")), module_name, is_package)
        if mod:
            imports.add(mod)
        # `from pkg import x`: x may be a module (pkg/x.py, or a compiled pkg/_C); the import
        # graph keeps the names that are modules and drops the others.
        names = m.group("names").strip("() \t\n")
        for part in names.split(","):
            name = part.strip().split()[0] if part.strip() else ""
            if re.fullmatch(r"\w+", name):
                imports.add(f"{mod}.{name}" if mod else name)
    return {"imports": sorted(imports)}
