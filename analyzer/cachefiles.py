"""The files of a cache directory: sealed entries, written atomically, read without trust.

A cache directory may be shared, copied from elsewhere or written by another user, so nothing read
from it is believed until it is proven to be ours: every entry carries an HMAC-SHA256 seal made
with a per-user secret key kept in the directory (`key`, mode 0600, created once; the first of two
concurrent scans to create it wins). An entry whose seal does not check (truncated, edited,
written with another key, by another format or another tool) is a miss, never an error; so is a
symbolic link (it may point outside the directory), and so is every entry when the key file is
not a private regular file of the current user (it is then replaced when the scan writes).

Files are replaced atomically (temporary file + rename), so concurrent scans can share a
directory: a reader sees a whole old entry or a whole new one.
"""

from __future__ import annotations

import hmac
import os
import stat
import tempfile
from pathlib import Path

KEY_NAME = "key"
KEY_BYTES = 32
SEAL = b"NRSEAL1 "  # then the hex HMAC of the body and a newline, then the body
_SEAL_LEN = len(SEAL) + 64 + 1
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by neuron-ready.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _read_private(path: str, size: int | None = None) -> tuple[bytes, int] | None:
    """(bytes, mtime_ns) of a regular file that is not a symbolic link, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if size is not None:  # the key: ours alone
            if st.st_size != size or st.st_mode & 0o077 or st.st_uid != _uid():
                return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(), st.st_mtime_ns
    except OSError:
        return None
    finally:
        os.close(fd)


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


class CacheFiles:
    """Sealed files under one cache directory. Reading never raises; the first failed write turns
    writing off for the run and leaves the reason in `error` (one warning)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self._dir = str(self.dir)
        self._key: bytes | None = None
        self._key_checked = False
        self._prepared = False
        self.error: str | None = None

    def path(self, *parts: str) -> str:
        return os.path.join(self._dir, *parts)  # strings: this runs once per file

    # ------------------------------------------------------------------------------------- seals

    def _seal(self, key: bytes, body: bytes) -> bytes:
        return hmac.new(key, body, "sha256").hexdigest().encode()

    def read(self, path: str) -> tuple[bytes, int] | None:
        """(body, the file's mtime_ns) of a sealed entry, or None for anything else."""
        key = self.key()
        if key is None:
            return None
        got = _read_private(path)
        if got is None:
            return None
        raw, mtime = got
        if len(raw) < _SEAL_LEN or not raw.startswith(SEAL) or raw[_SEAL_LEN - 1:_SEAL_LEN] != b"\n":
            return None
        body = raw[_SEAL_LEN:]
        if not hmac.compare_digest(raw[len(SEAL):_SEAL_LEN - 1], self._seal(key, body)):
            return None
        return body, mtime

    def write(self, path: str, body: bytes) -> bool:
        if self.error is not None:
            return False
        try:
            self._prepare()
            key = self.key(create=True)
            assert key is not None
            directory = os.path.dirname(path)
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(SEAL + self._seal(key, body) + b"\n" + body)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as e:
            self.error = f"cannot write the cache in {self.dir}: {e.strerror or e}; continuing without it"
            return False
        return True

    # --------------------------------------------------------------------------------------- key

    def key(self, create: bool = False) -> bytes | None:
        if self._key is None and (create or not self._key_checked):
            self._key_checked = True
            got = _read_private(self.path(KEY_NAME), KEY_BYTES)
            self._key = got[0] if got is not None else None
            if self._key is None and create:
                self._key = self._create_key()
        return self._key

    def _create_key(self) -> bytes:
        """A new secret; when another scan made one first, theirs (entries stay shared)."""
        target = self.path(KEY_NAME)
        fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=".tmp-key-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(KEY_BYTES))
            try:
                os.link(tmp, target)  # never replaces: the first key made wins
            except FileExistsError:
                if _read_private(target, KEY_BYTES) is None:  # not a key of ours: replace it
                    os.replace(tmp, target)
            except OSError:  # no hard links on this file system: the last key made wins
                os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        got = _read_private(target, KEY_BYTES)
        if got is None:
            raise OSError(f"{target} is not a private file of this user")
        return got[0]

    def _prepare(self) -> None:
        if self._prepared:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# Created by neuron-ready.\n*\n")):
            p = self.dir / name
            if not p.exists():
                p.write_text(text, encoding="utf-8")
        self._prepared = True
