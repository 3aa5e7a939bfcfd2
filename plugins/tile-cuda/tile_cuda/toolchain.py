"""Finding the CUDA toolchain (nvcc or NVRTC) and the GPU, without importing TVM or torch."""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import subprocess
from functools import lru_cache
from typing import Optional, Tuple, Union

NVCC_FIX = "pip install nvidia-cuda-nvcc  (or put the CUDA toolkit's bin/ on PATH, or set CUDA_HOME)"
NVRTC_FIX = "pip install nvidia-cuda-nvrtc cuda-bindings"


@lru_cache(maxsize=1)
def find_nvcc() -> Optional[str]:
    """Path of nvcc: $CUDA_HOME/bin, PATH, /usr/local/cuda, or the nvidia-cuda-nvcc wheel."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    p = shutil.which("nvcc")
    if p:
        return p
    for cand in ("/usr/local/cuda/bin/nvcc",):
        if os.path.isfile(cand):
            return cand
    try:
        import nvidia.cuda_nvcc as m  # type: ignore

        for base in getattr(m, "__path__", []):
            cand = os.path.join(base, "bin", "nvcc")
            if os.path.isfile(cand):
                return cand
    except Exception:
        pass
    return None


@lru_cache(maxsize=1)
def nvcc_identity() -> Optional[str]:
    """The last lines of `nvcc --version` ("release 13.0, V13.0.88" and its build), or None. Run,
    not read from the file: nvcc on PATH is often a wrapper script whose bytes never change when
    the toolkit it calls is upgraded."""
    nvcc = find_nvcc()
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except Exception:
        return None
    return " ".join(out.strip().splitlines()[-2:]) or None


def nvcc_version() -> Optional[str]:
    """nvcc's release ("13.0"), or None."""
    out = nvcc_identity()
    if not out:
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else out


@lru_cache(maxsize=1)
def find_nvrtc() -> Optional[str]:
    """A loadable libnvrtc (from the nvidia-cuda-nvrtc wheel or the system), or None."""
    names = []
    try:
        import nvidia.cuda_nvrtc as m  # type: ignore

        for base in getattr(m, "__path__", []):
            names += sorted(glob.glob(os.path.join(base, "lib", "libnvrtc.so*")))
    except Exception:
        pass
    names += ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    for n in names:
        try:
            ctypes.CDLL(n)
            return n
        except OSError:
            continue
    return None


def nvrtc_version() -> Optional[str]:
    """NVRTC's version ("13.0") from nvrtcVersion, or None when there is no NVRTC."""
    name = find_nvrtc()
    if name is None:
        return None
    major, minor = ctypes.c_int(), ctypes.c_int()
    if ctypes.CDLL(name).nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        return None
    return f"{major.value}.{minor.value}"


def compiler_fingerprint() -> str:
    """What makes the cubins (part of the cache key), cheaply enough for every cache hit: a real
    nvcc binary by its file and its toolkit's version.json and ptxas (stat only); an nvcc that is a
    script (a wrapper that execs some toolkit's nvcc: its bytes say nothing about that toolkit) by
    what `nvcc --version` reports (one run per process, ~30 ms); NVRTC by its version
    (compile_cubin prefers nvcc)."""
    from tilecore.plugin.backend import files_fingerprint

    nvcc = find_nvcc()
    if not nvcc:
        return f"nvrtc {nvrtc_version()}"
    if _is_script(nvcc):
        return f"nvcc {nvcc_identity()}"
    real = os.path.realpath(nvcc)
    bin_dir = os.path.dirname(real)
    return "nvcc " + files_fingerprint(
        [real, os.path.join(bin_dir, "ptxas"), os.path.join(os.path.dirname(bin_dir), "version.json")]
    )


def _is_script(path: str) -> bool:
    """Whether the file starts with "#!" (an interpreter script, not a compiled program)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


_libcuda: Union[ctypes.CDLL, bool, None] = None  # None: not looked for yet; False: not installed


def libcuda():
    """The CUDA driver library (ctypes), or None where no driver is installed."""
    global _libcuda
    if _libcuda is None:
        for n in ("libcuda.so.1", "libcuda.so"):
            try:
                _libcuda = ctypes.CDLL(n)
                break
            except OSError:
                continue
        else:
            _libcuda = False
    return _libcuda if isinstance(_libcuda, ctypes.CDLL) else None


@lru_cache(maxsize=1)
def gpu_info() -> Optional[Tuple[str, int, int, int]]:
    """(name, major, minor, driver version) of GPU 0, or None when no GPU is usable."""
    cu = libcuda()
    if cu is None:
        return None
    if cu.cuInit(0) != 0:
        return None
    count = ctypes.c_int(0)
    if cu.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    dev = ctypes.c_int(0)
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
    cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
    name = ctypes.create_string_buffer(256)
    cu.cuDeviceGetName(name, 256, dev)
    drv = ctypes.c_int(0)
    cu.cuDriverGetVersion(ctypes.byref(drv))
    return name.value.decode(), major.value, minor.value, drv.value


def device_present() -> bool:
    return gpu_info() is not None


def default_arch() -> str:
    """The present GPU's architecture (sm_90a on Hopper, for wgmma), else sm_80."""
    info = gpu_info()
    if info is None:
        return "sm_80"
    major, minor = info[1], info[2]
    return f"sm_{major}{minor}" + ("a" if major in (9, 10, 12) else "")


def parse_target(target: str) -> str:
    """'cuda' -> the present GPU's arch; 'cuda:sm_80' -> 'sm_80'. Raises ValueError otherwise."""
    if target in ("cuda", "", None):
        return default_arch()
    if not target.startswith("cuda:"):
        raise ValueError(f"not a cuda target: {target!r}")
    arch = target.split(":", 1)[1]
    if not re.fullmatch(r"sm_\d{2,3}[af]?", arch):
        raise ValueError(
            f"unknown CUDA architecture {arch!r} in target {target!r}; expected e.g. cuda:sm_80, cuda:sm_90a"
        )
    return arch


def arch_number(arch: str) -> int:
    match = re.match(r"sm_(\d+)", arch)
    if match is None:
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected sm_<number>)")
    return int(match.group(1))
