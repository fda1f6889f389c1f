"""Reading and writing the files the program keeps, with every failure a one-line error.

Files named by a user (config, state) are read only when they are regular files and
only up to a size limit, so a FIFO cannot hang a command and ``/dev/zero`` cannot
exhaust memory. Every :class:`OSError` becomes the caller's error class, naming the
path, so the CLI exits 2 instead of printing a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from shuffler.constants import MAX_FILE_BYTES
from shuffler.errors import BadInputError, FileAccessError

#: the mode of every folder the program creates, whatever the umask (stricter is kept)
FOLDER_MODE = 0o750
#: never follow a symlink to a file the program keeps (root must not write where another
#: account points it), never block on a FIFO, never take a terminal
SAFE_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/shuffler`` (``~/.local/state/shuffler``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "shuffler"


def make_folder(path: Path) -> None:
    """Create ``path`` and any missing parent with :data:`FOLDER_MODE` or stricter
    (``Path.mkdir`` would give world-writable folders under a umask of 000); an
    existing folder is left as it is."""
    path = Path(path)
    if path.is_dir():
        return
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, FOLDER_MODE)  # the umask only takes bits away
        except FileExistsError:
            continue


def open_kept(path: Path, flags: int, mode: int = 0o640) -> int:
    """``os.open`` for a file the program keeps: never through a symlink, and only a
    regular file (a FIFO, a device or a folder there is an OSError saying so)."""
    fd = os.open(path, flags | SAFE_OPEN, mode)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(0, f"{_kind(st.st_mode)}, not a regular file", os.fspath(path))
    return fd


def symlink_refusal(e: OSError) -> str:
    """The reason of an open error, naming a symlink as one (O_NOFOLLOW gives ELOOP)."""
    import errno

    if e.errno == errno.ELOOP:
        return "it is a symbolic link, which is never followed (replace it with the file)"
    return why(e)


def why(e: OSError) -> str:
    """The reason of an OS error without its Python decoration."""
    return e.strerror or str(e)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_path(path: str | os.PathLike, what: str,
               error: type[BadInputError] = FileAccessError) -> Path:
    """``path`` as a Path, refusing what no file system accepts (a NUL byte, 4096+ bytes)."""
    text = os.fspath(path)
    if "\0" in text:
        raise error(f"{text!r}: the {what} path holds a NUL byte")
    if len(os.fsencode(text)) >= 4096:
        raise error(f"{text[:60]}...: the {what} path is longer than 4095 bytes")
    return Path(text)


def read_limited(path: str | os.PathLike, what: str, *, limit: int = MAX_FILE_BYTES,
                 error: type[BadInputError] = FileAccessError,
                 follow: bool = True) -> bytes | None:
    """The bytes of the regular file ``path`` (None if it does not exist).

    A FIFO, a device, a folder, a file over ``limit`` bytes or one that cannot be read
    is an ``error`` naming the path and the ``what`` (e.g. "config file"). With
    ``follow`` false (the files in the state folder) a symlink is refused too."""
    p = check_path(path, what, error)
    try:
        st = os.stat(p) if follow else os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            raise error(f"{p}: the {what} is a symbolic link, which is never followed "
                        "(replace it with the file itself)")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: the {what} is {_kind(st.st_mode)}, not a regular file")
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
                     | (0 if follow else os.O_NOFOLLOW))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise error(f"{p}: cannot read the {what}: {symlink_refusal(e)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the stat above
            raise error(f"{p}: the {what} is not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise error(f"{p}: cannot read the {what}: {why(e)}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise error(f"{p}: the {what} is larger than {limit} bytes")
    return b"".join(chunks)


def atomic_write(path: Path, data: bytes, mode: int = 0o640) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new bytes.

    A write goes to a temporary file in the same folder, is flushed to disk, then
    renamed over the old file, so a crash leaves either the old or the new file. The
    new file keeps what the old one had: its mode, owner and group (a config a service
    account reads stays readable by it after root rewrites it); a file made new gets
    ``mode``, and the writer as owner."""
    import tempfile  # a command that writes nothing never loads it

    path = Path(path)
    make_folder(path.parent)
    kept = _kept_metadata(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        try:
            _keep(fd, kept, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _kept_metadata(path: Path) -> os.stat_result | None:
    """The old file's stat, when ``path`` is a regular file (never a symlink's target)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _keep(fd: int, kept: os.stat_result | None, mode: int) -> None:
    """Give the temporary file ``fd`` the old file's owner, group and mode (``mode`` for a
    new file). An owner this process may not give (not root) is left as it is, and then
    the group if that is not ours either; the mode is set last, as chown clears set-id
    bits."""
    if kept is None:
        os.fchmod(fd, mode)
        return
    for uid, gid in ((kept.st_uid, kept.st_gid), (-1, kept.st_gid)):
        try:
            os.fchown(fd, uid, gid)
            break
        except PermissionError:
            continue
    os.fchmod(fd, stat.S_IMODE(kept.st_mode))


#: what every temporary file starts with (``.state.json.k2j3``): a kill between its
#: creation and its rename leaves one, which :func:`clean_temp_files` removes
TEMP_PREFIX = "."


def clean_temp_files(folder: Path, names: tuple[str, ...]) -> list[str]:
    """Remove the temporary files a killed write left for ``names`` in ``folder`` (call
    it holding the machine's lock, so no write is under way); the names removed."""
    removed: list[str] = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for entry in entries:
        if any(entry.startswith(f"{TEMP_PREFIX}{name}.") for name in names):
            try:
                os.unlink(folder / entry)
            except OSError:
                continue
            removed.append(entry)
    return removed


class Reserve:
    """A small preallocated file in the state folder, given up when a write fails, so
    that the write that records a fault finds room on a disk that filled meanwhile
    (journald, another process). It is made again before the next pass; a disk with no
    room for it refuses the pass (nothing is started)."""

    NAME = ".reserve"
    BYTES = 128 * 1024

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / self.NAME

    def ensure(self) -> None:
        """Make the reserve if it is missing or short; OSError if the disk has no room."""
        try:
            if os.lstat(self.path).st_size == self.BYTES:
                return
        except FileNotFoundError:
            pass
        fd = open_kept(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            block = bytes(1 << 16)
            written = 0
            while written < self.BYTES:
                written += os.write(fd, block[: self.BYTES - written])
            os.fsync(fd)
        except OSError:
            os.close(fd)
            os.unlink(self.path)  # a short reserve is no reserve; give the room back
            raise
        os.close(fd)

    def release(self) -> bool:
        """Give the room back; whether there was any to give."""
        try:
            os.unlink(self.path)
        except OSError:
            return False
        return True


def retry_with_reserve(reserve: Reserve | None, write) -> None:
    """``write()``; if it fails and ``reserve`` had room to give, once more."""
    try:
        write()
    except OSError:
        if reserve is None or not reserve.release():
            raise
        write()


def write_file(path: Path, data: bytes, what: str, reserve: Reserve | None = None) -> None:
    """:func:`atomic_write`, with any failure (permission, read-only, disk full, a
    missing or unusable folder) a :class:`FileAccessError` naming the path. A failed
    write is tried once more after releasing ``reserve``."""
    try:
        retry_with_reserve(reserve, lambda: atomic_write(path, data))
    except OSError as e:
        where = e.filename if isinstance(e.filename, str) else path
        raise FileAccessError(f"{where}: cannot write the {what}: {why(e)}") from None
