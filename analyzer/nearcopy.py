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
import zlib
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


def copy_of(fp: frozenset[int], earlier: list[tuple[frozenset[int], Any]]) -> Any:
    """The key of the earlier sketch this one is a near-copy of (the most similar at or above
    THRESHOLD, the first of equals), or None."""
    best, key = THRESHOLD, None
    for other, k in earlier:
        # cheap bound first: the estimate never exceeds the shared hashes over the sample size
        if len(fp & other) < THRESHOLD * min(SKETCH, len(fp | other)):
            continue
        s = similarity(fp, other)
        if s > best or (s >= best and key is None):
            best, key = s, k
    return key
