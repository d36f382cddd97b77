"""One file through `neuron-ready fix`: what the scan reports, what is rewritten, what is left and why,
and the atomic write (a temporary file in the same directory, the original mode, os.replace).

A file that cannot be read or parsed, whose rewrite would not compile, or that changed on disk
while it was being fixed is left untouched with a diagnostic.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field

from ..model import Diagnostic, Finding
from ..sources import FileJob, ScanContext, Unparseable, _Skip, _syntax_diagnostic, module_name_of, read_text, reported_hits
from ..sources.imports import python_facts

NO_FIX = "no automatic fix for this rule"
UNSAFE = "its fix is unsafe (it changes numerics or behaviour): apply it with --unsafe-fixes"
NOTEBOOK = "notebooks are not rewritten; fix the code cell by hand"
MAX_PASSES = 5


@dataclass
class FileFix:
    job: FileJob
    before: str = ""
    after: str = ""
    fixed: list[Finding] = field(default_factory=list)
    left: list[tuple[Finding, str]] = field(default_factory=list)
    diagnostic: Diagnostic | None = None
    data: bytes = b""  # the bytes read, to tell whether the file changed before writing

    @property
    def changed(self) -> bool:
        return self.diagnostic is None and self.after != self.before


def plan_file(job: FileJob, ctx: ScanContext, unsafe: bool) -> FileFix:
    """What fixing one file changes; nothing is written."""
    out = FileFix(job)
    try:
        with open(job.path, "rb") as fh:
            out.data = fh.read()
        text = read_text(job, ctx.max_file_size, out.data)
    except OSError as e:
        out.diagnostic = Diagnostic(job.rel, "unreadable", f"cannot read: {e.strerror or e}; left untouched")
        return out
    except _Skip as s:
        out.diagnostic = Diagnostic(job.rel, s.kind, f"{s.message}; left untouched", s.line)
        return out
    out.before = out.after = text
    # Like Ruff, fix until nothing more changes: a rewrite can make another one possible (a CUDA
    # test becomes device-agnostic once the CUDA code it guards is).
    for _ in range(MAX_PASSES):
        try:
            edits, out.left = _one_pass(out, out.after, ctx, unsafe)
        except Unparseable as e:
            d = _syntax_diagnostic(job.rel, e, text)
            out.diagnostic = Diagnostic(d.path, d.kind, f"{d.message}; left untouched", d.line)
            out.after = text
            return out
        except RecursionError:
            out.diagnostic = Diagnostic(job.rel, "too-complex", "nested too deeply to analyse; left untouched")
            out.after = text
            return out
        if edits is None:
            break
        out.after = edits
    if out.after != text:
        try:
            compile(out.after, job.path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:  # a bug of ours: never write code that does not compile
            out.diagnostic = Diagnostic(job.rel, "internal-error", f"the rewrite would not compile ({e}); left untouched")
            out.left += [(f, "the rewrite would not compile") for f in out.fixed]
            out.fixed, out.after = [], text
    return out


def _one_pass(out: FileFix, text: str, ctx: ScanContext, unsafe: bool) -> tuple[str | None, list]:
    """One scan-and-rewrite of `text`: the new text (None when nothing was fixed) and what is left."""
    from .codemods import Edit, ModuleContext, apply, decide

    res, pairs = reported_hits(text, out.job.rel, ctx)
    module_name, is_package = module_name_of(out.job.rel)
    mctx = ModuleContext(res.module, text, python_facts(text, module_name, is_package)["imports"])
    edits: list[Edit] = []
    left: list[tuple[Finding, str]] = []
    for hit, finding in pairs:
        decision = decide(hit, mctx)
        if decision is None:
            left.append((finding, NO_FIX))
        elif isinstance(decision, str):
            left.append((finding, decision))
        elif hit.rule.fix == "unsafe" and not unsafe:
            left.append((finding, UNSAFE))
        else:
            edits.append(decision)
            out.fixed.append(finding)
    if not edits:
        return None, left
    return apply(res.module, edits, mctx).code, left


def notebook_left(job: FileJob, ctx: ScanContext) -> FileFix:
    """Notebooks are reported, not rewritten: every finding in one is left, saying so."""
    from ..sources import scan_file

    out = FileFix(job)
    result = scan_file(job, ctx)
    out.left = [(f, NOTEBOOK if f.details.get("fix") else NO_FIX) for f in result.findings]
    return out


def encoding_of(data: bytes) -> str:
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:
        return "utf-8"


def write_file(fix: FileFix) -> Diagnostic | None:
    """Write the fixed text in place of the file, atomically and with its mode, unless the file
    changed on disk since it was read. A diagnostic says why a file was left untouched."""
    path = os.path.realpath(fix.job.path)  # through a symlink to the file it names
    try:
        with open(path, "rb") as fh:
            now = fh.read()
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as e:
        return Diagnostic(fix.job.rel, "unreadable", f"cannot read it again: {e.strerror or e}; left untouched")
    if now != fix.data:
        return Diagnostic(fix.job.rel, "changed", "changed on disk while it was being fixed; left untouched")
    encoding = encoding_of(fix.data)
    bom = fix.data.startswith(b"\xef\xbb\xbf")
    data = fix.after.encode("utf-8" if encoding == "utf-8-sig" else encoding)
    if bom and not data.startswith(b"\xef\xbb\xbf"):
        data = b"\xef\xbb\xbf" + data
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = -1, ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".nr-fix", dir=directory)
        with os.fdopen(fd, "wb") as fh:
            fd = -1
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = ""
    except OSError as e:
        return Diagnostic(fix.job.rel, "unwritable", f"cannot write: {e.strerror or e}; left untouched")
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return None
