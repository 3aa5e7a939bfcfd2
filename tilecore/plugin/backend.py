"""What a backend declares, and what its codegen produces."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterable, Mapping, Optional, Tuple


@dataclass(frozen=True)
class ToolchainStatus:
    """What `tile backends` shows for a backend's toolchain and device.

    ok: the backend can compile here. device: the device it runs on, or None
    when none is present (compile may still work); name it even when ok is
    False, since a host that only runs prebuilt kernels (a conformance bundle)
    needs no compiler and its report says which device ran them. fix: the one
    command or package that repairs a missing piece ("" when ok).
    """

    ok: bool
    summary: str
    details: Tuple[Tuple[str, str], ...] = ()
    device: Optional[str] = None
    fix: str = ""


@dataclass(frozen=True)
class Capabilities:
    """Declared limits and features; the core checks kernels against them.

    features: names from tilecore.language.features.FEATURES.
    dtypes: dtypes the backend accepts for tensors and arithmetic.
    gemm_dtypes: accepted (input dtype, accumulator dtype) pairs for T.gemm.
    max_shared_memory: bytes of shared memory per block (None: unlimited).
    max_fragment_memory: bytes of fragment + local storage per block.
    max_threads: largest `threads=` per block.
    warp_size: threads that execute in lockstep (1 for CPU-like targets).
    vector_bytes: width of the widest vector load/store.
    memory_space: where kernel arguments must live ("cpu", "cuda", "rocm", "metal", "npu").
    tiers: conformance tiers this backend can pass here ("execute", "compile").
    index_bits: width of the signed integers the generated code indexes with (32 or 64); the
    Kernel refuses, at call time, a dynamic dimension or an array with more elements than that
    can count.
    max_tensor_bytes: the largest tensor argument, in bytes, that the backend's memory holds and
    its kernels address correctly (element offsets past 2^31 computed in 64 bits); None: not
    declared. Conformance certifies tensors past 2^31 bytes only for a backend declaring more.
    """

    features: FrozenSet[str]
    dtypes: FrozenSet[str]
    gemm_dtypes: FrozenSet[Tuple[str, str]] = frozenset()
    max_shared_memory: Optional[int] = None
    max_fragment_memory: Optional[int] = None
    max_threads: Optional[int] = None
    warp_size: int = 1
    vector_bytes: int = 16
    memory_space: str = "cpu"
    tiers: Tuple[str, ...] = ("execute",)
    index_bits: int = 32
    max_tensor_bytes: Optional[int] = None


def host_memory_bytes() -> Optional[int]:
    """Physical memory of this machine (None where the OS does not say): what a backend whose
    tensors live in host memory can declare as `Capabilities.max_tensor_bytes`."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


@dataclass(frozen=True)
class TileLangNames:
    """What a backend recognizes of TileLang's device-specific surface.

    The core names no vendor's device, compiler switch or primitive; a backend declares the
    TileLang spellings that belong to its hardware here, and `tilecore.compat.tilelang` and
    `tilecore.language` read them from the registry of installed backends.

    targets: TileLang `target=` device names that mean this backend besides its own name
        (tile-rocm declares TileLang's name for AMD GPUs); TileLang's "name:variant" keeps the
        variant ("dev:v2" -> "yourbackend:v2"). An installed backend's own name is never taken.
    pass_configs: TileLang `pass_configs` switches about this backend's hardware or toolchain,
        as {`PassConfigKey` member name: key string}, e.g. {"TL_X": "tl.x"} (tile-cuda declares
        TileLang's switches for its tensor cores and its compiler).
        They become members of `tilelang.PassConfigKey` and are accepted with no effect (as every
        TileLang switch: backends choose their own code generation), whatever the target, as long
        as this backend is installed.
    primitives: TileLang `T.<name>` primitives of this hardware that the language does not provide:
        exact names, or prefixes written "prefix*". `T.<name>` then raises UnsupportedFeatureError
        at the user's line, naming the backend and `primitive_note`.
    primitive_note: what those primitives program and what to write instead (shown in that error).
    device_version: a cheap callable giving the present device's version as (major, minor), or
        None without a device: what `tilelang.testing.requires_<target>_compute_version` compares
        for the TileLang target that maps to this backend (tile-cuda: the compute capability).
    """

    targets: Tuple[str, ...] = ()
    pass_configs: Mapping[str, str] = field(default_factory=dict)
    primitives: Tuple[str, ...] = ()
    primitive_note: str = ""
    device_version: Optional[Callable[[], Optional[Tuple[int, int]]]] = None

    def declares_primitive(self, name: str) -> bool:
        """Whether `T.<name>` is one of `primitives` (exactly, or by a "prefix*" entry)."""
        return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in self.primitives)


@dataclass
class Backend:
    """A backend registered by a plugin through `tilecore_register_backends`.

    name: the target prefix users write ("cuda" in "cuda:sm_90a").
    targets: the full target names it accepts; the first is its default.
    ir_versions: Tile IR versions it accepts (major.minor strings).
    toolchain_status: called by `tile backends` and before compiling.
    device_present: whether it can execute here (decides the default target).
    distribution / version: the installed package that provides it; part of the cache key.
    priority: among backends whose device is present, the higher wins the default.
    options: the compile options its codegen reads (tilecore.plugin.options.Option); any
    other option is an error naming these.
    toolchain_fingerprint: a cheap string that changes whenever the toolchain that
    generates code changes (compiler versions, library files); part of the cache key
    with a digest of the tilecore and plugin sources. It must not import heavy modules.
    tilelang: the TileLang target names, pass configs and primitives this backend owns
    (`TileLangNames`); empty by default.
    """

    name: str
    targets: Tuple[str, ...]
    ir_versions: Tuple[str, ...]
    capabilities: Capabilities
    toolchain_status: Callable[[], ToolchainStatus]
    device_present: Callable[[], bool] = lambda: False
    distribution: str = ""
    version: str = ""
    priority: int = 0
    description: str = ""
    options: Tuple[Any, ...] = ()
    toolchain_fingerprint: Optional[Callable[[], str]] = None
    tilelang: TileLangNames = field(default_factory=TileLangNames)

    def accepts_target(self, target: str) -> bool:
        """Whether `target` names this backend: its name, a listed target, or another
        `name:variant` when it lists variants (its codegen then checks the variant).
        A backend that lists no variants (e.g. "reference") accepts none: "reference:x" is a mistake."""
        if target == self.name or target in self.targets:
            return True
        has_variants = any(t.startswith(self.name + ":") for t in self.targets)
        return has_variants and target.startswith(self.name + ":")


@dataclass
class TileModule:
    """What codegen receives: the function after the pass pipeline, and the analyses.

    analyses holds pass results by name, e.g. "layout" (buffer -> layout from the
    fixpoint engine), "memory_plan" (offsets and bytes per scope), "bounds".
    """

    func: Any  # tilecore.ir.PrimFunc
    target: str
    analyses: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Artifact:
    """A compiled kernel, serializable so the on-disk cache and bundles can store it.

    source: human-readable code (LLVM IR, CUDA C++, assembly) for `kernel.source`.
    blobs: binary pieces (shared library, cubin, NPU program) by name.
    meta: JSON-serializable facts the launcher needs (entry name, param order,
    launch dims, shared memory bytes, ...).
    """

    backend: str
    target: str
    entry: str
    source: str = ""
    blobs: Dict[str, bytes] = field(default_factory=dict)
    meta: Dict[str, Any] = field(default_factory=dict)

    def header(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("blobs")
        d["blob_names"] = sorted(self.blobs)
        return d

    def to_json_header(self) -> str:
        return json.dumps(self.header(), sort_keys=True)


def package_file(package: str, *parts: str) -> str:
    """The path of `parts` inside installed package `package`, found without importing it
    ("" when the package is not installed); for toolchain fingerprints."""
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    return os.path.join(list(spec.submodule_search_locations)[0], *parts)


def files_fingerprint(paths: Iterable[str]) -> str:
    """`path:size:mtime` of each file (or `path:missing`): a cheap toolchain fingerprint that
    changes whenever a compiler or library is reinstalled or replaced."""
    import os

    parts = []
    for path in paths:
        try:
            st = os.stat(path)
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
        except (OSError, TypeError, ValueError):
            parts.append(f"{path}:missing")
    return ";".join(parts)


def tvm_fingerprint() -> str:
    """The installed TVM's libraries (LLVM is linked into libtvm), for backends built on TVM."""
    return files_fingerprint(
        [
            package_file("tvm", "lib", "libtvm.so"),
            package_file("tvm", "lib", "libtvm_runtime.so"),
            package_file("tvm_ffi", "lib", "libtvm_ffi.so"),
        ]
    )
