"""The host a cpu benchmark runs on, and timing tilecore against numpy side by side.

Shared by benchmarks/cpu_vs_numpy.py and benchmarks/cpu_gemm_blocking.py. It imports numpy
and tilecore only inside its functions, so that `pin` can set the thread counts before they load.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time


def pin(threads: int) -> None:
    """The same thread count for OpenBLAS and TVM's pool (before numpy or TVM load), and the cpu
    backend for jit kernels even on a host with a GPU (where the default target is the GPU)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ["TILECORE_TARGET"] = "cpu"


def add_clock_argument(parser) -> None:
    """`--clock wall|cpu`, the timing clock of the cpu benchmarks (see `clock`)."""
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: this process's CPU time per call (with --threads 1: the work of one core, "
        "robust on a machine other jobs share; with more threads spinning workers count)",
    )


def clock(name: str):
    """The timer of `--clock NAME`: this process's CPU time ("cpu") or the wall clock."""
    return time.process_time if name == "cpu" else time.perf_counter


def best_of(fn, repeat, clock=time.perf_counter):
    times = []
    for _ in range(repeat):
        t = clock()
        fn()
        times.append(clock() - t)
    return min(times)


# OpenBLAS's idle workers keep spinning for about 2^28 cycles (~0.1 s) after a call
# returns, and TVM's pool workers spin briefly too. Called back to back, one library's
# spinning workers take a core from the other (on 2 cores this cost tilecore's GEMM
# ~25%: 0.61-0.64x instead of ~0.85x). A pause before each timed call lets them sleep.
PAUSE_S = 0.3


def side_by_side(tile_fn, numpy_fn, repeat, clock=time.perf_counter, warm=True):
    """(tilecore times, numpy times) in seconds, measured alternately (after one untimed call of
    each unless warm is False)."""
    if warm:
        tile_fn()
        numpy_fn()  # warm up both (page faults, thread pools)
    tt, nt = [], []
    for _ in range(repeat):  # alternate so that noise from other processes hits both
        time.sleep(PAUSE_S)
        tt.append(best_of(tile_fn, 1, clock))
        time.sleep(PAUSE_S)
        nt.append(best_of(numpy_fn, 1, clock))
    return tt, nt


def openblas_core():
    """numpy's OpenBLAS: {library, corename, config} as the loaded library reports them (threadpoolctl's way)."""
    import ctypes

    import numpy as np

    np.ones(2) @ np.ones(2)  # make sure the BLAS is loaded
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    except OSError:
        return {}
    for path in paths:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (
            ("scipy_openblas_", "64_"),
            ("scipy_openblas_", ""),
            ("openblas_", "64_"),
            ("openblas_", ""),
        ):
            try:
                corename = getattr(lib, f"{prefix}get_corename{suffix}")
                config = getattr(lib, f"{prefix}get_config{suffix}")
            except AttributeError:
                continue
            corename.restype = config.restype = ctypes.c_char_p
            return {"library": os.path.basename(path), "corename": corename().decode(), "config": config().decode()}
    return {}


def lscpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")


def machine():
    import numpy as np
    import tvm

    import tilecore
    from tile_cpu.build import host_info
    from tile_cpu.gemm import micro_tile

    info = host_info()
    tile = micro_tile(info["vector_bits"], info["vector_regs"], "float32")
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{blas.get('name')} {blas.get('version')}"
    except Exception:
        blas = "unknown"
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cpu": model,
        "lscpu_model": lscpu_model(),
        "llvm_cpu": info["cpu"],
        "triple": info["triple"],
        "llvm_features": info["features"],
        "vector_bits": info["vector_bits"],
        "vector_registers": info["vector_regs"],
        "caches": info["caches"],
        "gemm_register_block_fp32": f"{tile.mr}x{tile.nr}",
        "openblas": openblas_core(),
        "env": {v: os.environ.get(v) for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
        "load_average": os.getloadavg(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas,
        "tvm": tvm.__version__,
        "llvm": info["llvm"],
        "tilecore": tilecore.__version__,
        "platform": platform.platform(),
    }
