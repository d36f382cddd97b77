"""Which files to scan: walk the tree honouring .gitignore files, default and user excludes.

Symbolic links are never followed: one pointing inside the tree is skipped (its target is scanned
where it lives), one pointing outside, a broken one and a loop each become a diagnostic. The walk
is sorted, so the job list never depends on directory order.

In a git work tree, a .gitignore never hides a file git tracks (`git ls-files`): a committed
`.gitignore` of `*` must not make a pull request's code vanish from the scan. Anything that is not
a regular file (a FIFO, a socket, a device) is skipped with a diagnostic, never opened.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import pathspec

from .model import Diagnostic, reported_path
from .sources import FileJob
from .sources.configs import is_config_name, worth_reading
from .sources.binary import binary_kind
from .sources.deps import dependency_kind
from .sources.launch import launch_kind
from .sources.native import native_kind

# Directories that never hold the user's own training code.
DEFAULT_EXCLUDES = (
    ".git/", ".hg/", ".svn/", ".venv/", "venv/", ".env/", "site-packages/", "dist-packages/",
    "node_modules/", "__pycache__/", ".tox/", ".nox/", ".eggs/", "*.egg-info/", ".mypy_cache/",
    ".pytest_cache/", ".ruff_cache/", ".ipynb_checkpoints/", ".neuron-ready-cache/", "build/", "dist/",
)


def file_kind(rel: str) -> str | None:
    name = PurePosixPath(rel).name
    if name.endswith((".py", ".pyw")):
        return "python"  # setup.py too: its install_requires are read during the Python scan
    if name.endswith(".ipynb"):
        return "notebook"
    nk = native_kind(name) or binary_kind(name)
    if nk:
        return nk
    if dependency_kind(rel):
        return "deps"
    if launch_kind(name):
        return "launch"  # shell scripts, Makefiles, READMEs, Dockerfiles: the commands that start training
    if is_config_name(rel):
        return "config"
    return None


def _wanted(path: str, rel: str, kind: str) -> bool:
    """Config files that are data (too large, or a JSON list) get no job; every other kind is
    decided by its name alone."""
    if kind != "config":
        return True
    try:
        size = os.stat(path).st_size
    except OSError:
        return True  # the scan says why it cannot be read
    return worth_reading(path, rel, size)


@dataclass
class Discovery:
    jobs: list[FileJob] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def reported(self) -> Discovery:
        """Names as reports show them: a file whose name is not UTF-8 is still read from its real
        path, and reported under its name with `\\xNN` escapes (model.reported_path)."""
        self.jobs = sorted((replace(j, rel=reported_path(j.rel)) for j in self.jobs), key=lambda j: j.rel)
        self.diagnostics = [replace(d, path=reported_path(d.path)) for d in self.diagnostics]
        return self


def _is_virtualenv(path: str) -> bool:
    return os.path.exists(os.path.join(path, "pyvenv.cfg")) or os.path.isdir(os.path.join(path, "conda-meta"))


class _Ignores:
    """Nested .gitignore files: the deepest file with an opinion on a path decides."""

    def __init__(self, root: str, use_gitignore: bool, excludes: list[str]) -> None:
        self.use_gitignore = use_gitignore
        self.tracked, self.tracked_dirs = _tracked(root) if use_gitignore else (set(), set())
        self.specs: dict[str, pathspec.GitIgnoreSpec] = {}
        self.diagnostics: list[Diagnostic] = []  # bad patterns in the tree's ignore files
        self.exclude = pathspec.GitIgnoreSpec.from_lines(list(DEFAULT_EXCLUDES) + list(excludes))
        if use_gitignore:
            info = os.path.join(root, ".git", "info", "exclude")
            lines = _read_lines(info)
            self.root_extra = self._spec(lines, ".git/info/exclude") if lines else None
        else:
            self.root_extra = None

    def load(self, dir_abs: str, dir_rel: str) -> None:
        if not self.use_gitignore:
            return
        lines = _read_lines(os.path.join(dir_abs, ".gitignore"))
        if lines:
            self.specs[dir_rel] = self._spec(lines, f"{dir_rel}/.gitignore" if dir_rel else ".gitignore")

    def _spec(self, lines: list[str], rel: str) -> pathspec.GitIgnoreSpec:
        """Like git, skip a pattern it cannot read (a lone backslash), and say so."""
        try:
            return pathspec.GitIgnoreSpec.from_lines(lines)
        except ValueError:
            pass
        good = []
        for n, line in enumerate(lines, 1):
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except ValueError as e:  # pathspec: GitIgnorePatternError
                self.diagnostics.append(Diagnostic(rel, "unreadable", f"invalid pattern, ignored: {e}", n))
                continue
            good.append(line)
        return pathspec.GitIgnoreSpec.from_lines(good)

    def ignored(self, rel: str, is_dir: bool) -> bool:
        probe = rel + "/" if is_dir else rel
        if self.exclude.match_file(probe):
            return True
        if not self.use_gitignore or rel in (self.tracked_dirs if is_dir else self.tracked):
            return False
        parts = rel.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            base = "/".join(parts[:depth])
            spec = self.specs.get(base)
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            res = spec.check_file(sub)
            if res.include is not None:
                return bool(res.include)
        if self.root_extra is not None:
            return bool(self.root_extra.match_file(probe))
        return False


def _tracked(root: str) -> tuple[set[str], set[str]]:
    """Files git tracks under `root` (relative to it) and their folders; empty outside a work tree."""
    try:
        # core.fsmonitor=false: a tree from elsewhere may carry a .git/config that runs a command
        p = subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", root, "ls-files", "-z", "--cached"],
                           capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return set(), set()
    if p.returncode != 0:
        return set(), set()
    files = {f for f in p.stdout.decode("utf-8", "surrogateescape").split("\0") if f}
    dirs = {f[:i] for f in files for i in range(len(f)) if f[i] == "/"}
    return files, dirs


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().splitlines()
    except OSError:
        return []


def _symlink_diagnostic(abs_path: str, rel: str, root_real: str) -> Diagnostic | None:
    try:
        target = os.path.realpath(abs_path, strict=True)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return Diagnostic(rel, "symlink", "symbolic link loop; not followed")
        return Diagnostic(rel, "symlink", "broken symbolic link; skipped")
    except RuntimeError:  # older Pythons report loops this way
        return Diagnostic(rel, "symlink", "symbolic link loop; not followed")
    if target != root_real and not target.startswith(root_real + os.sep):
        return Diagnostic(rel, "symlink", "symbolic link to outside the scanned tree; not followed")
    return None  # inside the tree: its target is scanned where it lives


def _regular(path: str, rel: str, diagnostics: list[Diagnostic]) -> bool:
    """Only regular files are read: opening a FIFO named `x.py` would wait forever."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        diagnostics.append(Diagnostic(rel, "unreadable", f"cannot stat: {e.strerror or e}"))
        return False
    if stat.S_ISREG(mode):
        return True
    diagnostics.append(Diagnostic(rel, "unreadable", "not a regular file (a FIFO, socket or device); skipped"))
    return False


def discover(root: Path, excludes: list[str] = (), use_gitignore: bool = True) -> Discovery:
    out = Discovery()
    root_abs = os.path.abspath(root)
    root_real = os.path.realpath(root_abs)
    ignores = _Ignores(root_abs, use_gitignore, list(excludes))
    stack = [(root_abs, "")]
    while stack:
        dir_abs, dir_rel = stack.pop()
        ignores.load(dir_abs, dir_rel)
        try:
            entries = sorted(os.scandir(dir_abs), key=lambda e: e.name)
        except OSError as e:
            out.diagnostics.append(Diagnostic(dir_rel or ".", "unreadable", f"cannot list directory: {e.strerror or e}"))
            continue
        subdirs = []
        for entry in entries:
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError as e:
                out.diagnostics.append(Diagnostic(rel, "unreadable", f"cannot stat: {e.strerror or e}"))
                continue
            if is_link:
                # Decide on the link itself: excluded links say nothing, others are never followed.
                link_is_dir = os.path.isdir(entry.path)
                if ignores.ignored(rel, link_is_dir):
                    continue
                if link_is_dir or file_kind(rel) is not None or not os.path.exists(entry.path):
                    d = _symlink_diagnostic(entry.path, rel, root_real)
                    if d is not None:
                        out.diagnostics.append(d)
                continue
            if is_dir:
                if ignores.ignored(rel, True) or _is_virtualenv(entry.path):
                    continue
                subdirs.append((entry.path, rel))
                continue
            kind = file_kind(rel)
            if kind is None or ignores.ignored(rel, False):
                continue
            if not _regular(entry.path, rel, out.diagnostics) or not _wanted(entry.path, rel, kind):
                continue
            out.jobs.append(FileJob(entry.path, rel, kind))
        stack.extend(reversed(subdirs))
    out.diagnostics += ignores.diagnostics
    return out.reported()


def explicit_files(root: Path, files: list[Path], excludes: list[str] = ()) -> Discovery:
    """Files named on the command line (as pre-commit passes them): only excludes apply."""
    out = Discovery()
    ignores = _Ignores(os.path.abspath(root), False, list(excludes))
    root_abs = Path(os.path.abspath(root))
    seen = set()
    for f in files:
        abs_f = Path(os.path.abspath(f))
        try:
            rel = abs_f.relative_to(root_abs).as_posix()
        except ValueError:
            out.diagnostics.append(Diagnostic(str(f), "unreadable", "outside the scanned root; skipped"))
            continue
        if rel in seen:
            continue
        seen.add(rel)
        kind = file_kind(rel)
        if kind is None or ignores.ignored(rel, False):
            continue
        if not abs_f.exists() and not abs_f.is_symlink():
            out.diagnostics.append(Diagnostic(rel, "unreadable", "no such file"))
            continue
        if abs_f.is_symlink():  # named on the command line: still never followed out of the tree
            d = _symlink_diagnostic(str(abs_f), rel, os.path.realpath(root_abs))
            if d is not None:
                out.diagnostics.append(d)
                continue
        if not _regular(str(abs_f), rel, out.diagnostics) or not _wanted(str(abs_f), rel, kind):
            continue
        out.jobs.append(FileJob(str(abs_f), rel, kind))
    return out.reported()
