"""The compile cache: compiled Artifacts on disk, one file per entry, plus native objects.

Location: ``$TILECORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tilecore``, else
``~/.cache/tilecore``. ``TILECORE_CACHE=0`` turns caching off (on disk and in
memory). The folder is created 0700 and refused when someone else can write it
(see tilecore.runtime.folders; ``TILECORE_CACHE_TRUSTED=1`` accepts a shared one).

Key: sha256 over the Tile IR JSON, the backend's name and version, the full
target, the validated options in a canonical, type-tagged encoding (so ``1`` and
``"1"``, a tuple and a list, never share a key), the tilecore version, every
loaded plugin's distribution and version, and the backend's code fingerprint
(a digest of the tilecore and backend package sources and the backend's
toolchain fingerprint; see `tilecore.runtime.api`). An edited plugin, an
upgraded TVM or a changed option never reuses a stale artifact.

Entry file format (version 2)::

    TILECORE-CACHE 2\\n
    {"key": ..., "parts": [["artifact", n0], ["blob:<name>", n1], ...],
     "size": total, "mac": ...}\\n
    <payload: the parts' bytes, concatenated>

"mac" is an HMAC-SHA256 over the header fields (without "mac") and the payload,
keyed with a random secret kept in the cache folder (``.tilecore-key``, 0600): a
corrupted, truncated, malformed or forged entry (one written by someone who does
not hold the secret) is detected on read, deleted, and rebuilt by the caller.
Bundles, which travel between hosts, use the same format with an empty secret
(their integrity comes from the manifest digest; see tile_conformance.bundle).

Native objects a backend keeps between processes (e.g. tile-cpu's support
object) live in ``native/<kind>/<hex name>`` with a ``.mac`` file beside them and
are handed out only after their keyed digest matches (`DiskCache.get_native`).

Writes go to a temporary file ``.tc-<pid>-*.tmp`` in the same folder followed by
`os.replace`, so a reader never sees half an entry and two processes writing
the same entry at once both succeed.

Size: at most ``$TILECORE_CACHE_MAX_MB`` megabytes (default 2048; 0 = unbounded)
for everything the cache holds: entries, native objects and temporary files.
Each process checks the total on its first write and every 32 writes after;
temporary files of processes that no longer run (or older than an hour) are
removed, and over the limit the least recently used entries and native objects
(a hit refreshes a file's modification time) are deleted until the cache is at
80% of the limit. `tile cache clear` removes exactly these files (the secret
stays) and nothing else, whatever else the folder holds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from ..envflags import env_flag, env_number
from ..plugin.backend import Artifact
from .folders import folder_trusted, pid_running, private_folder

MAGIC = b"TILECORE-CACHE 2\n"
SUFFIX = ".tcc"
SECRET_FILE = ".tilecore-key"
NATIVE = "native"

log = logging.getLogger("tilecore.cache")

_ENTRY_DIR = re.compile(r"^[0-9a-f]{2}$")
_ENTRY_FILE = re.compile(r"^[0-9a-f]{64}\.tcc$")
_NATIVE_KIND = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_NATIVE_NAME = re.compile(r"^[0-9a-f]{16,64}(\.[a-z0-9]{1,8}){1,2}$")
_TEMP_FILE = re.compile(r"^\.tc-(\d+)-[A-Za-z0-9_]+\.tmp$")
ORPHAN_SECONDS = 3600  # a temp file this old is orphaned even when its process id is in use again


def cache_enabled() -> bool:
    """False when TILECORE_CACHE is 0/false/no/off (other values than those and 1/true/yes/on are an error)."""
    return bool(env_flag("TILECORE_CACHE", default=True))


DEFAULT_MAX_MB = 2048
_TRIM_EVERY = 32  # writes between size checks (a check lists the whole cache folder)
_writes_since_trim: Dict[str, int] = {}  # cache root -> writes this process made since its last check


def cache_max_bytes() -> Optional[int]:
    """The size limit from TILECORE_CACHE_MAX_MB (None: unbounded)."""
    mb = env_number("TILECORE_CACHE_MAX_MB", DEFAULT_MAX_MB)
    return None if mb <= 0 else int(mb * 1e6)


def cache_dir() -> str:
    """The folder that holds cache entries (not created until the first write)."""
    explicit = os.environ.get("TILECORE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tilecore")


def canonical_encoding(value: Any) -> Any:
    """A JSON-able form of an option value that keeps its type: 1, 1.0, True and "1" differ,
    a tuple differs from a list, dict keys keep their types and their order does not matter."""
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, float):
        return ["float", value.hex()]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [canonical_encoding(v) for v in value]
    if isinstance(value, dict):
        items = sorted(
            ([canonical_encoding(k), canonical_encoding(v)] for k, v in value.items()), key=lambda kv: json.dumps(kv[0])
        )
        return ["dict"] + items
    if isinstance(value, (set, frozenset)):
        return ["set"] + sorted((canonical_encoding(v) for v in value), key=json.dumps)
    return ["repr", type(value).__qualname__, repr(value)]


def cache_key(
    ir_json: str,
    backend_name: str,
    backend_version: str,
    target: str,
    options: Dict[str, Any],
    plugins: str = "",
    codegen: str = "",
) -> str:
    """The hex sha256 that names a compiled artifact.

    `plugins` names every loaded plugin with its distribution and version (any
    of them may add passes or lowering rules for the backend); `codegen` is the
    backend's code fingerprint (sources and toolchain).
    """
    from .. import __version__

    h = hashlib.sha256()
    for part in (
        ir_json,
        backend_name,
        backend_version,
        target,
        json.dumps(canonical_encoding(options)),
        __version__,
        plugins,
        codegen,
    ):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed: no ambiguity between parts
        h.update(data)
    return h.hexdigest()


class CorruptEntry(Exception):
    """A cache file that fails its checks."""


def encode_entry(key: str, artifact: Artifact, secret: bytes = b"") -> bytes:
    """The bytes of one cache file for `artifact`, authenticated with `secret`."""
    parts = [("artifact", artifact.to_json_header().encode("utf-8"))]
    for name in sorted(artifact.blobs):
        blob = artifact.blobs[name]
        if not isinstance(blob, (bytes, bytearray)):
            raise TypeError(f"artifact blob {name!r} must be bytes, got {type(blob).__name__}")
        parts.append((f"blob:{name}", bytes(blob)))
    payload = b"".join(data for _, data in parts)
    header = {"key": key, "parts": [[n, len(d)] for n, d in parts], "size": len(payload)}
    header["mac"] = _mac(secret, header, payload)
    return MAGIC + json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + payload


def decode_entry(data: bytes, key: Optional[str] = None, secret: bytes = b"") -> Artifact:
    """Parse and verify one cache file; raise CorruptEntry on any problem (never anything else)."""
    if not data.startswith(MAGIC):
        raise CorruptEntry("bad magic")
    newline = data.find(b"\n", len(MAGIC))
    if newline < 0:
        raise CorruptEntry("truncated header")
    try:
        header = json.loads(data[len(MAGIC) : newline].decode("utf-8"))
        expected = header.pop("mac")
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as err:
        raise CorruptEntry(f"bad header: {err}") from None
    payload = data[newline + 1 :]
    if not isinstance(expected, str) or not hmac.compare_digest(_mac(secret, header, payload), expected):
        raise CorruptEntry("authentication code mismatch (corrupt, or not written with this cache's key)")
    if key is not None and header.get("key") != key:
        raise CorruptEntry("entry belongs to another key")
    pieces = _split_payload(header, payload)
    return _artifact_from(pieces)


def _split_payload(header: Dict[str, Any], payload: bytes) -> Dict[str, bytes]:
    parts, size = header.get("parts"), header.get("size")
    if not isinstance(parts, list) or not isinstance(size, int) or len(payload) != size:
        raise CorruptEntry("malformed header: parts must be a list and size the payload's length")
    offset = 0
    pieces: Dict[str, bytes] = {}
    for part in parts:
        if (
            not (
                isinstance(part, list)
                and len(part) == 2
                and isinstance(part[0], str)
                and isinstance(part[1], int)
                and part[1] >= 0
            )
            or part[0] in pieces
        ):
            raise CorruptEntry(f"malformed part {part!r}")
        pieces[part[0]] = payload[offset : offset + part[1]]
        offset += part[1]
    if offset != size or "artifact" not in pieces:
        raise CorruptEntry("parts do not cover the payload, or there is no artifact record")
    return pieces


def _artifact_from(pieces: Dict[str, bytes]) -> Artifact:
    try:
        meta = json.loads(pieces.pop("artifact").decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptEntry(f"bad artifact record: {err}") from None
    if (
        not isinstance(meta, dict)
        or not all(isinstance(meta.get(f), str) for f in ("backend", "target", "entry"))
        or not isinstance(meta.get("source", ""), str)
        or not isinstance(meta.get("meta", {}), dict)
        or not all(name.startswith("blob:") for name in pieces)
    ):
        raise CorruptEntry("malformed artifact record")
    blobs = {name[len("blob:") :]: data for name, data in pieces.items()}
    return Artifact(
        backend=meta["backend"],
        target=meta["target"],
        entry=meta["entry"],
        source=meta.get("source", ""),
        blobs=blobs,
        meta=meta.get("meta", {}),
    )


def _mac(secret: bytes, header: Dict[str, Any], payload: bytes) -> str:
    h = hmac.new(secret, json.dumps(header, sort_keys=True).encode("utf-8"), hashlib.sha256)
    h.update(payload)
    return h.hexdigest()


def _atomic_write(folder: str, name: str, data: bytes) -> str:
    """Write `folder/name` through a `.tc-<pid>-*.tmp` file and os.replace; return the path."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".tc-{os.getpid()}-", suffix=".tmp", dir=folder)
    tmp: Optional[str] = tmp_name  # None once renamed into place
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        path = os.path.join(folder, name)
        os.replace(tmp_name, path)
        tmp = None
        return path
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_secrets: Dict[str, bytes] = {}  # cache root -> its secret (read once per process)


class DiskCache:
    """Artifacts stored under `root`, one file per key, and native objects under `root/native`."""

    def __init__(self, root: Optional[str] = None):
        self.root = root or cache_dir()

    def path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + SUFFIX)

    def secret(self) -> bytes:
        """The key that authenticates this cache's files (the folder is checked first)."""
        return self._open()

    def _open(self) -> bytes:
        """Check the folder is private (creating it) and return its secret."""
        private_folder(self.root, "tilecore cache folder", "TILECORE_CACHE_DIR")
        secret = _secrets.get(self.root)
        if secret is None:
            secret = _secrets[self.root] = self._read_or_make_secret()
        return secret

    def _read_or_make_secret(self) -> bytes:
        path = os.path.join(self.root, SECRET_FILE)
        for _ in range(3):
            try:
                with open(path, "rb") as f:
                    secret = f.read()
                if len(secret) == 32:
                    return secret
                os.unlink(path)  # malformed: replace it (entries made with it stop verifying)
            except FileNotFoundError:
                pass
            fd, tmp = tempfile.mkstemp(prefix=f".tc-{os.getpid()}-", suffix=".tmp", dir=self.root)
            try:
                os.fchmod(fd, 0o644 if folder_trusted() else 0o600)
                os.write(fd, os.urandom(32))
                os.close(fd)
                os.link(tmp, path)  # fails when another process made it first: then read theirs
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        raise OSError(f"cannot create the cache secret {path}")

    def get(self, key: str) -> Optional[Artifact]:
        """The artifact stored for `key`, or None (absent, unreadable or corrupt)."""
        path = self.path(key)
        if not os.path.isdir(self.root):
            return None
        secret = self._open()
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as err:
            log.warning("tilecore cache: cannot read %s (%s); recompiling", path, err)
            return None
        try:
            artifact = decode_entry(data, key, secret)
        except CorruptEntry as err:
            log.warning("tilecore cache: ignoring corrupt entry %s (%s); recompiling", path, err)
            self._discard(path, data)
            return None
        _touch(path)
        return artifact

    def _discard(self, path: str, data: bytes) -> None:
        # Remove the bad file unless another process already replaced it with a good one.
        try:
            with open(path, "rb") as f:
                if f.read() != data:
                    return
            os.unlink(path)
        except OSError:
            pass

    def put(self, key: str, artifact: Artifact) -> Optional[str]:
        """Store `artifact` atomically; return the path, or None when the disk refused it.

        A full or read-only disk only costs the next process a recompile, so
        it is logged, never raised (an unsafe folder is raised, by `_open`).
        """
        try:
            secret = self._open()
        except OSError as err:
            log.warning("tilecore cache: cannot write to %s (%s)", self.root, err)
            return None
        try:
            data = encode_entry(key, artifact, secret)
        except (TypeError, ValueError) as err:  # meta or blobs a plugin made unserializable
            log.warning("tilecore cache: artifact of backend %s cannot be stored (%s)", artifact.backend, err)
            return None
        return self._write(os.path.join(self.root, key[:2]), key + SUFFIX, data)

    def _write(self, folder: str, name: str, data: bytes) -> Optional[str]:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            path = _atomic_write(folder, name, data)
        except OSError as err:
            log.warning("tilecore cache: cannot write %s (%s)", os.path.join(folder, name), err)
            return None
        self._maybe_trim()
        return path

    # ------------------------------------------------------------------ native objects

    def _native_path(self, kind: str, name: str) -> str:
        if not _NATIVE_KIND.match(kind) or not _NATIVE_NAME.match(name):
            raise ValueError(
                f"native object {kind}/{name}: kind must be lower-case letters, digits, "
                f"'-' or '_', and the name a hex digest with one or two suffixes"
            )
        return os.path.join(self.root, NATIVE, kind, name)

    def get_native(self, kind: str, name: str) -> Optional[bytes]:
        """The bytes of native object `kind/name` if present and its keyed digest matches, else
        None (a mismatching object is deleted: the caller rebuilds it). Load or link the
        returned bytes from a private copy, never the cache file itself."""
        path = self._native_path(kind, name)
        if not os.path.isdir(self.root):
            return None
        secret = self._open()
        try:
            with open(path, "rb") as f:
                data = f.read()
            with open(path + ".mac", "rb") as f:
                mac = f.read().decode("ascii", "replace")
        except FileNotFoundError:
            return None
        except OSError as err:
            log.warning("tilecore cache: cannot read %s (%s); rebuilding it", path, err)
            return None
        if not hmac.compare_digest(_native_mac(secret, kind, name, data), mac):
            log.warning("tilecore cache: native object %s fails its check; rebuilding it", path)
            for victim in (path, path + ".mac"):
                try:
                    os.unlink(victim)
                except OSError:
                    pass
            return None
        _touch(path)
        return data

    def put_native(self, kind: str, name: str, data: bytes) -> Optional[str]:
        """Store native object `kind/name` with its keyed digest; return its path or None."""
        path = self._native_path(kind, name)
        try:
            secret = self._open()
        except OSError as err:
            log.warning("tilecore cache: cannot write to %s (%s)", self.root, err)
            return None
        folder = os.path.dirname(path)
        # the digest first: an object without a matching digest is never handed out
        if self._write(folder, name + ".mac", _native_mac(secret, kind, name, data).encode()) is None:
            return None
        return self._write(folder, name, data)

    # ------------------------------------------------------------------ size and cleaning

    def _maybe_trim(self) -> None:
        count = _writes_since_trim.get(self.root)
        if count is not None and count < _TRIM_EVERY:
            _writes_since_trim[self.root] = count + 1
            return
        _writes_since_trim[self.root] = 1
        self.trim(cache_max_bytes())

    def managed_files(self) -> List[Tuple[str, float, int, str]]:
        """[(kind, modification time, size, path)] of every file this cache created, kind being
        "entry", "native", "digest" (a native object's .mac) or "temp". Nothing else in the
        folder is listed: only files whose folder and name match what the cache writes."""
        found = []
        folders = []
        try:
            for name in os.listdir(self.root):
                if _ENTRY_DIR.match(name):
                    folders.append((os.path.join(self.root, name), _ENTRY_FILE, "entry"))
            for kind in os.listdir(os.path.join(self.root, NATIVE)):
                if _NATIVE_KIND.match(kind):
                    folders.append((os.path.join(self.root, NATIVE, kind), _NATIVE_NAME, "native"))
        except OSError:
            pass
        for folder, pattern, kind in folders:
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if pattern.match(name):
                    what = kind
                elif kind == "native" and name.endswith(".mac") and pattern.match(name[:-4]):
                    what = "digest"
                elif _TEMP_FILE.match(name):
                    what = "temp"
                else:
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:  # removed by another process meanwhile
                    continue
                found.append((what, st.st_mtime, st.st_size, path))
        return found

    def entries(self) -> List[Tuple[float, int, str]]:
        """[(modification time, size, path)] of every entry."""
        return [(mtime, size, path) for kind, mtime, size, path in self.managed_files() if kind == "entry"]

    def trim(self, limit: Optional[int]) -> int:
        """Remove orphaned temp files; then, if the cache holds more than `limit` bytes (None:
        no limit), delete the least recently used entries and native objects until it fits in
        80% of it. Return how many files were deleted."""
        files = self.managed_files()
        now = time.time()
        removed, total, candidates = 0, 0, []
        for kind, mtime, size, path in files:
            if kind == "temp":
                temp = _TEMP_FILE.match(os.path.basename(path))
                pid = int(temp.group(1)) if temp else -1  # managed_files matched it: never -1
                if now - mtime > ORPHAN_SECONDS or (pid != os.getpid() and not pid_running(pid)):
                    removed += _unlink(path)
                    continue
            total += size
            if kind in ("entry", "native"):
                extra = 0
                if kind == "native":
                    try:
                        extra = os.path.getsize(path + ".mac")
                    except OSError:
                        pass
                candidates.append((mtime, size + extra, path, kind))
        if limit is None or total <= limit:
            return removed
        for _, size, path, kind in sorted(candidates):
            if total <= 0.8 * limit:
                break
            if _unlink(path):
                removed += 1
                total -= size
                if kind == "native":
                    _unlink(path + ".mac")
        log.info("tilecore cache: removed %d files (limit %d bytes)", removed, limit)
        return removed

    def clear(self) -> int:
        """Delete every file the cache created (entries, native objects, temp files; the
        secret stays) and the cache's emptied subfolders; return how many files were removed."""
        removed = sum(_unlink(path) for _, _, _, path in self.managed_files())
        for folder in self._subfolders():
            try:
                os.rmdir(folder)  # only when empty
            except OSError:
                pass
        try:
            os.rmdir(os.path.join(self.root, NATIVE))
        except OSError:
            pass
        return removed

    def _subfolders(self) -> set[str]:
        out: set[str] = set()
        try:
            out |= {os.path.join(self.root, n) for n in os.listdir(self.root) if _ENTRY_DIR.match(n)}
            native = os.path.join(self.root, NATIVE)
            out |= {os.path.join(native, n) for n in os.listdir(native) if _NATIVE_KIND.match(n)}
        except OSError:
            pass
        return out


def _native_mac(secret: bytes, kind: str, name: str, data: bytes) -> str:
    h = hmac.new(secret, f"native/{kind}/{name}\n".encode(), hashlib.sha256)
    h.update(data)
    return h.hexdigest()


def _touch(path: str) -> None:
    try:
        os.utime(path)  # recently used: the size limit evicts the oldest files first
    except OSError:
        pass


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
        return 1
    except OSError:
        return 0
