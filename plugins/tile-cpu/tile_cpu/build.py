"""Compile Tile IR to a shared library with TVM's LLVM backend, and load it again.

Everything here imports TVM lazily (inside functions): `tile backends` and the
plugin's registration stay cheap.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any, Dict, Optional, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT_C = os.path.join(_HERE, "support.c")
_lock = threading.Lock()
_targets: Dict[str, Dict[str, Any]] = {}


def host_info() -> Dict[str, Any]:
    """The host CPU as LLVM sees it (tile_cpu.target.describe("cpu"))."""
    return target_info("cpu")


def target_info(target: str = "cpu") -> Dict[str, Any]:
    """A `cpu[:mcpu[,+feat...]]` target as LLVM sees it: triple, cpu, ISA facts (cached)."""
    with _lock:
        info = _targets.get(target)
    if info is None:
        from .target import describe

        info = describe(target)
        with _lock:
            _targets[target] = info
    return info


def target_dict(info: Dict[str, Any]) -> Dict[str, Any]:
    """The TVM target dict of a target_info result."""
    from .target import llvm_target

    return llvm_target(info)


def compiler() -> Optional[str]:
    """The C compiler/linker TVM uses to make shared libraries (CXX, CC, g++, cc, clang)."""
    for name in (os.environ.get("CXX"), os.environ.get("CC"), "g++", "cc", "clang++", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def support_object(workdir: str) -> str:
    """support.c compiled (native_object); returns the object file in `workdir`."""
    return native_object(workdir, SUPPORT_C)


def native_object(workdir: str, source: str, flags: Sequence[str] = ()) -> str:
    """A C source compiled once per content hash (and flags, and compiler) and kept in the cache
    as a native object (checked against its keyed digest before every use); returns a private
    copy in `workdir`, which is what gets linked."""
    from tilecore.runtime.cache import DiskCache, cache_enabled

    with open(source, "rb") as f:
        src = f.read()
    key = src + (compiler() or "").encode() + "\0".join(flags).encode()
    name = hashlib.sha256(key).hexdigest()[:32] + ".o"
    cache = DiskCache() if cache_enabled() else None
    data = cache.get_native("cpu-support", name) if cache is not None else None
    path = os.path.join(workdir, os.path.splitext(os.path.basename(source))[0] + ".o")
    if data is not None:
        with open(path, "wb") as f:
            f.write(data)
        return path
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (install gcc or clang, or set CC)")
    cmd = [cc, "-O2", "-fPIC", *flags, "-x", "c++" if cc.endswith("++") else "c", "-c", source, "-o", path]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling {os.path.basename(source)} failed: {proc.stderr.strip()}")
    if cache is not None:
        with open(path, "rb") as f:
            cache.put_native("cpu-support", name, f.read())
    return path


def build_shared_library(prim_func, name: str, info: Dict[str, Any], with_support: bool = True, natives: Sequence = ()):
    """tvm.compile the PrimFunc for `info`'s target; return (library bytes, LLVM IR text, assembly text).
    natives: (C source, compiler flags) pairs whose objects are linked in too (tile_cpu.bf16dot).

    For a target whose code cannot run here (another CPU, cross-compilation) the
    library is None: only the LLVM IR and the assembly are produced.
    """
    import tvm

    mod = tvm.IRModule({name: prim_func})
    with tvm.transform.PassContext(opt_level=3):
        lib = tvm.compile(mod, target=target_dict(info))
    host_mod = lib.mod
    try:
        llvm_ir = host_mod.inspect_source("ll")
    except Exception:
        llvm_ir = ""
    try:
        asm = host_mod.inspect_source("s")
    except Exception:
        asm = ""
    if not info.get("runs_here", True):
        return None, llvm_ir, asm
    with tempfile.TemporaryDirectory(prefix="tile-cpu-") as work:
        addons = [support_object(work)] if with_support else []
        addons += [native_object(work, source, flags) for source, flags in natives]
        so = os.path.join(work, f"{name}.so")
        lib.export_library(so, addons=addons, workspace_dir=work)
        with open(so, "rb") as f:
            data = f.read()
    return data, llvm_ir, asm


_loaded: Dict[str, Any] = {}
_written: Dict[str, str] = {}  # sha256 of a library -> its private file, written by this process


def library_file(blob: bytes) -> str:
    """The library as a file in this process's private temp folder (mkdtemp, 0700, removed at
    exit), named by its sha256. `blob` comes from a cache entry whose keyed digest was checked,
    and no other user can write the folder, so what is loaded is exactly what was verified."""
    from tilecore.runtime.folders import process_tempdir, write_private_file

    digest = hashlib.sha256(blob).hexdigest()
    with _lock:
        path = _written.get(digest)
        if path is None:
            path = write_private_file(process_tempdir("cpu-libs"), f"{digest}.so", blob)
            _written[digest] = path
        return path


def load_library(blob: bytes):
    """The library as a TVM module (imports TVM; the launcher's fallback path)."""
    path = library_file(blob)
    with _lock:
        mod = _loaded.get(path)
        if mod is not None:
            return mod
        import tvm

        mod = tvm.runtime.load_module(path)
        _loaded[path] = mod
        return mod
