"""The one read path and the one write path of every command (no hpccm, no site model).

`read_text(path, what)` / `read_bytes(...)` read an input (site, app, requirements, recipe, lint and
report files): it must be a regular file (a FIFO, device or directory is refused before any byte is
read, so nothing blocks), of bounded size, and (for text) UTF-8; `inside(folder, rel, what)` keeps a
path inside the folder it belongs to after resolving `..` and links.

`write_set({path: text})` writes a whole set of files so that readers and an interrupted run see the
old set or the new one, never a mix: every file is first written and synced beside its target, then all
are renamed into place with SIGINT/SIGTERM/SIGHUP held back; a signal during the first phase removes the
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

from generator.errors import GenRecipeError, UsageError, shown


class WriteFailed(GenRecipeError):
    """The file system refused a write (read-only, full, permissions)."""

    exit_code = 2


MAX_INPUT = 1 << 20        # inputs are pages of text; larger ones are refused before they are read


def read_bytes(path: Path | str, what: str, *, max_bytes: int = MAX_INPUT) -> bytes:
    """The bytes of the input file `path` (`what` names it in messages: "site file", "report input"): a
    regular file of at most `max_bytes`, checked on the open descriptor before reading (O_NONBLOCK: a FIFO
    does not block the open)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"{shown(path)}: cannot read {what}: {exc.strerror} (check the path)") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):      # before fdopen, which refuses a directory with an OSError of its own
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) \
            else "a device or special file"
        raise UsageError(f"{shown(path)}: {kind}, not a regular file (give the {what} itself)")
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > max_bytes:
            raise UsageError(f"{shown(path)}: {st.st_size} bytes is too large for a {what} (at most {max_bytes})")
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise UsageError(f"{shown(path)}: cannot read {what}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise UsageError(f"{shown(path)}: too large for a {what} (at most {max_bytes} bytes)")
    return data


def read_text(path: Path | str, what: str, *, max_bytes: int = MAX_INPUT) -> str:
    """The UTF-8 text of the input file `path` (see `read_bytes`)."""
    try:
        return read_bytes(path, what, max_bytes=max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{shown(path)}: not a UTF-8 text file (a {what} is text)") from None


def inside(folder: Path | str, rel: str, what: str) -> Path:
    """`folder / rel`, refused unless it stays inside `folder` once `..` and links are resolved."""
    folder = Path(folder)
    target = folder / rel
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise UsageError(f"{shown(target)}: a {what} must be a relative path inside {shown(folder)}")
    real, base = target.resolve(), folder.resolve()
    if real != base and base not in real.parents:
        raise UsageError(f"{shown(target)}: leads outside {shown(folder)} (a link?): copy the {what} into that folder")
    return target


def replaceable(path: Path, follow_symlinks: bool, flag: str | None = "--follow-symlinks") -> tuple[Path, int | None]:
    """The write path's check of one target, also for writers that place a finished file themselves
    (build --export): the file to replace (a symlink's target when following) and the mode to keep (None: new file).
    `flag`: the option that lets this command follow links (None: it has none), for the message."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path, None
    except OSError as exc:
        raise WriteFailed(f"cannot write {shown(path)}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        if not follow_symlinks:
            how = (f"pass {flag} to write to {shown(os.readlink(path))}, or remove the link" if flag else
                   f"name its target {shown(os.readlink(path))} instead, or remove the link")
            raise UsageError(f"{shown(path)} is a symbolic link: not replaced ({how})")
        return replaceable(Path(os.path.realpath(path)), follow_symlinks=False, flag=flag)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a device or special file"
        raise UsageError(f"{shown(path)} is {kind}, not a regular file: not replaced (write elsewhere)")
    if st.st_nlink > 1:
        raise UsageError(f"{shown(path)} has {st.st_nlink - 1} other hard link(s): replacing it would leave them stale "
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
    """SIGINT, SIGTERM and SIGHUP wait until the block ends (they are delivered then)."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _no_linked_folder(folder: Path, root: Path | None, flag: str | None) -> None:
    """Every folder from `root` (excluded) down to `folder` is a real directory or missing, not a link:
    `--out out` must not write into /etc through `out/local -> /etc`."""
    if root is None:
        return
    root, folder = Path(os.path.abspath(root)), Path(os.path.abspath(folder))
    if folder != root and root not in folder.parents:
        return
    for part in [folder, *folder.parents]:
        if part == root:
            break
        if os.path.islink(part):
            how = f"pass {flag} to write through it, or remove the link" if flag else "remove the link"
            raise UsageError(f"{shown(part)} is a symbolic link to a folder: not written through ({how})")


def _mkdirs(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{folder} exists and is not a directory (choose another --out)") from None
    except OSError as exc:
        raise WriteFailed(f"cannot create {folder}: {exc.strerror}") from None


def write_set(texts: Mapping[Path, str | bytes], *, mode: int = 0o644, follow_symlinks: bool = False,
              root: Path | None = None, flag: str | None = "--follow-symlinks") -> None:
    """Write every `path: text` (str: UTF-8 text, bytes: as they are) of `texts` as one set (see the module's
    docstring); every check is made before the first byte is written. New files get `mode`. `root`: the
    output folder the command was given, below which no folder may be a link unless `follow_symlinks`;
    `flag`: the option that allows links (None for a command that has none), named in the refusals."""
    if not follow_symlinks:
        for p in texts:
            _no_linked_folder(Path(p).parent, root, flag)
    targets = {Path(p): replaceable(Path(p), follow_symlinks, flag) for p in texts}
    for real, _ in targets.values():
        _mkdirs(real.parent)
    temps: dict[Path, Path] = {}
    with _locked([real.parent for real, _ in targets.values()]):
        try:
            for path, (real, keep) in targets.items():
                fd, tmp = tempfile.mkstemp(prefix=f".{real.name[:100]}.", suffix=".tmp", dir=real.parent)
                temps[real] = Path(tmp)
                data = texts[path]
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data if isinstance(data, bytes) else data.encode("utf-8"))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, mode if keep is None else keep)
            with _signals_held():
                for real, tmp in temps.items():
                    os.replace(tmp, real)
                temps.clear()
        except OSError as exc:
            what = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror
            raise WriteFailed(f"cannot write {shown(exc.filename or next(iter(targets)))}: {what}") from None
        finally:
            for tmp in temps.values():
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def write_atomic(path: Path, text: str | bytes, *, mode: int = 0o644, follow_symlinks: bool = False,
                 root: Path | None = None, flag: str | None = "--follow-symlinks") -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a part."""
    write_set({Path(path): text}, mode=mode, follow_symlinks=follow_symlinks, root=root, flag=flag)
