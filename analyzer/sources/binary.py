"""Prebuilt shared libraries: an ELF `.so` that carries CUDA device code, shipped without its source.

Some packages ship their kernels only as compiled libraries loaded at run time with ctypes
(bitsandbytes' `libbitsandbytes_cuda*.so`). A source scanner sees only the Python wrapper, so the
port would look like a wrapper change. The ELF file says more, read with pyelftools (headers, the
section table and the dynamic symbol table; never the code): a `.nv_fatbin` section (or nvcc's
`__nv_relfatbin`, `__nv_module_id`) holds CUDA device code, and NEEDED entries name the CUDA runtime
libraries. Its exported C functions are the API the wrapper calls: one op each (dtype variants fold
into one op later, in the effort model's `op_stem`).

Every byte is hostile: a file that is not ELF, or whose tables are cut or inconsistent, gives a
diagnostic reason instead of facts, and at most MAX_SYMBOLS symbols are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

MAX_SYMBOLS = 200_000  # a real library exports thousands; past this the table is not trusted
MAX_LIBRARY_SIZE = 512 * 1024 * 1024  # read whole for the cache key (bitsandbytes' are 6-26 MiB)
_SHARED_LIBRARY = re.compile(r"\.so(\.\d+)*$")
# nvcc's sections for embedded device code (fat binaries, relocatable device code).
CUDA_SECTIONS = frozenset({".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment", "__nv_module_id"})
_CUDA_NEEDED = re.compile(r"^lib(cudart|cublas|cublasLt|cusparse|cufft|curand|cusolver|cudnn|nccl|nvrtc)\b")
# Symbols a CUDA library exports that are not its own API: the runtime's registration hooks, C++
# (mangled) names and the CUDA runtime when it is linked in statically.
_NOT_API = re.compile(r"^(_|cuda[A-Z]|cu[A-Z]|nvrtc|cublas|cusparse|curand|cufft|cudnn|nccl)")


def binary_kind(name: str) -> str | None:
    return "binary" if _SHARED_LIBRARY.search(name) else None


@dataclass
class BinaryFacts:
    cuda: bool = False  # carries CUDA device code or links the CUDA runtime libraries
    evidence: list[str] = field(default_factory=list)  # what says so: section or library names
    exports: list[str] = field(default_factory=list)  # its exported C functions, sorted


class NotReadable(Exception):
    """The file is not an ELF shared library this scanner can read; the message says why."""


def read_binary(fh) -> BinaryFacts:
    """What a prebuilt library carries, from the open binary file fh. Raises NotReadable."""
    try:
        elf = ELFFile(fh)
        facts = BinaryFacts()
        exports: set[str] = set()
        seen = 0
        for section in elf.iter_sections():
            if section.name in CUDA_SECTIONS:
                facts.evidence.append(section.name)
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags("DT_NEEDED"):
                    if _CUDA_NEEDED.match(tag.needed):
                        facts.evidence.append(tag.needed)
            if section.name == ".dynsym" and isinstance(section, SymbolTableSection):
                for sym in section.iter_symbols():
                    seen += 1
                    if seen > MAX_SYMBOLS:
                        raise NotReadable(f"more than {MAX_SYMBOLS} dynamic symbols; not read")
                    if (sym["st_info"]["type"] == "STT_FUNC" and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                            and sym["st_shndx"] != "SHN_UNDEF" and sym.name and not _NOT_API.match(sym.name)):
                        exports.add(sym.name)
    except NotReadable:
        raise
    except (ELFError, ValueError, KeyError, IndexError, UnicodeDecodeError, OSError, AssertionError) as e:
        raise NotReadable(f"not a readable ELF shared library ({type(e).__name__}: {e})") from None
    facts.cuda = bool(facts.evidence)
    facts.evidence = sorted(set(facts.evidence))
    facts.exports = sorted(exports)
    return facts
