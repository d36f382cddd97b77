"""Native sources: CUDA (.cu/.cuh), C/C++ that includes CUDA headers, and CMake builds.

Comments are blanked (keeping line numbers) before any pattern is matched. For CUDA files the
scanner measures what a port has to rewrite: `__global__` kernels (count, start lines, lines of
code), launches, atomics, shared memory, inline PTX, warp and tensor-core intrinsics, and the CUDA
libraries used.
"""

from __future__ import annotations

import bisect
import fnmatch
import re
from dataclasses import dataclass, field
from typing import Callable

from .. import nearcopy
from .ctokens import c_tokens

CUDA_SUFFIXES = (".cu", ".cuh")
NATIVE_SUFFIXES = CUDA_SUFFIXES + (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl")
CMAKE_NAMES = ("CMakeLists.txt",)
CMAKE_SUFFIXES = (".cmake",)

_CUDA_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]('
    r"cuda[\w]*\.h|cuda_runtime\w*\.h|cuda_fp16\.h|cuda_bf16\.h|cuda_fp8\.h|cublas\w*\.h|cublasLt\.h|cudnn\w*\.h"
    r"|curand\w*\.h|cusparse\w*\.h|cufft\w*\.h|cusolver\w*\.h|nccl\.h|nvrtc\.h|mma\.h|cooperative_groups[\w/]*(\.h)?"
    r"|ATen/cuda/[^>\"]+|c10/cuda/[^>\"]+|cub/[^>\"]+|thrust/[^>\"]+|cutlass/[^>\"]+|cute/[^>\"]+"
    r")[>\"]",
    re.M,
)
_KERNEL = re.compile(r"\b__global__\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_FEATURES = {
    "launches": re.compile(r"<<<"),
    "atomics": re.compile(r"\batomic[A-Z]\w*\s*\("),
    "shared_memory": re.compile(r"\b__shared__\b"),
    "inline_ptx": re.compile(r"\basm\s*(?:volatile\s*)?\("),
    "warp_intrinsics": re.compile(r"\b__(?:shfl|ballot|any|all)\w*_sync\b"),
    "tensor_cores": re.compile(r"\bwmma::|\bmma\.sync\b|\b__hmma|\bmma::"),
}
_LIBRARIES = {
    "cub": re.compile(r"\bcub::"),
    "thrust": re.compile(r"\bthrust::"),
    "cutlass": re.compile(r"\bcutlass::|\bcute::"),
    "cublas": re.compile(r"\bcublas\w*\s*\("),
    "cudnn": re.compile(r"\bcudnn\w*\s*\("),
    "curand": re.compile(r"\bcurand\w*\s*\("),
    "nccl": re.compile(r"\bnccl[A-Z]\w*\s*\("),
}


def blank_c_comments(text: str) -> str:
    """Replace // and /* */ comments by spaces, keeping newlines and string literals intact."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        else:
            j = i
            while j < n and text[j] not in "/\"'":
                j += 1
            if j == i:
                j += 1
            out.append(text[i:j])
            i = j
    return "".join(out)


_HASH_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|#[^\n]*')


def blank_hash_comments(text: str) -> str:
    """CMake comments to spaces; a `#` inside a quoted argument (`"#include <cstdio>\\n"`) is text."""
    return _HASH_COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else " " * len(m.group(0)), text)


def is_cuda_source(name: str, code: str) -> bool:
    return name.endswith(CUDA_SUFFIXES) or bool(_CUDA_INCLUDE.search(code))


def line_finder(code: str) -> Callable[[int], int]:
    """Offset -> line number by bisection: counting newlines again for each offset was quadratic."""
    newlines = [m.start() for m in re.finditer("\n", code)]
    return lambda pos: bisect.bisect_left(newlines, pos) + 1


def _brace_pairs(code: str) -> dict[int, int]:
    """Each `{` -> its matching `}` (the last character when it never closes), in one pass: matching
    from every kernel separately was quadratic on a large file with unbalanced braces."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(code):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    for open_at in stack:
        pairs[open_at] = len(code) - 1
    return pairs


_BRACE = re.compile(r"[{}]")
_HEAD_END = re.compile(r"[{;]")


@dataclass
class Kernel:
    name: str
    line: int
    loc: int
    fingerprint: str = ""  # a sketch of its body's normalised tokens, to find near-copies (nearcopy.py)


@dataclass
class CudaStats:
    kernels: list[Kernel] = field(default_factory=list)
    features: dict[str, int] = field(default_factory=dict)
    libraries: list[str] = field(default_factory=list)
    loc: int = 0
    # no kernel, but device code that reads which thread or block it runs on: a kernel's body (a functor
    # another file's generic kernel runs), not launch glue
    thread_index: bool = False
    # no kernel, but device code of its own (device_code()): a `__device__`-only function, inline PTX,
    # device intrinsics or the thread index outside a macro; False: macros, types and host helpers only
    device_code: bool = False

    def details(self) -> dict:
        d = {
            "kernels": len(self.kernels),
            "kernel_lines": [k.line for k in self.kernels],
            "kernel_names": [k.name for k in self.kernels],
            "kernel_loc": sum(k.loc for k in self.kernels),
            "loc": self.loc,
            "backward": any(re.search(r"(?i)bwd|backward|grad", k.name) for k in self.kernels),
        }
        if self.kernels:
            d["kernel_fingerprints"] = [k.fingerprint for k in self.kernels]
        if self.thread_index:
            d["thread_index"] = True
        if self.device_code:
            d["device_code"] = True
        d.update(self.features)
        if self.libraries:
            d["libraries"] = self.libraries
        return d


def cuda_stats(code: str) -> CudaStats:
    """Kernels and features of comment-free CUDA/C++ code."""
    stats = CudaStats()
    stats.loc = sum(1 for line in code.splitlines() if line.strip())
    line_of = line_finder(code)
    pairs: dict[int, int] | None = None
    head_end = None
    bodies: list[tuple[int, int, int]] = []  # each kernel's (start, body's `{`, past its `}`)
    for m in _KERNEL.finditer(code):
        # A definition's head runs to its body's `{`; a declaration ends at `;` first. Kernels come
        # in order, so one found end serves every kernel before it (linear, whatever the file).
        if head_end is None or head_end.start() < m.end():
            head_end = _HEAD_END.search(code, m.end())
            if head_end is None:
                break
        if code[head_end.start()] != "{":
            continue
        head = _LAUNCH_BOUNDS.sub(" ", code[m.end() : head_end.start()])
        paren = head.find("(")
        names = re.findall(r"[A-Za-z_]\w*", head[:paren] if paren >= 0 else "")
        if not names:
            continue
        pairs = _brace_pairs(code) if pairs is None else pairs
        line = line_of(m.start())
        close = pairs[head_end.start()]
        bodies.append((m.start(), head_end.start(), close + 1))
        stats.kernels.append(Kernel(names[-1], line, line_of(close) - line + 1))
    # A body ends at its closing brace, and never past the next kernel (braces left open would make
    # every body run to the end of the file: quadratic on a large file).
    for n, (k, (_, start, end)) in enumerate(zip(stats.kernels, bodies)):
        stop = min(end, bodies[n + 1][0]) if n + 1 < len(bodies) else end
        k.fingerprint = nearcopy.fingerprint(c_tokens(code[start:stop]))
    for key, rx in _FEATURES.items():
        count = len(rx.findall(code))
        if count:
            stats.features[key] = count
    stats.libraries = [name for name, rx in _LIBRARIES.items() if rx.search(code)]
    stats.thread_index = not stats.kernels and bool(_THREAD_INDEX.search(code))
    stats.device_code = not stats.kernels and device_code(code, stats)
    return stats


# device code of its own: work only a device runs (the thread index, PTX, warp, tensor-core and atomic
# intrinsics, shared memory) or a function only the device compiles; `__host__ __device__` helpers
# compute from their arguments on either side
_DEVICE_FEATURES = ("atomics", "shared_memory", "inline_ptx", "warp_intrinsics", "tensor_cores")
_HOST_DEVICE = re.compile(r"\b__host__\s+(?:__forceinline__\s+|inline\s+)?__device__\b|\b__device__\s+(?:__forceinline__\s+|inline\s+)?__host__\b")
_DEVICE_ONLY = re.compile(r"\b(?:__device__|CUTLASS_DEVICE|CUTE_DEVICE)\b")
_MACRO = re.compile(r"^[ \t]*#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*", re.M)


def device_code(code: str, stats: CudaStats) -> bool:
    """Does a CUDA source with no kernel hold device code of its own (CudaStats.device_code)? A macro's
    body is text the including kernel expands (a `CUDA_GET_THREAD_ID` macro reads threadIdx in that
    kernel), so the thread index counts only outside `#define`s."""
    if any(stats.features.get(k) for k in _DEVICE_FEATURES):
        return True
    if _DEVICE_ONLY.search(_HOST_DEVICE.sub(" ", code)):
        return True
    return stats.thread_index and bool(_THREAD_INDEX.search(_MACRO.sub(" ", code)))


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.M)
# CMake commands that define something built; a file without one only sets options.
_CMAKE_TARGET = re.compile(
    r"(?i)\b(add_library|add_executable|cuda_add_library|cuda_add_executable|pybind11_add_module"
    r"|nanobind_add_module|python_add_library|target_sources|add_subdirectory)\s*\("
)
# a path starts where a token starts, so a long token is tried once (not once per character)
_CMAKE_SOURCE = re.compile(r"(?<![\w${}./*+\-])[\w${}./*+\-]+\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp|hh|inl)\b")
_CMAKE_HERE = re.compile(r"\$\{(CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR|PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}/?")


def build_facts(code: str, cmake: bool) -> dict:
    """What a build needs to know: a C/C++ file's includes; a CMake file's targets and sources,
    and the CUDA programs it builds.

    CMake source paths are patterns relative to the CMake file's directory; a variable other than
    the current directory becomes `**` (reach.py matches patterns against the scanned files).
    """
    if not cmake:
        includes = sorted(set(_INCLUDE.findall(code)))
        return {"includes": includes} if includes else {}
    sources = []
    line_of = line_finder(code)
    for m in _CMAKE_SOURCE.finditer(code):
        path = re.sub(r"\$\{[^}]*\}", "**", _CMAKE_HERE.sub("", m.group(0)))
        sources.append([line_of(m.start()), path])
    return {"cmake_build": bool(_CMAKE_TARGET.search(code)), "cmake_sources": sources, **cmake_programs(code)}


_CMAKE_COMMAND = re.compile(r"\b([A-Za-z_]\w*)[ \t]*\(")
_CMAKE_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s"]+)')
# add_executable / target_sources arguments that are not sources.
_CMAKE_KEYWORDS = frozenset({
    "WIN32", "MACOSX_BUNDLE", "EXCLUDE_FROM_ALL", "PRIVATE", "PUBLIC", "INTERFACE", "FILE_SET", "TYPE",
    "BASE_DIRS", "FILES", "HEADERS", "CXX_MODULES", "OPTIONS",
})
_CMAKE_VAR = re.compile(r"^\$\{(\w+)\}$")


def cmake_commands(code: str) -> list[tuple[str, list[str], int]]:
    """(command in lower case, arguments, line) of comment-free CMake code; nested parentheses
    and quoted arguments are kept whole, variables as written."""
    out = []
    pos = 0
    line_of = line_finder(code)
    while True:
        m = _CMAKE_COMMAND.search(code, pos)
        if m is None:
            return out
        depth, i, quote = 0, m.end() - 1, False
        while i < len(code):
            ch = code[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    quote = False
            elif ch == '"':
                quote = True
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        body = code[m.end() : i]
        args = [mm.group(1) if mm.group(2) is None else mm.group(2) for mm in _CMAKE_ARG.finditer(body)]
        out.append((m.group(1).lower(), args, line_of(m.start())))
        pos = i + 1


def cmake_programs(code: str) -> dict:
    """{"programs": [...]}: executables built with CUDA (a `.cu` source, a `cuda_add_executable`,
    or a project that enables the CUDA language); `cuda` says whether a CUDA source is listed."""
    commands = cmake_commands(code)
    lists: dict[str, list[str]] = {}
    cuda_language = False
    executables: dict[str, dict] = {}
    for name, args, line in commands:
        if name in ("set", "file", "list") and len(args) >= 2:
            if name == "set":
                lists[args[0]] = args[1:]
            elif name == "file" and args[0].upper() in ("GLOB", "GLOB_RECURSE"):
                lists[args[1]] = [a for a in args[2:] if a.upper() not in ("CONFIGURE_DEPENDS", "LIST_DIRECTORIES")]
            elif name == "list" and args[0].upper() == "APPEND" and len(args) >= 3:
                lists.setdefault(args[1], []).extend(args[2:])
        elif name == "project":
            cuda_language = cuda_language or "CUDA" in args[1:]
        elif name == "enable_language":
            cuda_language = cuda_language or "CUDA" in args
        elif name in ("add_executable", "cuda_add_executable") and args:
            if len(args) > 1 and args[1] in ("IMPORTED", "ALIAS"):
                continue
            srcs = [_CMAKE_HERE.sub("", a) for a in args[1:] if a not in _CMAKE_KEYWORDS]
            executables[args[0]] = {"name": args[0], "line": line, "sources": srcs, "tool": "cmake",
                                    "forced": name == "cuda_add_executable"}
        elif name == "target_sources" and args and args[0] in executables:
            executables[args[0]]["sources"].extend(_CMAKE_HERE.sub("", a) for a in args[1:] if a not in _CMAKE_KEYWORDS)

    def is_cuda(src: str) -> bool:
        m = _CMAKE_VAR.match(src)
        values = lists.get(m.group(1), []) if m else [src]
        return any(v.endswith((".cu", ".cuh")) for v in values)

    programs = []
    for exe in executables.values():
        forced = exe.pop("forced")
        cuda = any(is_cuda(s) for s in exe["sources"])
        if cuda or cuda_language or forced:
            programs.append({**exe, "cuda": cuda})
    programs.sort(key=lambda p: (p["line"], p["name"]))
    return {"programs": programs}


# CMake conditions that only hold on another platform, or for one exact toolchain version (a workaround).
_PLATFORM = re.compile(r"(?i)^(?:WIN32|MSVC|APPLE|CYGWIN|MINGW|\w*(?:WINDOWS|_WIN32|MSVC|APPLE|MACOS|DARWIN)\w*)$")
_PLATFORM_NAMES = (("WIN", "Windows"), ("MSVC", "Windows"), ("MINGW", "Windows"), ("CYGWIN", "Windows"),
                   ("APPLE", "macOS"), ("MACOS", "macOS"), ("DARWIN", "macOS"))
_EXACT_VERSION = ("EQUAL", "VERSION_EQUAL", "STREQUAL")


def cmake_options(commands: list) -> dict[str, bool]:
    """option(NAME "help" [ON|OFF]) -> its default (CMake's is OFF)."""
    out = {}
    for name, args, _line in commands:
        if name == "option" and args:
            out[args[0]] = len(args) > 2 and args[2].upper() in ("ON", "TRUE", "YES", "1")
    return out


def _term_gate(term: list[str], negated: bool, options: dict[str, bool]) -> tuple[str, str] | None:
    """(where, feature) when a branch taken on `term` (or on its negation) is not the default Linux
    build: an option that defaults to OFF, another platform, one exact version of a tool."""
    shown = " ".join(term)
    if len(term) == 1:
        var = _CMAKE_VAR.match(term[0])
        var = var.group(1) if var else term[0]
        if var in options and not options[var] and not negated:
            return f"a build with `{var}` ON (`option({var} ... OFF)`)", var
        if _PLATFORM.match(var) and not negated:
            os_name = next((n for k, n in _PLATFORM_NAMES if k in var.upper()), "another platform")
            return f"{os_name} (`if({shown})`)", "platform"
    if len(term) == 3 and term[1].upper() in _EXACT_VERSION and "VERSION" in term[0].upper() and not negated:
        return f"one toolchain version (`if({shown})`, a workaround)", "workaround"
    return None


def _cond_gate(args: list[str], options: dict[str, bool], else_branch: bool = False) -> tuple[str, str] | None:
    """The gate of an if() branch (or of its else()): any AND-ed term that is not the default build."""
    if any(a.upper() == "OR" for a in args):
        return None
    terms: list[tuple[list[str], bool]] = []
    cur: list[str] = []
    negated = False
    for a in args + ["AND"]:
        if a.upper() == "AND":
            if cur:
                terms.append((cur, negated))
            cur, negated = [], False
        elif a.upper() == "NOT" and not cur:
            negated = not negated
        else:
            cur.append(a)
    if else_branch:  # else() of a single-term if: the branch runs when the term does not hold
        if len(terms) != 1:
            return None
        terms = [(terms[0][0], not terms[0][1])]
    for term, neg in terms:
        gate = _term_gate(term, neg, options)
        if gate is not None:
            return gate
    return None


def cmake_gates(code: str) -> list[tuple[int, int, str, str]]:
    """(first line, last line, where, feature) of the CMake branches that the default build on
    Linux does not take: if(OPTION) with the option OFF by default, if(WIN32), if(X_VERSION EQUAL n)."""
    commands = cmake_commands(code)
    options = cmake_options(commands)
    out: list[tuple[int, int, str, str]] = []
    stack: list[list] = []  # [if args, branch start line, gate of the open branch]
    for name, args, line in commands:
        if name == "if":
            stack.append([args, line, _cond_gate(args, options)])
        elif name in ("elseif", "else", "endif") and stack:
            top = stack[-1]
            if top[2] is not None:
                out.append((top[1], line - 1 if name != "endif" else line, *top[2]))
            if name == "endif":
                stack.pop()
            elif name == "elseif":
                top[1], top[2] = line, _cond_gate(args, options)
            else:
                top[1], top[2] = line, _cond_gate(top[0], options, else_branch=True)
    return out


# A C/C++ file that uses CUDA: an API call, type, namespace or device intrinsic beyond the include lines
# (version macros such as CUDA_VERSION are not use).
_CUDA_USE = re.compile(r"\b(?:cuda|cublas\w*|cudnn|curand|cusparse|cufft|cusolver|nccl|nvrtc|cu)[A-Z]\w*"
                       r"|\b(?:at|c10)::cuda::|\b(?:cub|thrust|cutlass|cute|wmma|nvcuda)::|<<<|\b__(?:global|device|shared)__\b"
                       r"|\b__(?:half|nv_|float2|half2|bfloat16|ldg|syncthreads|shfl)\w*|\bhalf2\b")
_PP_IF = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


def preprocessor_gates(code: str) -> list[tuple[int, int, str]]:
    """(first line, last line, condition) of the first branch of each #if/#ifdef that is not negated."""
    out = []
    stack: list[list] = []  # [directive, condition, branch start]
    for n, line in enumerate(code.splitlines(), start=1):
        m = _PP_IF.match(line)
        if not m:
            continue
        word, rest = m.group(1), " ".join(m.group(2).split())
        if word in ("if", "ifdef", "ifndef"):
            stack.append([word, rest, n])
        elif stack:
            top = stack.pop()
            # an include guard, a negated switch (`#ifndef CPU_ONLY`) or an #else is the default build
            if top[0] in ("if", "ifdef") and "!" not in top[1]:
                out.append((top[2], n, f"#{top[0]} {top[1]}"))
            if word != "endif":
                stack.append(["else", top[1], n])
    return out


def native_kind(name: str) -> str | None:
    if name in CMAKE_NAMES or name.endswith(CMAKE_SUFFIXES):
        return "cmake"
    if name.endswith(NATIVE_SUFFIXES):
        return "native"
    return None


@dataclass
class NativeHit:
    rule: object
    clause: object
    line: int
    symbol: str
    snippet: str
    details: dict


# What makes a CUDA file without a `__global__` kernel a port unit of its own: device-parallel code,
# a kernel launch, or calls into a CUDA library. Offset, stride and device-property helpers are not:
# they go away with the kernels and the extension they serve.
_WORK_FEATURES = ("launches", "atomics", "shared_memory", "inline_ptx", "warp_intrinsics", "tensor_cores")
_WORK_LIBRARIES = ("cub", "thrust", "cublas", "cudnn", "curand", "nccl")
# parallel device code reads which thread, warp or block it runs on; a helper computes from its arguments
_THREAD_INDEX = re.compile(r"\b(?:threadIdx|blockIdx|blockDim|gridDim|warpSize)\b|\bcanonical_(?:warp|lane|warp_group)_idx\w*\s*\(|%laneid")
# a launcher (a stream to launch on) or a CUTLASS-style kernel (a device `operator()(Params ...)`)
_LAUNCHER = re.compile(r"\bcudaStream_t\b|\bcu(?:da)?Launch\w*\s*\(|\bgetCurrentCUDAStream\s*\(|\bCUTLASS_GLOBAL\b"
                       r"|\b(?:CUTLASS_DEVICE|CUTE_DEVICE|__device__)\s+void\s+operator\s*\(\)\s*\(\s*(?:const\s+)?Params\b")


# What a `.cu` names when it instantiates CUTLASS device code (`cutlass::gemm::device::GemmGrouped`,
# `cutlass::epilogue::thread::...`, `cutlass::device_kernel`); its host types (`cutlass::layout::RowMajor`,
# `TensorRef`, `MatrixCoord`, `half_t`) compile no kernel.
_CUTLASS_KERNEL = re.compile(r"\bcutlass::(?:\w+::)*(?:device|kernel|threadblock|warp|thread|collective|arch|epilogue)::"
                             r"|\bcutlass::device_kernel\b|\bCUTLASS_(?:DEVICE|GLOBAL)\b")


def device_work(name: str, code: str, stats: CudaStats) -> bool:
    """Does this CUDA file hold work a porting engineer counts (see _WORK_FEATURES)? A `.cu` that
    instantiates CUTLASS device templates compiles kernels; one that only uses CUTLASS's host types
    or CuTe layouts does not."""
    if stats.kernels or any(stats.features.get(k) for k in _WORK_FEATURES) or stats.thread_index:
        return True
    if any(lib in _WORK_LIBRARIES for lib in stats.libraries):
        return True
    if name.endswith(".cu") and _CUTLASS_KERNEL.search(code):
        return True
    return bool(_LAUNCHER.search(code))


# a header is included into the kernels' translation units; the CUDA runtime API is host work of its own
HEADER_SUFFIXES = (".cuh", ".h", ".hpp", ".hh", ".inl")
_DEVICE_CODE = re.compile(r"\b(?:__device__|CUTLASS_DEVICE|CUTLASS_HOST_DEVICE|CUTE_DEVICE|CUTE_HOST_DEVICE)\b")
_RUNTIME_CALL = re.compile(r"\bcuda[A-Z]\w*\s*\(|<<<")


def helper_header(name: str, code: str, stats: CudaStats) -> bool:
    """A header with no `__global__` kernel, no launch or stream, no call into a CUDA library or the
    CUDA runtime, and no parallel device code of its own (no thread or block index, no shared memory)
    holds `__device__` helpers, macros and types that compute from their arguments, for the kernels
    that include it (torch-scatter's atomics.cuh): they are ported with those kernels, so the header
    is not a kernel port unit of its own (NR1703); a host rule may still count it as the extension's
    code. A header that holds a kernel's body as a device function (it reads threadIdx) stays."""
    if not name.endswith(HEADER_SUFFIXES) or stats.kernels or stats.features.get("shared_memory"):
        return False
    if not _DEVICE_CODE.search(code):
        return False  # host declarations (a cuBLAS handle in a struct, a bf16 prototype): host code
    if stats.thread_index:
        return False
    if any(lib in _WORK_LIBRARIES for lib in stats.libraries):
        return False
    return not (_LAUNCHER.search(code) or _RUNTIME_CALL.search(code))


def _enclosing(gates: list, line: int):
    """The innermost gate (first line, last line, ...) around a line, or None."""
    inside = [g for g in gates if g[0] <= line <= g[1]]
    return max(inside, key=lambda g: g[0]) if inside else None


def _quoted_include(line: str) -> str | None:
    m = re.match(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', line)
    return m.group(1) if m else None


def _file_gate(code: str, matched: list[int], lines: list[str]) -> dict:
    """A file whose CUDA is only includes inside `#ifdef WITH_CUDA`-style branches, and which uses no
    CUDA beyond them, compiles unchanged in a build without CUDA: listed as running only in that build."""
    gates = preprocessor_gates(code)
    where = [_enclosing(gates, n) for n in matched]
    if not where or any(w is None for w in where):
        return {}
    skip = set(matched)
    body = "\n".join(line for n, line in enumerate(lines, start=1) if n not in skip and not _PP_IF.match(line))
    if _CUDA_USE.search(body):
        return {}
    cond = where[0][2]
    return {"only_on": f"a build that sets `{cond.split(None, 1)[-1]}` (`{cond}`)", "only_on_feature": "cuda-build"}


def scan_native(name: str, text: str, entries: list) -> tuple[list[NativeHit], dict]:
    """Hits of native-kind clauses in one file, and facts (is it CUDA, its kernel stats).

    A kernel-costed rule (NR1703) skips CUDA files with no work of their own (device_work); a
    CMake line in a branch the default build skips (cmake_gates) and a host file whose CUDA sits only
    under `#ifdef` (_file_gate) carry `only_on`; a per-file hit made only of quoted includes records
    them (`quoted_includes`): context.py drops it when they name files of the repository."""
    cmake = native_kind(name) == "cmake"
    code = blank_hash_comments(text) if cmake else blank_c_comments(text)
    cuda = (not cmake) and is_cuda_source(name, code)
    facts: dict = {"cuda": cuda, **build_facts(code, cmake)}
    stats = cuda_stats(code) if cuda else None
    if stats is not None:
        facts["kernels"] = len(stats.kernels)
    lines = code.splitlines()
    raw_lines = text.splitlines()
    hits: list[NativeHit] = []
    gates: list | None = None if cmake else []  # read on the first CMake hit: most CMake files have none
    for rule, clause in entries:
        globs = clause.files or (("*.cu", "*.cuh", "*.cpp", "*.cc", "*.cxx", "*.c", "*.h", "*.hpp", "*.hh", "*.inl"))
        if not any(fnmatch.fnmatchcase(name, g) for g in globs):
            continue
        if clause.cuda_only and not cuda:
            continue
        rxs = [re.compile(r) for r in clause.regex]
        costing = getattr(rule, "costing", "")
        if clause.per == "file":
            matched = [i for i, line in enumerate(lines, start=1) if any(rx.search(line) for rx in rxs)]
            if not matched:
                continue
            if costing == "cuda-kernel" and stats is not None and not device_work(name, code, stats):
                continue
            if costing == "cuda-kernel" and stats is not None and helper_header(name, code, stats):
                continue
            first = matched[0]
            details = stats.details() if stats is not None else {}
            if stats is not None and stats.kernels:
                first = stats.kernels[0].line
            if costing == "cuda-host":
                details.update(_file_gate(code, matched, lines))
                quoted = [_quoted_include(lines[n - 1]) for n in matched]
                if all(quoted):
                    details["quoted_includes"] = sorted(set(quoted))
            hits.append(NativeHit(rule, clause, first, name, _snip(raw_lines, first), details))
        else:
            for i, line in enumerate(lines, start=1):
                for rx in rxs:
                    m = rx.search(line)
                    if m:
                        gates = cmake_gates(code) if gates is None else gates
                        gate = _enclosing(gates, i)
                        details = {"only_on": gate[2], "only_on_feature": gate[3]} if gate else {}
                        hits.append(NativeHit(rule, clause, i, m.group(0).strip(), _snip(raw_lines, i), details))
                        break
    return hits, facts


def _snip(lines: list[str], line: int) -> str:
    if 0 < line <= len(lines):
        return " ".join(lines[line - 1].split())[:160]
    return ""
