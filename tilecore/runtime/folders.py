"""Folders tilecore writes code into: private to the user, or refused.

Anyone who can write a folder that tilecore loads compiled code from (the
compile cache, the conformance working folder) can make the user's process run
their code. So every such folder is created 0700, and an existing one is used
only when it belongs to the user and neither group nor others can write it (nor
replace it: its parent must not be writable by others unless it is sticky, like
/tmp). A folder shared on purpose between users who trust each other is allowed
with ``TILECORE_CACHE_TRUSTED=1`` (or ``cache_trusted = true`` in the config
file). Temporary files live in private `tempfile.mkdtemp` folders, never at a
fixed path in the temp folder, removed at exit (or, after a SIGKILL, by the
next process that makes a folder for the same purpose).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import stat
import tempfile
import threading
from typing import Dict, List, Optional, Tuple

from ..diagnostics import TileError
from ..envflags import env_flag

TRUST_ENV = "TILECORE_CACHE_TRUSTED"


class UnsafeFolderError(TileError):
    """A folder tilecore would load code from can be written by someone else."""


def _problems(path: str) -> List[str]:
    """Why `path` is not private to this user ([] when it is)."""
    problems = []
    st = os.stat(path)
    uid = os.geteuid()
    if st.st_uid != uid:
        problems.append(f"it belongs to uid {st.st_uid}, not to you (uid {uid})")
    writers = [who for who, bit in (("its group", stat.S_IWGRP), ("other users", stat.S_IWOTH)) if st.st_mode & bit]
    if writers:
        problems.append(f"{' and '.join(writers)} can write it (mode {stat.S_IMODE(st.st_mode):o})")
    parent = os.path.dirname(os.path.realpath(path))
    pst = os.stat(parent)
    if pst.st_mode & stat.S_IWOTH and not pst.st_mode & stat.S_ISVTX and pst.st_uid != uid:
        problems.append(f"other users can replace it: its parent {parent} is writable by others and not sticky")
    return problems


def folder_trusted() -> bool:
    """Whether the user marked shared folders as trusted (TILECORE_CACHE_TRUSTED or the config file)."""
    if env_flag(TRUST_ENV, default=None) is not None:
        return bool(env_flag(TRUST_ENV, default=False))
    try:
        from ..plugin.registry import read_config

        _, config = read_config()
    except TileError:
        return False
    return config.get("cache_trusted") is True


_checked: Dict[str, Tuple[int, int, int, int]] = {}  # path -> (dev, inode, mode, uid) found private in this process
_lock = threading.Lock()


def private_folder(path: str, what: str, setting: str) -> str:
    """Create `path` (mode 0700) or check that it is private; return it.

    what: how to name the folder in the error ("tilecore cache folder");
    setting: the variable that chose it, for the fix. Raises UnsafeFolderError
    unless the folder is private or the user trusts shared folders, OSError when it
    cannot be created.
    """
    os.makedirs(path, mode=0o700, exist_ok=True)  # OSError (cannot create) is the caller's to handle
    st = os.stat(path)
    state = (st.st_dev, st.st_ino, st.st_mode, st.st_uid)
    if _checked.get(path) == state:
        return path
    problems = _problems(path)
    if problems and not folder_trusted():
        raise UnsafeFolderError(
            f"{what} {path} is not private: {'; '.join(problems)}. Anyone who can write it can make "
            f"tilecore run their code in your processes. Fix: `chmod 700 {path}` if it is yours, or set "
            f"{setting} to a folder only you can write; for a cache shared on purpose with users you "
            f"trust, set {TRUST_ENV}=1 (or `cache_trusted = true` in the tilecore config file)"
        )
    with _lock:
        _checked[path] = state
    return path


_process_dirs: Dict[Tuple[str, Optional[str], int], str] = {}  # (purpose, base, pid) -> folder


def pid_running(pid: int) -> bool:
    """Whether process `pid` exists on this host (someone else's counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def process_tempdir(purpose: str, base: Optional[str] = None) -> str:
    """A private folder (tempfile.mkdtemp, 0700) for this process inside `base` (default: the
    temp folder), named ``tilecore-<purpose>-<pid>-*`` and removed when the process exits.
    Folders of the same purpose that your processes which no longer run left behind (killed
    with SIGKILL: no exit handler ran) are removed before a new one is made."""
    with _lock:
        key = (purpose, base, os.getpid())
        folder = _process_dirs.get(key)
        if folder is None or not os.path.isdir(folder):
            parent = base or tempfile.gettempdir()
            remove_orphaned_tempdirs(parent, purpose)
            folder = tempfile.mkdtemp(prefix=f"tilecore-{purpose}-{os.getpid()}-", dir=parent)
            _process_dirs[key] = folder
            atexit.register(_remove_if_mine, folder, os.getpid())
        return folder


def remove_orphaned_tempdirs(parent: str, purpose: str) -> int:
    """Remove the `process_tempdir(purpose)` folders in `parent` that belong to you and whose
    process no longer runs; return how many were removed. Nothing else is touched."""
    pattern = re.compile(rf"^tilecore-{re.escape(purpose)}-(\d+)-[A-Za-z0-9_]+$")
    removed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    prefix = f"tilecore-{purpose}-"
    for name in names:
        found = pattern.match(name) if name.startswith(prefix) else None
        if not found or int(found.group(1)) == os.getpid() or pid_running(int(found.group(1))):
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def _remove_if_mine(folder: str, pid: int) -> None:
    if os.getpid() == pid:  # a forked child that exits normally must not remove its parent's folder
        shutil.rmtree(folder, ignore_errors=True)


def write_private_file(folder: str, name: str, data: bytes) -> str:
    """Write `data` as `folder/name` (created exclusively, 0600) unless identical bytes are there."""
    path = os.path.join(folder, name)
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return path
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path
