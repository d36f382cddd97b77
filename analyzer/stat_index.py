"""The stat index: what each file of a scanned root looked like (size, mtime, inode, ctime) when its
content digest was taken, so an unchanged file is neither read nor hashed again (Ruff's cache and
git's index do the same).

A timestamp only proves a file unchanged if no later write can leave it as it was: a write in the
same clock tick as the stat (one second on some file systems) may. As in git, an entry whose
mtime or ctime is within RACY_NS of the moment the index was written (the index file's own mtime,
on the file system's clock) is "racily clean" and its file is read and hashed again; the index is
then rewritten, so it is trusted from the next scan on. ctime is in the stamp because a tool that
restores an old mtime (`cp -p`, `touch -d`) cannot restore it.

One sealed index file per root (cachefiles.py); an index that does not check, or any entry of the
wrong shape, makes the whole index a miss. Concurrent scans may each rewrite it: every entry
states a stat and the digest of bytes read after that stat, so any version of it is true.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import NamedTuple

from .cachefiles import CacheFiles

FORMAT = 1
RACY_NS = 2_000_000_000  # FAT's 2 s timestamps are the coarsest in use; ext4, xfs and btrfs: 1 ns
_DIGEST = re.compile(r"[0-9a-f]{64}\Z")


class Stamp(NamedTuple):
    size: int
    mtime_ns: int
    ino: int
    ctime_ns: int

    def racy(self, written_ns: int) -> bool:
        return max(self.mtime_ns, self.ctime_ns) >= written_ns - RACY_NS


def stamp_of(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return Stamp(st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


class StatIndex:
    def __init__(self, files: CacheFiles, root: str) -> None:
        self.files = files
        self.root = os.path.abspath(root)
        name = hashlib.sha256(self.root.encode("utf-8", "surrogateescape")).hexdigest()
        self._path = files.path(f"index-v{FORMAT}", name)
        self.entries: dict[str, tuple[Stamp, str]] = {}
        self.changed = False
        self._load()

    def _load(self) -> None:
        got = self.files.read(self._path)
        if got is None:
            return
        body, written = got
        try:
            doc = json.loads(body)
            if doc["format"] != FORMAT or doc["root"] != self.root:
                return
            entries = {}
            for rel, (size, mtime, ino, ctime, digest) in doc["entries"].items():
                if not all(type(v) is int for v in (size, mtime, ino, ctime)) or not _DIGEST.match(digest):
                    return
                st = Stamp(size, mtime, ino, ctime)
                if st.racy(written):
                    self.changed = True  # its file is hashed again; the rewrite makes it trusted
                    continue
                entries[rel] = (st, digest)
        except Exception:  # noqa: BLE001 - any other shape: the whole index is a miss
            return
        self.entries = entries

    def digest(self, rel: str, stamp: Stamp | None) -> str | None:
        """The content digest recorded for this file if it is unchanged since, else None."""
        entry = self.entries.get(rel)
        return entry[1] if entry is not None and stamp is not None and entry[0] == stamp else None

    def record(self, rel: str, stamp: Stamp | None, digest: str) -> None:
        """`stamp` must have been taken before the bytes behind `digest` were read."""
        if stamp is not None and self.entries.get(rel) != (stamp, digest):
            self.entries[rel] = (stamp, digest)
            self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        doc = {"format": FORMAT, "root": self.root,
               "entries": {rel: [*st, digest] for rel, (st, digest) in sorted(self.entries.items())}}
        self.files.write(self._path, json.dumps(doc, separators=(",", ":")).encode())
        self.changed = False
