"""The compile cache: compiled Artifacts on disk, one file per entry.

Location: ``$TILECORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tilecore``, else
``~/.cache/tilecore``. ``TILECORE_CACHE=0`` turns caching off (on disk and in
memory).

Key: sha256 over the Tile IR JSON, the backend's name and version, the full
target, the sorted options, the tilecore version and every loaded plugin's
distribution and version (a plugin may add passes or lowering rules to any
backend); so upgrading tilecore or a plugin, or changing any option, never
reuses a stale artifact.

Entry file format (version 1)::

    TILECORE-CACHE 1\\n
    {"key": ..., "parts": [["artifact", n0], ["blob:<name>", n1], ...],
     "size": total, "sha256": ...}\\n
    <payload: the parts' bytes, concatenated>

Size: at most ``$TILECORE_CACHE_MAX_MB`` megabytes (default 2048; 0 = unbounded).
Each process checks the total on its first write and every 32 writes after;
over the limit, the least recently used entries (a hit refreshes an entry's
modification time) are deleted until the cache is at 80% of the limit, so a
serving host that compiles many shapes never fills its disk.

"sha256" covers the header fields (without "sha256") and the payload, so a
corrupted or truncated entry is detected on read, ignored, deleted and rebuilt
by the caller. Writes go to a temporary file in the same folder followed by
`os.replace`, so a reader never sees half an entry and two processes writing
the same entry at once both succeed (the last rename wins; both are complete).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from typing import Any, Dict, Optional

from ..plugin.backend import Artifact

MAGIC = b"TILECORE-CACHE 1\n"
SUFFIX = ".tcc"

log = logging.getLogger("tilecore.cache")


def cache_enabled() -> bool:
    """False when TILECORE_CACHE is 0/false/no/off."""
    return os.environ.get("TILECORE_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


DEFAULT_MAX_MB = 2048
_TRIM_EVERY = 32  # writes between size checks (a check lists the whole cache folder)
_writes_since_trim: Dict[str, int] = {}  # cache root -> writes this process made since its last check


def cache_max_bytes() -> Optional[int]:
    """The size limit from TILECORE_CACHE_MAX_MB (None: unbounded)."""
    text = os.environ.get("TILECORE_CACHE_MAX_MB", "").strip()
    try:
        mb = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        log.warning("tilecore cache: TILECORE_CACHE_MAX_MB=%r is not a number; using %d",
                    text, DEFAULT_MAX_MB)
        mb = DEFAULT_MAX_MB
    return None if mb <= 0 else int(mb * 1e6)


def cache_dir() -> str:
    """The folder that holds cache entries (not created until the first write)."""
    explicit = os.environ.get("TILECORE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tilecore")


def _canonical(value: Any) -> Any:
    """A JSON-able, order-independent form of an option value."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=repr)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def cache_key(ir_json: str, backend_name: str, backend_version: str, target: str,
              options: Dict[str, Any], plugins: str = "") -> str:
    """The hex sha256 that names a compiled artifact.

    `plugins` names every loaded plugin with its distribution and version: any
    of them may add passes or lowering rules for the backend, so upgrading one
    must not reuse an artifact built without it.
    """
    from .. import __version__

    h = hashlib.sha256()
    for part in (ir_json, backend_name, backend_version, target,
                 json.dumps(_canonical(options), sort_keys=True), __version__, plugins):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed: no ambiguity between parts
        h.update(data)
    return h.hexdigest()


class CorruptEntry(Exception):
    """A cache file that fails its checks."""


def encode_entry(key: str, artifact: Artifact) -> bytes:
    """The bytes of one cache file for `artifact`."""
    parts = [("artifact", artifact.to_json_header().encode("utf-8"))]
    for name in sorted(artifact.blobs):
        blob = artifact.blobs[name]
        if not isinstance(blob, (bytes, bytearray)):
            raise TypeError(f"artifact blob {name!r} must be bytes, got {type(blob).__name__}")
        parts.append((f"blob:{name}", bytes(blob)))
    payload = b"".join(data for _, data in parts)
    header = {"key": key, "parts": [[n, len(d)] for n, d in parts], "size": len(payload)}
    header["sha256"] = _checksum(header, payload)
    return MAGIC + json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + payload


def decode_entry(data: bytes, key: Optional[str] = None) -> Artifact:
    """Parse and verify one cache file; raise CorruptEntry on any problem."""
    if not data.startswith(MAGIC):
        raise CorruptEntry("bad magic")
    newline = data.find(b"\n", len(MAGIC))
    if newline < 0:
        raise CorruptEntry("truncated header")
    try:
        header = json.loads(data[len(MAGIC):newline].decode("utf-8"))
        expected = header.pop("sha256")
        parts = header["parts"]
        size = header["size"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise CorruptEntry(f"bad header: {err}") from None
    payload = data[newline + 1:]
    if len(payload) != size:
        raise CorruptEntry(f"payload is {len(payload)} bytes, header says {size}")
    if _checksum(header, payload) != expected:
        raise CorruptEntry("checksum mismatch")
    if key is not None and header.get("key") != key:
        raise CorruptEntry("entry belongs to another key")
    offset = 0
    pieces: Dict[str, bytes] = {}
    for name, length in parts:
        pieces[name] = payload[offset:offset + length]
        offset += length
    try:
        meta = json.loads(pieces.pop("artifact").decode("utf-8"))
        blobs = {name[len("blob:"):]: data for name, data in pieces.items()}
        return Artifact(backend=meta["backend"], target=meta["target"], entry=meta["entry"],
                        source=meta.get("source", ""), blobs=blobs, meta=meta.get("meta", {}))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise CorruptEntry(f"bad artifact record: {err}") from None


def _checksum(header: Dict[str, Any], payload: bytes) -> str:
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode("utf-8"))
    h.update(payload)
    return h.hexdigest()


class DiskCache:
    """Artifacts stored under `root`, one file per key."""

    def __init__(self, root: Optional[str] = None):
        self.root = root or cache_dir()

    def path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + SUFFIX)

    def get(self, key: str) -> Optional[Artifact]:
        """The artifact stored for `key`, or None (absent, unreadable or corrupt)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as err:
            log.warning("tilecore cache: cannot read %s (%s); recompiling", path, err)
            return None
        try:
            artifact = decode_entry(data, key)
        except CorruptEntry as err:
            log.warning("tilecore cache: ignoring corrupt entry %s (%s); recompiling", path, err)
            self._discard(path, data)
            return None
        try:
            os.utime(path)  # recently used: the size limit evicts the oldest entries first
        except OSError:
            pass
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
        it is logged, never raised.
        """
        path = self.path(key)
        try:
            data = encode_entry(key, artifact)
        except (TypeError, ValueError) as err:  # meta or blobs a plugin made unserializable
            log.warning("tilecore cache: artifact of backend %s cannot be stored (%s)",
                        artifact.backend, err)
            return None
        folder = os.path.dirname(path)
        tmp = None
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=folder)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
            self._maybe_trim()
            return path
        except OSError as err:
            log.warning("tilecore cache: cannot write %s (%s)", path, err)
            return None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def _maybe_trim(self) -> None:
        count = _writes_since_trim.get(self.root)
        if count is not None and count < _TRIM_EVERY:
            _writes_since_trim[self.root] = count + 1
            return
        _writes_since_trim[self.root] = 1
        limit = cache_max_bytes()
        if limit is not None:
            self.trim(limit)

    def entries(self):
        """[(modification time, size, path)] of every entry."""
        found = []
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                if name.endswith(SUFFIX):
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.stat(path)
                    except OSError:  # removed by another process meanwhile
                        continue
                    found.append((st.st_mtime, st.st_size, path))
        return found

    def trim(self, limit: int) -> int:
        """If the entries total more than `limit` bytes, delete the least recently used until
        they fit in 80% of it; return how many were deleted."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        if total <= limit:
            return 0
        removed = 0
        for _, size, path in sorted(entries):
            if total <= 0.8 * limit:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            removed += 1
        log.info("tilecore cache: removed %d least recently used entries (limit %d bytes)", removed, limit)
        return removed

    def clear(self) -> int:
        """Delete every entry; return how many files were removed."""
        removed = 0
        if not os.path.isdir(self.root):
            return 0
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                if name.endswith(SUFFIX) or name.endswith(".tmp"):
                    try:
                        os.unlink(os.path.join(dirpath, name))
                        removed += 1
                    except OSError:
                        pass
        return removed
