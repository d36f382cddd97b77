"""Launch files: the commands that start training, and the native programs a build produces.

Shell scripts, Makefile recipes, README code blocks, Dockerfile RUN/CMD/ENTRYPOINT and Procfile
lines are read as shell commands (comments dropped, `\\` continuations joined, split with
`shlex`). Two facts come out:

- `launches`: each command that starts a Python program (`python train.py`, `python -m pkg.train`,
  `torchrun ... train.py`, `accelerate launch`, `deepspeed`, `composer`, `lightning run model`,
  behind `srun`/`mpirun`/`env`/`VAR=...` prefixes), with its target and arguments as written, so
  entry detection can see which script a user runs and with which options;
- `programs`: each `nvcc` command that links an executable (not `-c`, not a shared library), and a
  Makefile's C/C++ link of an executable when the same Makefile compiles `.cu` files with `nvcc -c`.

The same command reader serves config values (sources/configs.py): `command: "torchrun train.py"`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".slurm", ".sbatch")
MAKE_NAMES = ("Makefile", "makefile", "GNUmakefile")
_README = re.compile(r"^README(\.(md|markdown|rst|txt))?$", re.I)
_DOCKER = re.compile(r"^(Dockerfile(\.[\w.-]+)?|[\w.-]+\.[Dd]ockerfile)$")

# A line worth splitting mentions one of these (most lines of a README or a script do not).
_MENTIONS = re.compile(r"python|torchrun|accelerate|deepspeed|composer|lightning|fabric|torch\.distributed|nvcc", re.I)

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_PYTHON_VAR = re.compile(r"^\$(\(\w*python\w*\)|\{\w*python\w*(:?[-=][^}]*)?\}|\w*python\w*)$", re.I)
_NVCC_VAR = re.compile(r"^\$(\(NVCC\)|\{NVCC\}|NVCC)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
# Leading variables of a path: `$ROOT/`, `${ROOT}/`, `$(ROOT)/`, `$$ROOT/` (make), `$(dirname $0)/`.
_VAR_PREFIX = re.compile(r"^(?:\$\$?(?:\{[^}]*\}|\([^)]*\)|\w+)/+)+")
_ONLY_VARS = re.compile(r"^(?:\$\$?(?:\{[^}]*\}|\([^)]*\)|\w+)|[/._-])*$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")

# Words before the program that do not change which program runs.
_KEYWORDS = frozenset({"then", "do", "else", "{", "(", "!", "if", "while", "until", "time", "exec", "command"})
# Programs that run another program given later on their command line.
_WRAPPERS = frozenset({
    "srun", "mpirun", "mpiexec", "ibrun", "jsrun", "aprun", "horovodrun", "env", "nohup", "sudo", "nice",
    "timeout", "numactl", "taskset", "stdbuf", "xvfb-run", "uv", "poetry", "pipenv", "pdm", "hatch", "conda",
    "mamba", "micromamba", "pixi", "ddp", "caffeinate", "chrt", "ionice",
})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
# `python -m X` that runs a tool, not a program of the project.
_TOOL_MODULES = frozenset({
    "pip", "pip3", "venv", "virtualenv", "ensurepip", "pytest", "unittest", "doctest", "build", "twine", "black",
    "isort", "flake8", "ruff", "mypy", "pylint", "coverage", "http", "json", "pydoc", "timeit", "cProfile", "profile",
    "pdb", "site", "compileall", "py_compile", "jupyter", "notebook", "ipykernel", "tensorboard", "pre_commit",
    "sphinx", "setuptools", "wheel", "spacy", "nltk", "pipx", "poetry", "uv", "conda", "huggingface_hub", "gdown",
    "zipfile", "tarfile", "grpc_tools", "nbconvert", "jupytext", "cibuildwheel", "tox", "nox", "mkdocs", "yapf",
    "autopep8", "pyflakes", "pycodestyle", "bandit", "torch.utils.collect_env", "torch.utils.bottleneck",
})
_NOT_PROGRAMS = frozenset({"setup.py"})
_DISTRIBUTED_MODULES = ("torch.distributed.run", "torch.distributed.launch")

_CONTROL = frozenset({";", "&&", "||", "|", "&", ";;", "|&", ";&", ";;&"})
_FD_BEFORE_REDIRECT = re.compile(r"(?<=\s)\d+(?=[<>])")

# nvcc: what makes a command produce something other than an executable.
_NVCC_NOT_EXECUTABLE = frozenset({
    "-c", "--compile", "-shared", "--shared", "-dc", "--device-c", "-dw", "--device-w", "-lib", "--lib",
    "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin", "-E", "--preprocess", "-M", "-MM",
    "--generate-dependencies", "-dlink", "--device-link", "-optix-ir", "--optix-ir", "-lto-ir",
})
_NOT_EXECUTABLE_OUTPUT = (".o", ".obj", ".so", ".a", ".dll", ".dylib", ".lib", ".ptx", ".cubin", ".fatbin", ".d")
_PROGRAM_SOURCES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".o", ".obj")
_VAR_REF = re.compile(r"\$\$?(?:\((\w+)\)|\{(\w+)\}|(\w+))")


def launch_kind(name: str) -> str | None:
    """The dialect of a launch file from its name: shell, make, readme, docker, procfile."""
    if name.endswith(SHELL_SUFFIXES):
        return "shell"
    if name in MAKE_NAMES or name.endswith(".mk"):
        return "make"
    if _README.match(name):
        return "readme-rst" if name.lower().endswith(".rst") else "readme"
    if _DOCKER.match(name):
        return "docker"
    if name == "Procfile":
        return "procfile"
    return None


# ------------------------------------------------------------------------------------ shell words


def strip_comment(line: str) -> str:
    """The line without its shell comment: a `#` that starts a word, outside quotes."""
    quote = ""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "#" and (i == 0 or line[i - 1] in " \t;&|("):
            return line[:i].rstrip()
        i += 1
    return line


def join_continuations(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Physical lines (number, text) to logical ones: comments dropped, `\\` continuations joined,
    each numbered by its first line."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in lines:
        text = strip_comment(raw)
        if not parts:
            start = number
        if text.endswith("\\") and not text.endswith("\\\\"):
            parts.append(text[:-1])
            continue
        parts.append(text)
        out.append((start, " ".join(parts)))
        parts = []
    if parts:
        out.append((start, " ".join(parts)))
    return out


def split_commands(text: str) -> list[list[str]]:
    """A logical shell line as the word lists of its simple commands (split at `;`, `&&`, `|`, ...),
    redirections removed. Variables stay as written; unbalanced quotes fall back to blanks."""
    text = _FD_BEFORE_REDIRECT.sub("", " " + text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()
    commands: list[list[str]] = []
    words: list[str] = []
    skip = False
    for tok in tokens:
        if skip:
            skip = False
            continue
        if tok in _CONTROL:
            if words:
                commands.append(words)
            words = []
        elif tok and set(tok) <= set("<>&|;"):
            skip = True  # a redirection and its target
        else:
            words.append(tok)
    if words:
        commands.append(words)
    return commands


# ------------------------------------------------------------------------------------ launches


def _base(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def _is_python(word: str) -> bool:
    return bool(_PYTHON.match(_base(word)) or _PYTHON_VAR.match(word))


def _launcher_at(words: list[str], i: int) -> str | None:
    w = words[i]
    if _is_python(w):
        return "python"
    base = _base(w)
    nxt = words[i + 1] if i + 1 < len(words) else ""
    if base == "torchrun" or base == "deepspeed" or base == "composer":
        return base
    if base == "accelerate" and nxt == "launch":
        return base
    if base in ("lightning", "fabric") and nxt == "run":
        return base
    return None


def _script(word: str) -> str | None:
    """A script path as written, leading variables stripped; None unless it names a .py file."""
    path = _VAR_PREFIX.sub("", word)
    if not path.endswith(".py") or (_ONLY_VARS.match(path[:-3]) and "$" in path):
        return None
    return path


def _after_options(words: list[str], j: int, module_flags: tuple[str, ...]) -> tuple[int, bool]:
    """Skip a launcher's options; (index of the target, whether it is a module). An option's value
    is the next word unless that starts with `-` or names a script (so flags need no list)."""
    n = len(words)
    while j < n:
        w = words[j]
        if w in module_flags:
            return j + 1, True
        if w == "--":
            return j + 1, False
        if not w.startswith("-") or w == "-":
            return j, False
        if "=" not in w and j + 1 < n and not words[j + 1].startswith("-") and _script(words[j + 1]) is None:
            j += 2
        else:
            j += 1
    return j, False


def _python_target(words: list[str], j: int) -> tuple[int, bool, str | None] | None:
    """Skip the interpreter's own options: (index of the target, is it `-m`, a module written
    as `-mpkg.train`); None for `-c` code and stdin."""
    n = len(words)
    while j < n:
        w = words[j]
        if w == "-":
            return None
        if w == "--":
            return j + 1, False, None
        if w.startswith("--"):
            j += 2 if w == "--check-hash-based-pycs" else 1
            continue
        if not w.startswith("-"):
            return j, False, None
        letters = w[1:]
        for k, ch in enumerate(letters):
            if ch == "c":
                return None
            if ch == "m":
                return (j, True, letters[k + 1:]) if k + 1 < len(letters) else (j + 1, True, None)
            if ch in "WX":
                if k + 1 == len(letters):
                    j += 1  # `-W ignore`: the value is the next word
                break
        j += 1
    return None


def _record(line: int, launcher: str, words: list[str], j: int, module: bool, wrapper: str | None,
            inline: str | None = None) -> dict | None:
    if inline is None and j >= len(words):
        return None
    raw = inline if inline is not None else words[j]
    if module:
        if not _MODULE.match(raw) or any(raw == t or raw.startswith(t + ".") for t in _TOOL_MODULES):
            return None
        target, kind = raw, "module"
    else:
        target = _script(raw)
        if target is None or _base(target) in _NOT_PROGRAMS:
            return None
        kind = "script"
    rec = {"line": line, "launcher": launcher, "target": target, "kind": kind, "args": list(words[j + 1:])}
    if wrapper:
        rec["wrapper"] = wrapper
    return rec


def _launch_from(words: list[str], i: int, line: int, wrapper: str | None) -> dict | None:
    launcher = _launcher_at(words, i)
    if launcher == "python":
        found = _python_target(words, i + 1)
        if found is None:
            return None
        j, module, inline = found
        name = inline if inline is not None else words[j] if j < len(words) else ""
        if module and name in _DISTRIBUTED_MODULES:
            k, mod = _after_options(words, j + 1, ("-m", "--module"))
            return _record(line, name, words, k, mod, wrapper)
        return _record(line, "python", words, j, module, wrapper, inline)
    start = i + 1
    if launcher == "accelerate":
        start = i + 2
    elif launcher in ("lightning", "fabric"):
        start = i + 3 if i + 2 < len(words) and words[i + 2] == "model" else i + 2
    module_flags = ("-m", "--module") if launcher != "deepspeed" else ("--module",)
    j, module = _after_options(words, start, module_flags)
    return _record(line, launcher, words, j, module, wrapper)


def launches_in_words(words: list[str], line: int, depth: int = 0) -> list[dict]:
    """The launch a simple command makes, if any (a `bash -c "..."` string is read as commands)."""
    i, n = 0, len(words)
    wrapper = None
    while i < n and (_ASSIGNMENT.match(words[i]) or words[i] in _KEYWORDS):
        i += 1
    if i >= n:
        return []
    if _base(words[i]) in _SHELLS and i + 2 < n and words[i + 1] == "-c" and depth < 3:
        return [r for cmd in split_commands(words[i + 2]) for r in launches_in_words(cmd, line, depth + 1)]
    if _base(words[i]) in _WRAPPERS and _launcher_at(words, i) is None:
        wrapper = _base(words[i])
        j = next((k for k in range(i + 1, n) if _launcher_at(words, k) is not None), None)
        if j is None:
            return []
        i = j
    if _launcher_at(words, i) is None:
        return []
    rec = _launch_from(words, i, line, wrapper)
    return [rec] if rec is not None else []


def launches_in_text(text: str, line: int, first_line_offset: bool = True) -> list[dict]:
    """Launches of shell text (a config value, possibly several lines), numbered from `line`."""
    out = []
    numbered = list(enumerate(text.splitlines(), start=line)) if first_line_offset else [(line, text)]
    for number, logical in join_continuations(numbered):
        if _MENTIONS.search(logical):
            for words in split_commands(logical):
                out.extend(launches_in_words(words, number))
    return out


# ------------------------------------------------------------------------------------ programs


@dataclass
class _Rule:
    target: str
    prereqs: list[str]


def _expand(word: str, variables: dict[str, str], depth: int = 0) -> str:
    if depth > 8 or "$" not in word or len(word) > 10_000:
        return word
    return _VAR_REF.sub(
        lambda m: _expand(variables.get(m.group(1) or m.group(2) or m.group(3), m.group(0)), variables, depth + 1)
        if (m.group(1) or m.group(2) or m.group(3)) in variables else m.group(0),
        word,
    )


def _automatic(word: str, rule: _Rule | None) -> list[str]:
    """Make's automatic variables ($@, $<, $^, $+) as the rule wrote them."""
    if rule is None:
        return [word]
    if word in ("$^", "$+", "$(^)", "$(+)"):
        return list(rule.prereqs)
    if word in ("$<", "$(<)"):
        return rule.prereqs[:1]
    return [word.replace("$@", rule.target).replace("$(@)", rule.target)]


def program_in_words(words: list[str], line: int, variables: dict[str, str], rule: _Rule | None = None) -> dict | None:
    """An `nvcc` command that links an executable from sources: {"name", "line", "sources", "tool"}."""
    i, n = 0, len(words)
    while i < n and (_ASSIGNMENT.match(words[i]) or words[i] in _KEYWORDS):
        i += 1
    if i >= n:
        return None
    first = _expand(words[i], variables).split()
    if not (_NVCC_VAR.match(words[i]) or _base(words[i]) == "nvcc" or (first and _base(first[0]) == "nvcc")):
        return None
    written = [w for word in words[i + 1:] for w in _automatic(word, rule)]
    flags = [f for w in written for x in _expand(w, variables).split() for f in _automatic(x, rule)]
    if any(f in _NVCC_NOT_EXECUTABLE for f in flags):
        return None
    output = None
    for k, w in enumerate(written):
        if w in ("-o", "--output-file") and k + 1 < len(written):
            output = written[k + 1]
        elif w.startswith(("-o", "--output-file=")) and not w.startswith(("-odir", "--o")) and len(w) > 2:
            output = w.split("=", 1)[1] if w.startswith("--") else w[2:]
    if output is None:
        for k, f in enumerate(flags):
            if f in ("-o", "--output-file") and k + 1 < len(flags):
                output = flags[k + 1]
    if output is not None and _expand(output, variables).endswith(_NOT_EXECUTABLE_OUTPUT):
        return None
    sources = []
    skip_next = False
    for w in written:
        if skip_next:
            skip_next = False
            continue
        if w in ("-o", "--output-file", "-I", "-L", "-l", "-x", "-arch", "-gencode", "-Xcompiler", "-Xlinker", "-ccbin"):
            skip_next = True
            continue
        if w.startswith("-") or w == output:
            continue
        if w.endswith(_PROGRAM_SOURCES) or any(x.endswith(_PROGRAM_SOURCES) for x in _expand(w, variables).split()):
            sources.append(w)
    if not sources:
        return None
    name = output or (rule.target if rule is not None else "a.out")
    return {"name": name, "line": line, "sources": sources, "tool": "nvcc"}


# ------------------------------------------------------------------------------------ dialects


_MAKE_ASSIGN = re.compile(r"^(?:override\s+|export\s+)?([A-Za-z_][\w.-]*)\s*(\+=|\?=|:::=|::=|:=|!=|=)\s*(.*)$")
_MAKE_RULE = re.compile(r"^([^\s:=#][^:=]*?)\s*::?(?!=)\s*(.*)$")
_SHELL_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+)?([A-Za-z_]\w*)=(\S*)\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_PROMPT = re.compile(r"^\s*(?:\([\w.-]+\)\s*)?[$%]\s+|^\s*!(?=\w)")
_RST_BLOCK = re.compile(r"::\s*(\S.*)?$")
_DOCKER_INSTRUCTION = re.compile(r"^\s*(RUN|CMD|ENTRYPOINT)\s+(.*)$", re.I)
_PROCFILE = re.compile(r"^[\w.-]+:\s*(.+)$")


@dataclass
class _Command:
    line: int
    text: str | None = None  # shell text, or
    words: list[str] | None = None  # an exec-form word list (Dockerfile CMD ["python", ...])
    rule: _Rule | None = None


def _make_commands(lines: list[str], variables: dict[str, str]) -> list[_Command]:
    out: list[_Command] = []
    rule: _Rule | None = None
    recipe: list[tuple[int, str]] = []
    other: list[tuple[int, str]] = []

    def flush_recipe():
        for number, text in join_continuations(recipe):
            out.append(_Command(number, text.lstrip().lstrip("@+-").lstrip(), rule=rule))
        recipe.clear()

    for number, raw in enumerate(lines, start=1):
        if raw.startswith("\t") and rule is not None and not other:
            recipe.append((number, raw[1:]))
            if not raw.rstrip().endswith("\\"):
                flush_recipe()
            continue
        flush_recipe()
        other.append((number, raw))
        if raw.rstrip().endswith("\\") and not strip_comment(raw).rstrip().endswith("\\\\"):
            continue
        (_, logical), = join_continuations(other)
        other.clear()
        if not logical.strip():
            continue
        m = _MAKE_ASSIGN.match(logical.strip())
        if m:
            name, op, value = m.groups()
            if op == "+=":
                variables[name] = (variables.get(name, "") + " " + value).strip()
            elif op != "?=" or name not in variables:
                variables[name] = value.strip()
            continue
        m = _MAKE_RULE.match(logical)
        if m and not logical.startswith(("ifeq", "ifneq", "ifdef", "ifndef", "else", "endif", "include", "-include", "define", "endef")):
            targets = m.group(1).split()
            deps = m.group(2).split(";", 1)
            prereqs = [p for p in deps[0].split("|", 1)[0].split()]
            rule = _Rule(targets[0] if targets else "", prereqs)
            if len(deps) > 1 and deps[1].strip():
                out.append(_Command(number, deps[1].strip(), rule=rule))
    flush_recipe()
    return out


def _readme_blocks(lines: list[str], rst: bool) -> list[list[tuple[int, str]]]:
    """Code blocks of a README: fenced and indented (Markdown, text) or `::` literal blocks (rst)."""
    blocks: list[list[tuple[int, str]]] = []
    fence = ""
    block: list[tuple[int, str]] | None = None
    indent = -1  # rst: indentation of the line that opened the block
    prev_blank = True
    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if rst:
            if block is not None:
                width = len(raw) - len(raw.lstrip())
                if not stripped or width > indent:
                    block.append((number, raw))
                    continue
                blocks.append(block)
                block = None
            if _RST_BLOCK.search(raw) and not stripped.startswith(".. image") and not stripped.startswith(".. figure"):
                block, indent = [], len(raw) - len(raw.lstrip())
            continue
        if fence:
            if stripped.startswith(fence) and set(stripped) <= set(fence[0]):
                blocks.append(block or [])
                fence, block = "", None
            else:
                block.append((number, raw))
            continue
        m = _FENCE.match(raw)
        if m:
            if block:
                blocks.append(block)
            fence, block = m.group(1), []
            continue
        is_code = bool(stripped) and raw.startswith(("    ", "\t"))
        if is_code and (prev_blank or block):
            if block is None:
                block = []
            block.append((number, raw))
        elif stripped and block is not None:
            blocks.append(block)
            block = None
        prev_blank = not stripped
    if block:
        blocks.append(block)
    return blocks


def _docker_commands(lines: list[str]) -> list[_Command]:
    out = []
    physical = [(n, raw) for n, raw in enumerate(lines, start=1) if not raw.lstrip().startswith("#")]
    for number, logical in join_continuations(physical):
        m = _DOCKER_INSTRUCTION.match(logical)
        if not m:
            continue
        body = m.group(2).strip()
        if body.startswith("["):
            try:
                words = json.loads(body)
            except ValueError:
                words = None
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                out.append(_Command(number, words=words))
                continue
        out.append(_Command(number, text=body))
    return out


def _commands(dialect: str, text: str, variables: dict[str, str]) -> list[_Command]:
    lines = text.splitlines()
    if dialect == "make":
        return _make_commands(lines, variables)
    if dialect == "docker":
        return _docker_commands(lines)
    if dialect == "procfile":
        return [_Command(n, m.group(1)) for n, raw in enumerate(lines, start=1) if (m := _PROCFILE.match(raw))]
    if dialect.startswith("readme"):
        out = []
        for block in _readme_blocks(lines, dialect == "readme-rst"):
            unprompted = [(n, _PROMPT.sub("", raw, count=1)) for n, raw in block]
            out.extend(_Command(n, t) for n, t in join_continuations(unprompted))
        return out
    commands = [_Command(n, t) for n, t in join_continuations(list(enumerate(lines, start=1)))]
    for c in commands:
        m = _SHELL_ASSIGN.match(c.text)
        if m:
            variables[m.group(1)] = m.group(2).strip("\"'")
    return commands


def launch_facts(name: str, text: str) -> dict:
    """{"launches": [...], "programs": [...]} of a launch file, each sorted by line."""
    dialect = launch_kind(name) or "shell"
    variables: dict[str, str] = {}
    launches: list[dict] = []
    programs: list[dict] = []
    commands = _commands(dialect, text, variables)
    for c in commands:
        if c.words is not None:
            launches.extend(launches_in_words(c.words, c.line))
            continue
        if not _MENTIONS.search(c.text) and not (c.rule is not None and "$" in c.text):
            continue
        for words in split_commands(c.text):
            launches.extend(launches_in_words(words, c.line))
            program = program_in_words(words, c.line, variables, c.rule)
            if program is not None:
                programs.append(program)
    if dialect == "make" and not programs:
        programs.extend(linked_programs(commands, variables))
    launches.sort(key=lambda r: r["line"])
    programs.sort(key=lambda r: r["line"])
    return {"launches": launches, "programs": programs}


_QUIET = re.compile(r"^(?:\$[({]Q[)}]|@)+")
_C_LINKERS = frozenset({"cc", "gcc", "g++", "c++", "clang", "clang++", "cpp", "ld", "icc", "icpx"})
_C_LINKER_VAR = re.compile(r"^\$[({]?(CC|CXX|CPP|LD|LINK\w*)[)}]?$")


def linked_programs(commands: list, variables: dict[str, str]) -> list[dict]:
    """Executables a Makefile links with the C/C++ compiler from objects, when the same Makefile
    compiles `.cu` files with `nvcc -c` (darknet's `$(CC) ... $^ -o $@` after `$(NVCC) ... -c $<`):
    the program's CUDA sources are every `.cu` file under the Makefile's folder."""
    nvcc_objects = False
    links: list[dict] = []
    for c in commands:
        if c.text is None:
            continue
        # make's `$<`/`$@` are no shell redirections: plain words, split at the control operators
        for words in (part.split() for part in re.split(r"&&|\|\||;|\|", c.text)):
            if not words:
                continue
            first = _QUIET.sub("", words[0])  # `$(Q)$(CXX)`, `@$(CC)`: echo control, not the tool
            head = _expand(first, variables).split()
            tool = _base(head[0].lstrip("@")) if head else ""
            expanded = [x for w in words[1:] for x in _expand(w, variables).split()]
            if _NVCC_VAR.match(first) or tool == "nvcc":
                cu = c.rule is not None and any(p.endswith(".cu") for p in c.rule.prereqs)
                nvcc_objects = nvcc_objects or ("-c" in expanded and (cu or any(x.endswith(".cu") for x in expanded)))
                continue
            if not (_C_LINKER_VAR.match(first) or tool in _C_LINKERS) or "-c" in expanded or "-shared" in expanded:
                continue
            output = next((words[k + 1] for k in range(1, len(words) - 1) if words[k] == "-o"), None)
            if output is None:
                continue
            name = c.rule.target if output in ("$@", "$(@)") and c.rule is not None else output
            var = _VAR_REF.fullmatch(name)
            name = _expand(name, variables)
            if "$" in name or "%" in name:
                name = next((g for g in var.groups() if g), "") if var else ""  # `$(TOOL_BINS)`: its variable
            if not name or name.endswith(_NOT_EXECUTABLE_OUTPUT) or re.search(r"(?i)test|example|bench", name):
                continue  # test, example and benchmark binaries are not the training program
            links.append({"name": name, "line": c.line, "sources": ["**/*.cu"], "tool": "make"})
    return links if nvcc_objects else []
