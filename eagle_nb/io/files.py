"""Reading user-supplied files safely: regular files only, a size cap, UTF-8 with the place named.

A FIFO, a device or a directory given where a file is expected is refused from `stat` before it is
opened (opening a FIFO blocks until a writer appears); a file larger than the cap is refused
before it is read into memory. Every error is a `UserFileError` naming the file and the fix.
Writing a directory (`check_destination`, `AtomicDir`) never destroys what the user did not ask
to replace: a non-empty destination needs an explicit force, the source can never be the
destination, and the result appears by one rename, so an error mid-way leaves nothing half-written.
Knows nothing about what the files mean (prompts.py, checkpoints/ do).
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

MiB = 1 << 20
CONFIG_CAP = 16 * MiB      # config.json / index.json: real ones are a few KiB
PROMPTS_CAP = 256 * MiB    # a prompt file; each prompt is further bounded by the target's context


class UserFileError(ValueError):
    """A file the user pointed at cannot be read as asked; the message names it and the fix."""


def show(path) -> str:
    """A path for messages: non-UTF-8 bytes shown escaped instead of failing to print."""
    s = os.fspath(path)
    return s.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(s, str) else repr(s)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def absent(path) -> str:
    """Why `path` is not there, for messages: "a symlink loop", "a broken symlink to X" (the first
    link whose target is missing), "under a file" (a parent is a file) or "missing"."""
    try:
        os.stat(path)
        return "present"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symlink loop (a symbolic link that resolves back to itself)"
        if e.errno == errno.ENOTDIR:
            return "under a file (a parent of it is not a directory)"
    p = Path(path)
    for link in [p, *p.parents]:
        if link.is_symlink() and not link.exists():
            return f"a broken symlink ({show(link)} points at {show(os.readlink(link))}, which is missing)"
    return "missing"


def check_regular(path, what: str, cap: int) -> int:
    """Raise unless `path` is an existing regular file of at most `cap` bytes. Returns its size."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        why = absent(path)
        raise UserFileError(f"{what} {show(path)}: " + ("no such file" if why == "missing" else why)) from None
    except OSError as e:
        why = absent(path)
        raise UserFileError(f"{what} {show(path)}: " + (why if why not in ("missing", "present")
                                                         else f"cannot be read ({e.strerror})")) from None
    if not stat.S_ISREG(st.st_mode):
        raise UserFileError(f"{what} {show(path)} is {_kind(st.st_mode)}, not a regular file; "
                            f"point at the file itself")
    if st.st_size > cap:
        raise UserFileError(f"{what} {show(path)} is {st.st_size / MiB:.1f} MiB, over the "
                            f"{cap / MiB:.0f} MiB limit for such a file; is it the right file?")
    return st.st_size


def read_bytes(path, what: str, cap: int) -> bytes:
    """The bytes of a regular file of at most `cap` bytes (re-checked while reading: a file that
    grows past the cap, or a /proc-style file reporting size 0, is still bounded)."""
    check_regular(path, what, cap)
    with open(path, "rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise UserFileError(f"{what} {show(path)} is over the {cap / MiB:.0f} MiB limit for such a file")
    return data


def decode_utf8(data: bytes, path, what: str, line: int | None = None) -> str:
    """UTF-8 text; an error names the line (`line` if `data` is one line of a file) and column of
    the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = line or data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise UserFileError(f"{what} {show(path)}:{line}: not UTF-8 (byte 0x{data[e.start]:02x} at column {col}); "
                            f"re-encode the file as UTF-8 (e.g. `iconv -t utf-8`)") from None


def read_text(path, what: str, cap: int) -> str:
    return decode_utf8(read_bytes(path, what, cap), path, what)


def read_json_object(path, what: str, cap: int = CONFIG_CAP) -> dict:
    """A JSON file whose top level must be an object (config.json, *.index.json)."""
    text = read_text(path, what, cap)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserFileError(f"{what} {show(path)}: invalid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise UserFileError(f"{what} {show(path)}: the top level is a JSON {type(obj).__name__}, "
                            f"expected an object {{\"field\": value, ...}}")
    return obj


def parse_json_values(text: str, path, what: str) -> list:
    """A JSON list, one JSON value, or JSON lines (one value per line) -> a list; a line that is not
    JSON is an error naming the file and the line."""
    try:
        v = json.loads(text)
        return v if isinstance(v, list) else [v]
    except json.JSONDecodeError:
        pass
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise UserFileError(f"{what} {show(path)}:{n}: not JSON ({e})") from None
    return out


def read_json_values(path, what: str, cap: int = PROMPTS_CAP) -> list:
    """`parse_json_values` of a file read safely (`read_text`)."""
    return parse_json_values(read_text(path, what, cap), path, what)


def is_dir(path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


# -- writing a directory without ever losing what was there ------------------------------------------
def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_destination(dst, force: bool, protect=(), flag: str = "--force") -> None:
    """Refuse to write directory `dst` when that could destroy data: `dst` is a file, or equals or
    contains one of `protect` (e.g. the source checkpoint; compared by resolved path, so symlinks
    and `a/../a` count), or is a non-empty directory and `force` is off."""
    dst = Path(dst)
    real = dst.resolve()
    for p in protect:
        if p is None or not isinstance(p, (str, os.PathLike)):
            continue
        p_real = Path(p).resolve()
        same = real == p_real or (real.exists() and p_real.exists() and os.path.samefile(real, p_real))
        if same or _inside(p_real, real):
            raise UserFileError(f"destination {show(dst)} {'is' if same else 'contains'} {show(p)} "
                                f"(resolved: {show(p_real)}); writing there would destroy it. "
                                f"Choose a new directory")
    if os.path.lexists(dst) and not is_dir(dst):
        raise UserFileError(f"destination {show(dst)} exists and is not a directory; choose a new "
                            f"directory name")
    if is_dir(dst) and any(os.scandir(dst)) and not force:
        names = sorted(e.name for e in os.scandir(dst))
        raise UserFileError(f"destination {show(dst)} is not empty ({len(names)} entries, e.g. "
                            f"{[show(n) for n in names[:4]]}); nothing was written. Choose a new "
                            f"directory, or pass {flag} to replace it entirely")


class AtomicDir:
    """`with AtomicDir(dst) as tmp:` write into `tmp` (a fresh directory beside `dst`, same file
    system); on success `tmp` is renamed to `dst` (an existing `dst` is moved aside first and
    removed only after the rename), on any error `tmp` is removed and `dst` is untouched.
    Call `check_destination` first: this class replaces whatever `dst` holds."""

    def __init__(self, dst):
        dst = Path(dst)
        # a symlink is itself replaced (its target is left alone); anything else by real path
        self.dst = dst.absolute() if os.path.islink(dst) else dst.resolve()

    def __enter__(self) -> Path:
        parent = self.dst.parent
        parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.dst.name}.partial-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.tmp, 0o777 & ~umask)      # mkdtemp makes 0700; a normal mkdir would not
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        dst, old = self.dst, None
        if os.path.lexists(dst):
            old = Path(tempfile.mkdtemp(prefix=f".{dst.name}.old-", dir=dst.parent))
            os.rename(dst, old / "d")
        try:
            os.rename(self.tmp, dst)
        except OSError:
            if old is not None:
                os.rename(old / "d", dst)       # put the original back
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        finally:
            if old is not None and os.path.lexists(dst):
                shutil.rmtree(old, ignore_errors=True)
        return False
