"""Safe writes, shared by every command that writes (no hpccm, no site model).

`write_set({path: text})` writes a whole set of files so that readers and an interrupted run see the
old set or the new one, never a mix: every file is first written and synced beside its target, then all
are renamed into place with SIGINT/SIGTERM held back; a signal during the first phase removes the
temporary files. It refuses to write over anything that is not a regular file (a device, a FIFO, a
directory, a symlink unless `follow_symlinks`, a file with other hard links), keeps an existing file's
mode, and holds a lock on each output directory so that concurrent runs do not mix their files.
Every refusal is a one-line `UsageError` naming the path and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from generator.errors import GenRecipeError, UsageError


class WriteFailed(GenRecipeError):
    """The file system refused a write (read-only, full, permissions)."""

    exit_code = 2


def _target(path: Path, follow_symlinks: bool) -> tuple[Path, int | None]:
    """The file to replace (a symlink's target when following) and the mode to keep (None: new file)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path, None
    except OSError as exc:
        raise WriteFailed(f"cannot write {path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        if not follow_symlinks:
            raise UsageError(f"{path} is a symbolic link: not replaced (pass --follow-symlinks to write to "
                             f"{os.readlink(path)}, or remove the link)")
        return _target(Path(os.path.realpath(path)), follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a device or special file"
        raise UsageError(f"{path} is {kind}, not a regular file: not replaced (choose another --out)")
    if st.st_nlink > 1:
        raise UsageError(f"{path} has {st.st_nlink - 1} other hard link(s): replacing it would leave them stale "
                         "(remove the other links, or write elsewhere)")
    return path, stat.S_IMODE(st.st_mode)


@contextlib.contextmanager
def _locked(folders: list[Path]) -> Iterator[None]:
    """An exclusive lock on each output folder (flock on the folder itself) for the whole write."""
    with contextlib.ExitStack() as stack:
        for folder in sorted(set(folders)):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            stack.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UsageError(f"{folder} is being written by another gen-recipe run (wait for it, or "
                                 "choose another --out)") from None
        yield


def machine_lock(name: str) -> Path:
    """The lock file of `name` for this user on this machine (under $TMPDIR, /tmp by default)."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in name)
    return Path(tempfile.gettempdir()) / f"gen-recipe-{os.getuid()}-{safe}.lock"


@contextlib.contextmanager
def one_at_a_time(lock_file: Path, waiting=None) -> Iterator[None]:
    """Wait for, then hold, an exclusive lock on `lock_file` (created when missing): concurrent runs
    that fill one shared cache (the base image, a wheel, udocker's repository, the builder's layers)
    take turns. `waiting()` is called once if another run holds it. Not re-entrant: taking the same lock
    again inside the block waits forever."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (they are delivered then)."""
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _mkdirs(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{folder} exists and is not a directory (choose another --out)") from None
    except OSError as exc:
        raise WriteFailed(f"cannot create {folder}: {exc.strerror}") from None


def write_set(texts: Mapping[Path, str], *, mode: int = 0o644, follow_symlinks: bool = False) -> None:
    """Write every `path: text` of `texts` as one set (see the module's docstring). New files get `mode`."""
    targets = {Path(p): _target(Path(p), follow_symlinks) for p in texts}
    for real, _ in targets.values():
        _mkdirs(real.parent)
    temps: dict[Path, Path] = {}
    with _locked([real.parent for real, _ in targets.values()]):
        try:
            for path, (real, keep) in targets.items():
                fd, tmp = tempfile.mkstemp(prefix=f".{real.name[:100]}.", suffix=".tmp", dir=real.parent)
                temps[real] = Path(tmp)
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(texts[path])
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, mode if keep is None else keep)
            with _signals_held():
                for real, tmp in temps.items():
                    os.replace(tmp, real)
                temps.clear()
        except OSError as exc:
            what = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror
            raise WriteFailed(f"cannot write {exc.filename or next(iter(targets))}: {what}") from None
        finally:
            for tmp in temps.values():
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def write_atomic(path: Path, text: str, *, mode: int = 0o644, follow_symlinks: bool = False) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a part."""
    write_set({Path(path): text}, mode=mode, follow_symlinks=follow_symlinks)
