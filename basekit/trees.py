"""Replace a whole directory tree so that a kill at any moment leaves the old tree or the new.

:func:`replace_tree`: the new tree is built in a work directory beside its target
(``.NAME.tdev-new/tree``, with an ``owner`` record naming the target) and swapped in:
``renameat2(RENAME_EXCHANGE)`` where Linux has it (the target never disappears), else two
renames through ``.NAME.tdev-new/old``. :func:`recover_tree` (run first by every replace)
finishes or undoes a replacement a kill interrupted, and touches nothing it cannot prove it
made: a link or a directory without the record at that name is refused, not followed.
Callers that may run concurrently hold :func:`basekit.fs.dir_lock` on the target's parent.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Callable

from basekit.errors import InputError

STAGED_SUFFIX = ".tdev-new"
OWNER_NAME = "owner"  # in a work directory: which target it serves (written first, removed last)
NEW_TREE, OLD_TREE = "tree", "old"  # in a work directory: the staged tree, the aside tree
_OWNER_MAX = 1 << 16


def tree_slots(target: Path) -> tuple[Path]:
    """The sibling of ``target`` a replacement works in (``.NAME.tdev-new``): the staged tree
    is built in its ``tree``, the previous tree goes to its ``old`` (two renames only)."""
    return (target.parent / f".{target.name}{STAGED_SUFFIX}",)


def _owner_record(target: Path) -> bytes:
    """What a work directory's owner record holds: the name of the target beside it (the work
    directory is always its sibling, so the directory may be moved or copied whole)."""
    return os.fsencode(f"tdev replace_tree {target.name}\n")


def _work_state(work: Path, target: Path) -> str | None:
    """None when ``work`` is a work directory of ``target`` made by this user (or what a kill
    left of one: empty, or holding an empty owner record); else why it is not ours."""
    st = os.lstat(work)
    if not stat.S_ISDIR(st.st_mode):
        return "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
    if st.st_uid != os.geteuid():
        return f"a directory of another user (uid {st.st_uid})"
    try:
        names = os.listdir(work)
    except OSError as e:
        return f"an unreadable directory ({e.strerror or e})"
    if not names:
        return None
    if OWNER_NAME not in names:
        return f"a directory without tdev's {OWNER_NAME} record"
    try:
        fd = os.open(work / OWNER_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return f"its {OWNER_NAME} record is unreadable ({e.strerror or e})"
    try:
        record = os.read(fd, _OWNER_MAX) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)
    if record == _owner_record(target) or (record == b"" and names == [OWNER_NAME]):
        return None
    return f"its {OWNER_NAME} record does not name {target.name}"


def _remove_work(work: Path) -> None:
    """Delete a work directory: its trees first, the owner record last, so that a kill on the
    way leaves a directory the next run still knows as its own."""
    names = sorted(os.listdir(work), key=lambda n: n == OWNER_NAME)
    for name in names:
        path = work / name
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    os.rmdir(work)


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _renameat2() -> Callable[..., int] | None:
    import ctypes  # only when a tree is swapped: keeps start-up fast
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2: list[Callable[..., int] | None] = []
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the paths ``a`` and ``b`` (both must exist); False when the system
    cannot (another OS, an old kernel, a file system without it)."""
    if not _RENAMEAT2:
        _RENAMEAT2.append(_renameat2())
    fn = _RENAMEAT2[0]
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    import ctypes
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def recover_tree(target: Path) -> tuple[str, ...]:
    """Finish or undo a replacement of ``target`` a kill interrupted; what was done, in words.
    Only the work directory this user's replace made for ``target`` is touched; anything else at
    its name (a link, another user's or an unmarked directory) is refused (InputError, nothing
    changed). An aside tree without the target means a kill between the two renames: the
    staged tree was complete, so it goes into place (or, without one, the aside tree goes
    back); the work directory is then deleted."""
    (work,) = tree_slots(target)
    if not os.path.lexists(work):
        return ()
    why = _work_state(work, target)
    if why is not None:
        raise InputError(work, f"{why}, in the way of replacing {target.name} (tdev only "
                         "removes the work directories it made); move it away")
    done: list[str] = []
    staged, aside = work / NEW_TREE, work / OLD_TREE
    if not os.path.lexists(target) and _real_dir(aside):
        if _real_dir(staged):
            os.rename(staged, target)
            done.append(f"finished an interrupted replacement of {target}")
        else:
            os.rename(aside, target)
            done.append(f"restored the previous {target}")
    _remove_work(work)
    done.append(f"removed what an interrupted replacement left in {work}")
    return tuple(done)


def replace_tree(target: Path, fill: Callable[[Path], None], *,
                 on_step: Callable[[str], None] | None = None, use_exchange: bool = True) -> tuple[str, ...]:
    """Put a new directory at ``target``: recover first, let ``fill`` write the tree into the
    work directory beside it (if it raises, the work directory is removed and ``target`` is
    untouched), then swap it in and delete the previous tree. With RENAME_EXCHANGE (Linux) a
    kill at any moment leaves ``target`` in place, the previous tree or the new one; with two
    renames there is a moment without ``target`` until the next replace or
    :func:`recover_tree`. ``on_step`` hears ``aside`` (two renames only), ``swapped`` and
    ``cleaned``. Returns what the recovery did."""
    step = on_step or (lambda name: None)
    recovered = recover_tree(target)
    (work,) = tree_slots(target)
    os.mkdir(work, 0o700)
    with open(os.open(work / OWNER_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600),
              "wb") as fh:
        fh.write(_owner_record(target))  # one write: a kill leaves it whole or empty
    staged = work / NEW_TREE
    try:
        staged.mkdir()
        fill(staged)
    except BaseException:
        try:
            _remove_work(work)
        except OSError:
            pass  # the next run's recovery removes what is left
        raise
    if not os.path.lexists(target):
        os.rename(staged, target)
        step("swapped")
    elif use_exchange and exchange(staged, target):
        step("swapped")  # the work directory holds the previous tree now
    else:
        os.rename(target, work / OLD_TREE)
        step("aside")
        os.rename(staged, target)
        step("swapped")
    _remove_work(work)
    step("cleaned")
    return recovered
