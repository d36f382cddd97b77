"""Near-copies of a kernel by content: a small fingerprint of its body, and how alike two are.

A kernel's body is read as a stream of tokens whose identifiers and literals are normalised (the
scanner that reads it decides which names are API and stay), so a copy with its variables renamed or
its block sizes changed reads the same. Its SHINGLE-token shingles are hashed with zlib.crc32 (the
same value on every run, worker and machine, unlike hash()) and the SKETCH smallest distinct hashes
are kept: a bottom-k sketch (Broder, "On the resemblance and containment of documents", 1997), a
fixed handful of ints per kernel for the cache and the report. Two sketches estimate the Jaccard
similarity of the two shingle sets; below SKETCH shingles each the estimate is exact.

THRESHOLD follows the clone-detection literature for near-miss (type-3) clones, copies with small
edits: NiCad's default dissimilarity of 0.3 (Roy and Cordy, 2008) and SourcererCC's 70 % token
overlap (Sajnani et al., 2016); Allamanis ("The adverse effects of code duplication in machine
learning models of code", 2019) calls files near-duplicates at a Jaccard of 0.7 on token multisets.
Shingles of five tokens (as in the BigCode near-deduplication of The Stack) are stricter than single
tokens: one edited token changes five shingles.
"""

from __future__ import annotations

import functools
import heapq
import math
import zlib
from collections import Counter, defaultdict
from typing import Any, Iterable

SHINGLE = 5  # tokens per shingle
SKETCH = 64  # hashes kept per kernel
THRESHOLD = 0.7  # estimated Jaccard at or above which a kernel is a near-copy of another
_WIDTH = 8  # hex digits per 32-bit hash in the stored fingerprint


@functools.lru_cache(maxsize=4096)
def _token_bytes(token: str) -> bytes:
    return zlib.crc32(token.encode()).to_bytes(4, "little")


def fingerprint(tokens: Iterable[str]) -> str:
    """The bottom-SKETCH sketch of the token shingles, as one hex string (ascending hashes). Each token
    is hashed once; a shingle's hash is the crc32 of its tokens' hashes (a slice of one byte string)."""
    stream = b"".join(_token_bytes(t) for t in tokens)
    n = len(stream) // 4
    width = 4 * SHINGLE
    shingles = {zlib.crc32(stream[i:i + width]) for i in range(0, 4 * max(n - SHINGLE + 1, 1), 4)} if n else set()
    return "".join(f"{h:0{_WIDTH}x}" for h in heapq.nsmallest(SKETCH, shingles))


def hashes(fp: str) -> frozenset[int]:
    """The sketch a fingerprint string holds ('' or malformed: nothing)."""
    try:
        return frozenset(int(fp[i:i + _WIDTH], 16) for i in range(0, len(fp) - _WIDTH + 1, _WIDTH))
    except ValueError:
        return frozenset()


def similarity(a: frozenset[int], b: frozenset[int]) -> float:
    """Estimated Jaccard similarity of the shingle sets behind two sketches: the share of the union's
    SKETCH smallest hashes that both hold. Two empty sketches are not alike (nothing to compare)."""
    if not a or not b:
        return 0.0
    both = a & b
    if not both:
        return 0.0
    union = a | b
    sample = heapq.nsmallest(SKETCH, union) if len(union) > SKETCH else union
    return sum(1 for h in sample if h in both) / len(sample)


class Sketches:
    """Sketches with their keys, in the order added, indexed so that copy_of reads only those that
    can pass its bound: prefix filtering with its positional bound (Chaudhuri et al., 2006; Xiao et
    al., "Efficient similarity joins for near duplicate detection", 2008; SourcererCC's filter).
    copy_of needs two sketches to share o >= THRESHOLD * min(SKETCH, |union|) >= t = floor(THRESHOLD *
    min(SKETCH, |own|)) hashes each. Read in one fixed order, two sets sharing o hashes meet first at
    a hash at most |own| - o + 1 deep in each (the prefix indexed), and share at most 1 + the fewer
    hashes either has after it. Exact: the same answer as the pass over a list of every earlier kernel.
    The order puts the hashes rarest among `known` first (boilerplate shingles most kernels share
    last), so that fewer kernels share a prefix hash."""

    def __init__(self, known: Iterable[frozenset[int]] = ()) -> None:
        # the fixed order: rarest first among the sketches the caller will add and ask about, then
        # the larger hash first (a bottom-k sketch keeps the small ones: the larger are less often shared)
        self._count = Counter(h for fp in known for h in fp)
        self._entries: list[tuple[frozenset[int], Any]] = []
        self._needed: list[int] = []  # each entry's t
        self._by_hash: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)  # hash -> (entry, depth)

    @staticmethod
    def _needed_of(fp: frozenset[int]) -> int:
        # floor, not ceil: a float product a hair over an integer must not raise the bound
        return max(1, math.floor(THRESHOLD * min(SKETCH, len(fp))))

    def _prefix(self, fp: frozenset[int], needed: int) -> list[int]:
        return sorted(fp, key=lambda h: (self._count[h], -h))[:len(fp) - needed + 1]

    def append(self, entry: tuple[frozenset[int], Any]) -> None:
        needed = self._needed_of(entry[0])
        for depth, h in enumerate(self._prefix(entry[0], needed)):
            self._by_hash[h].append((len(self._entries), depth))
        self._needed.append(needed)
        self._entries.append(entry)

    def __iter__(self):
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def candidates(self, fp: frozenset[int]) -> list[tuple[frozenset[int], Any]]:
        """The entries that can share enough hashes with fp, in the order added (copy_of's ties go to
        the first)."""
        needed = self._needed_of(fp)
        seen: set[int] = set()
        kept: list[int] = []
        for depth, h in enumerate(self._prefix(fp, needed)):
            for i, other_depth in self._by_hash.get(h, ()):
                if i in seen:
                    continue
                seen.add(i)  # the first hash both hold: what follows it bounds what they share
                most = 1 + min(len(fp) - depth - 1, len(self._entries[i][0]) - other_depth - 1)
                if most >= max(needed, self._needed[i]):
                    kept.append(i)
        return [self._entries[i] for i in sorted(kept)]


def copy_of(fp: frozenset[int], earlier: Sketches | list[tuple[frozenset[int], Any]]) -> Any:
    """The key of the earlier sketch this one is a near-copy of (the most similar at or above
    THRESHOLD, the first of equals), or None."""
    best, key = THRESHOLD, None
    for other, k in (earlier.candidates(fp) if isinstance(earlier, Sketches) else earlier):
        # cheap bound first: the estimate never exceeds the shared hashes over the sample size
        shared = len(fp & other)
        if shared < THRESHOLD * min(SKETCH, len(fp) + len(other) - shared):  # |fp | other|, not built
            continue
        s = similarity(fp, other)
        if s > best or (s >= best and key is None):
            best, key = s, k
    return key
