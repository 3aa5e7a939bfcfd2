"""Finding the ROCm toolchain pieces (ld.lld, device bitcode, HIP runtime) without importing TVM."""

from __future__ import annotations

import ctypes
import os
import shutil
from functools import lru_cache
from typing import Optional, Union

# apache-tvm 0.27 wheels are built against LLVM 22: the code object linker must match it
LLVM_MAJOR = 22
ARCHS = ("gfx942", "gfx90a", "gfx950", "gfx908", "gfx1100", "gfx1101", "gfx1200", "gfx1201")
DEFAULT_ARCH = "gfx942"
LLD_FIX = f"apt-get install lld-{LLVM_MAJOR}  (or install ROCm, whose llvm/bin has ld.lld)"
BITCODE_FIX = "apt-get install rocm-device-libs  (or install ROCm and set ROCM_PATH)"
BITCODE_NEEDED = ("ocml.bc", "ockl.bc", "oclc_wavefrontsize64_on.bc", "oclc_abi_version_500.bc")
# where ROCm device bitcode lives: ROCM_PATH/amdgcn/bitcode (ROCm), Debian's multiarch lib dir
ROCM_ROOTS = ("/opt/rocm", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr")


def parse_target(target: str) -> str:
    """ "rocm" -> the default gfx arch; "rocm:gfx90a" -> "gfx90a"; unknown archs are an error."""
    arch = target.split(":", 1)[1] if ":" in target else DEFAULT_ARCH
    if arch not in ARCHS:
        raise ValueError(f"unknown ROCm target {target!r}; use one of: " + ", ".join(f"rocm:{a}" for a in ARCHS))
    return arch


def wave_size(arch: str) -> int:
    """Wavefront width: 64 on GCN/CDNA (gfx9), 32 on RDNA (gfx10+)."""
    return 32 if arch.startswith("gfx1") else 64


def lds_bytes(arch: str) -> int:
    """LDS per workgroup: 160 KiB on gfx950, 64 KiB elsewhere."""
    return 160 * 1024 if arch == "gfx950" else 64 * 1024


@lru_cache(maxsize=1)
def find_lld() -> Optional[str]:
    """ld.lld matching TVM's LLVM, as TVM's ROCm linker looks for it."""
    for name in (
        f"ld.lld-{LLVM_MAJOR}",
        "ld.lld",
        f"/usr/lib/llvm-{LLVM_MAJOR}/bin/ld.lld",
        "/opt/rocm/llvm/bin/ld.lld",
    ):
        p = shutil.which(name) if not name.startswith("/") else (name if os.path.isfile(name) else None)
        if p:
            return p
    return None


def _has_bitcode(root: str) -> bool:
    d = os.path.join(root, "amdgcn", "bitcode")
    return all(os.path.isfile(os.path.join(d, f)) for f in BITCODE_NEEDED)


@lru_cache(maxsize=1)
def find_rocm_path() -> Optional[str]:
    """A folder whose amdgcn/bitcode holds the ROCm device libraries (ROCM_PATH first)."""
    env = os.environ.get("ROCM_PATH")
    if env and _has_bitcode(env):
        return env
    for root in ROCM_ROOTS:
        if _has_bitcode(root):
            return root
    return None


def configure_environment() -> Optional[str]:
    """Point ROCM_PATH at the device libraries for TVM when it is unset (or wrong); returns it."""
    root = find_rocm_path()
    if root and os.environ.get("ROCM_PATH") != root:
        os.environ["ROCM_PATH"] = root
    return root


_hip: Union[ctypes.CDLL, bool, None] = None  # None: not looked for yet; False: not installed


def libhip():
    """The HIP runtime (libamdhip64) via ctypes, or None where it is not installed."""
    global _hip
    if _hip is None:
        cands = ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5"]
        root = os.environ.get("ROCM_PATH") or "/opt/rocm"
        cands += [os.path.join(root, "lib", c) for c in cands[:2]]
        for n in cands:
            try:
                _hip = ctypes.CDLL(n)
                break
            except OSError:
                continue
        else:
            _hip = False
    return _hip if isinstance(_hip, ctypes.CDLL) else None


@lru_cache(maxsize=1)
def gpu_info() -> Optional[str]:
    """Name of AMD GPU 0 (hipDeviceGetName), or None where no HIP runtime or GPU is present."""
    hip = libhip()
    if hip is None:
        return None
    count = ctypes.c_int(0)
    try:
        if hip.hipGetDeviceCount(ctypes.byref(count)) != 0 or count.value < 1:
            return None
        name = ctypes.create_string_buffer(256)
        if hip.hipDeviceGetName(name, 256, 0) != 0:
            return "AMD GPU 0"
        return name.value.decode(errors="replace")
    except (AttributeError, OSError):
        return None


def device_present() -> bool:
    """Whether an AMD GPU can run kernels here."""
    return gpu_info() is not None
