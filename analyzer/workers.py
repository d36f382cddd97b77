"""Scan files in supervised worker processes: a worker that dies or runs past the per-file time
limit is replaced, and only the file it was on is reported, as a diagnostic.

libcst's native parser can run for minutes on some machine-generated code, or overflow its stack
and take the process down (`x = not \\` repeated 30,000 times does). concurrent.futures turns one
dead worker into a broken pool and cannot stop a task stuck in native code, so this is a small
manager over multiprocessing: one pipe per worker, one file at a time, and a deadline per file.

Scheduling: largest files first (the last file to finish decides the wall time), but a libcst tree
takes about 600 bytes of memory per byte of source (a 1.4 MB file: 800 MB), so files start only
while the source being parsed at once stays under a budget; one file alone may exceed it, and
small files always start, so no core idles behind a large one. A worker exits after libcst parsed
a large tree (a fresh fork costs milliseconds; the ast screen often leaves libcst a fraction of a
large file, and nothing of most files): arenas that keep a few survivors of a freed tree stay
mapped. On torch's largest files, recycling and the 1 MB budget took the peak (PSS of all
processes) from 1,032 MiB to 807 MiB.

The main process stays free of threads (progress is redrawn from the supervising loop), so workers
are forked on Linux: they start in milliseconds with the catalog index already built.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Callable

from .cache import Keys, encode_result
from .model import Diagnostic
from .sources import FileJob, FileResult, ScanContext, libcst_chars, load_scanners, read_bytes, read_limit, scan_file

ENV_TIMEOUT = "NEURON_READY_FILE_TIMEOUT"  # CPU seconds one file may take in a worker
DEFAULT_TIMEOUT = 60.0
WALL_FACTOR = 4  # a worker not using its CPU (blocked, or a starved machine) is stopped after 4x
TICK = 0.1  # how often the supervisor wakes to redraw progress
GC_THRESHOLD = (50_000, 20, 20)
BUDGET_BYTES = 1_000_000  # source bytes parsed at once (about 600 MB of trees)
SMALL_BYTES = 64 * 1024  # a file this small always starts
TRIM_BYTES = 64 * 1024  # after libcst parsed this much source, give the freed tree back to the OS
RECYCLE_BYTES = 256 * 1024  # after libcst parsed this much, exit: fragments of its tree would stay mapped


@dataclass(frozen=True)
class FileTask:
    """One file for a worker: its place in the job list, the job and its size in bytes (a task of the
    scan, not a porting task: model.Task is that)."""

    index: int
    job: FileJob
    size: int


# (task, cache key or None, encoded FileResult)
Done = Callable[[FileTask, "str | None", bytes], None]


def file_timeout() -> float:
    try:
        value = float(os.environ.get(ENV_TIMEOUT, DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


@contextlib.contextmanager
def gc_tuned():
    """A parse allocates hundreds of thousands of nodes, none in cycles that matter: collect less
    often, and never walk the long-lived objects (catalog, index, modules) again. Restored after."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def scan_one(job: FileJob, ctx: ScanContext, keys: Keys | None) -> tuple[str | None, bytes]:
    """Read, scan and encode one file; the key is computed from exactly the bytes scanned."""
    try:
        data = read_bytes(job.path, read_limit(job, ctx))
    except OSError:
        data = None  # scan_file reads again and reports why it cannot
    result = scan_file(job, ctx, data)
    key = keys.key(job, data) if keys is not None and data is not None else None
    return key, encode_result(result)


def failure(job: FileJob, kind: str, message: str) -> bytes:
    return encode_result(FileResult(job.rel, job.kind, diagnostics=[Diagnostic(job.rel, kind, message)]))


def _malloc_trim() -> Callable[[], None]:
    """glibc keeps freed memory: after a large tree is dropped a worker would stay at its peak."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0)


def _serve(conn, ctx: ScanContext, keys: Keys | None, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    ctx.index  # built before the fork (or once here when workers are spawned)
    gc.freeze()  # inherited objects stay untouched: no copy-on-write of the parent's memory
    gc.set_threshold(*GC_THRESHOLD)
    trim = _malloc_trim()
    while True:
        while not conn.poll(1.0):
            if os.getppid() != parent:  # the parent was killed: do not linger
                return
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, job, size = message
        before = libcst_chars()
        key, payload = scan_one(job, ctx, keys)
        tree = libcst_chars() - before  # the source libcst parsed: what the tree's memory follows
        retiring = tree >= RECYCLE_BYTES
        conn.send((index, key, payload, retiring))
        if retiring:  # the supervisor forks a fresh worker when it needs one
            return
        if tree >= TRIM_BYTES:
            trim()


def scan_in_process(tasks: list[FileTask], ctx: ScanContext, keys: Keys | None, on_done: Done) -> None:
    """Scan every task in this process (`--jobs 1`) in the order a worker queue gives them, largest
    first, freeing libcst's trees as a worker does: a large file's parse then comes while the results
    held are few, and what it leaves behind is not kept under the results to come (on the torch tree
    one 0.5 MB file's parse takes 600 MB; docs/lab/performance.md run T)."""
    trim = _malloc_trim()
    for task in sorted(tasks, key=lambda t: (-t.size, t.index)):
        before = libcst_chars()
        key, payload = scan_one(task.job, ctx, keys)
        on_done(task, key, payload)
        if libcst_chars() - before >= TRIM_BYTES:
            trim()


def _cpu_seconds(pid: int) -> float | None:
    """CPU time a process has used (Linux), so a busy machine does not make a file time out."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _context():
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


class _Worker:
    def __init__(self, mp, ctx: ScanContext, keys: Keys | None) -> None:
        self.conn, child = mp.Pipe()
        self.process = mp.Process(target=_serve, args=(child, ctx, keys, os.getpid()), daemon=True)
        self.process.start()
        child.close()
        self.task: FileTask | None = None
        self.started = self.check_at = 0.0
        self.cpu_start: float | None = None

    def assign(self, task: FileTask, timeout: float) -> None:
        self.task = task
        self.started = time.monotonic()
        self.check_at = self.started + timeout
        self.cpu_start = _cpu_seconds(self.process.pid)
        self.conn.send((task.index, task.job, task.size))

    def over_time(self, timeout: float, now: float) -> bool:
        """Past the limit in CPU time (or, without it, wall time); else when to look again."""
        if now < self.check_at:
            return False
        cpu = _cpu_seconds(self.process.pid)
        if cpu is None or self.cpu_start is None or now - self.started >= timeout * WALL_FACTOR:
            return True
        used = cpu - self.cpu_start
        if used >= timeout:
            return True
        self.check_at = now + max(timeout - used, TICK)
        return False

    def stop(self, force: bool) -> None:
        if not force and self.process.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                force = True
        if force and self.process.is_alive():
            self.process.kill()
        self.process.join(1.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _death(process) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _Queue:
    """Pending tasks by size: the largest that fits the memory budget goes next."""

    def __init__(self, tasks: list[FileTask]) -> None:
        self.tasks = sorted(tasks, key=lambda t: (t.size, -t.index))
        self.sizes = [t.size for t in self.tasks]

    def __len__(self) -> int:
        return len(self.tasks)

    def take(self, in_flight: int, busy: int) -> FileTask | None:
        limit = BUDGET_BYTES - in_flight if busy else None
        i = len(self.tasks) if limit is None else bisect.bisect_right(self.sizes, max(limit, SMALL_BYTES))
        if i == 0:
            return None
        self.sizes.pop(i - 1)
        return self.tasks.pop(i - 1)


def run_supervised(tasks: list[FileTask], ctx: ScanContext, keys: Keys | None, workers: int,
                   on_done: Done, tick: Callable[[], None] = lambda: None,
                   warm: Callable[[], None] | None = None) -> None:
    """Scan every task in up to `workers` processes; on_done is called once per task. `warm` runs
    once, when the first workers have their files: the main process loads its own modules then."""
    timeout = file_timeout()
    mp = _context()
    ctx.index  # build once, before forking
    load_scanners()
    queue = _Queue(tasks)
    pool: list[_Worker] = []
    interrupted = True

    def retire(w: _Worker) -> None:
        w.stop(force=True)
        pool.remove(w)

    try:
        while queue or any(w.task for w in pool):
            for w in [w for w in pool if w.task is None and not w.process.is_alive()]:
                retire(w)  # died after delivering its last result
            while queue:
                busy = [w.task for w in pool if w.task is not None]
                idle = next((w for w in pool if w.task is None), None)
                if idle is None and len(pool) >= workers:
                    break
                task = queue.take(sum(t.size for t in busy), len(busy))
                if task is None:
                    break
                if idle is None:
                    idle = _Worker(mp, ctx, keys)
                    pool.append(idle)
                idle.assign(task, timeout)
            if warm is not None:
                warm()
                warm = None
            busy_workers = [w for w in pool if w.task is not None]
            wake = max(0.0, min(min(w.check_at for w in busy_workers) - time.monotonic(), TICK))
            ready = set(wait([w.conn for w in busy_workers] + [w.process.sentinel for w in busy_workers], wake))
            for w in busy_workers:
                task = w.task
                assert task is not None
                # A worker that exits after a large file may have sent its result after wait()
                # returned: once it is dead nothing more can arrive, so look before calling it a crash.
                dead = not w.process.is_alive()
                if w.conn in ready or (dead and w.conn.poll()):
                    try:
                        _, key, payload, retiring = w.conn.recv()
                    except (EOFError, OSError):
                        pass  # died while answering: reported below
                    else:
                        w.task = None
                        if retiring:
                            retire(w)
                        on_done(task, key, payload)
                        continue
                if dead:
                    w.process.join()
                    payload = failure(task.job, "internal-error", f"the analysing process died on this file "
                                      f"({_death(w.process)}); skipped, please report it")
                elif w.over_time(timeout, time.monotonic()):
                    payload = failure(task.job, "too-complex", f"analysis took longer than {timeout:g} s and "
                                      f"was stopped; skipped ({ENV_TIMEOUT} sets the limit)")
                else:
                    continue
                w.task = None
                retire(w)
                on_done(task, None, payload)
            tick()
        interrupted = False
    finally:
        for w in pool:
            w.stop(force=interrupted)
