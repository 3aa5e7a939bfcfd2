"""The launcher's parameter packing, checked without a GPU: cuLaunchKernel is replaced by a ctypes
callback that reads the parameter block as the driver does (argv[i] -> value) at call time, and
CPU tensors marked as CUDA ones stand in for device tensors. What reaches a real driver and GPU is
tested in test_gpu.py."""
from __future__ import annotations

import ctypes
import gc

import pytest

from tilecore.plugin.backend import Artifact
from tile_cuda import launcher as L

torch = pytest.importorskip("torch")

# what tile_cuda's codegen records for kernels.elementwise_kernel(0, dynamic=True)
META = {"arch": "sm_90a", "kernel_symbol": "axpb_kernel", "params": ["X", "Y"],
        "kernel_params": [["ptr", "X"], ["ptr", "Y"], ["int", "n"]], "threads": 256, "dyn_smem_bytes": 0,
        "grid_py": ["((b['n'] + 1023) // 1024)"]}
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


class CudaMarked(torch.Tensor):
    """A CPU tensor that says it is a CUDA one (is_cuda), for the launcher's own checks."""

    @property
    def is_cuda(self):
        return True


def cuda_marked(n, value=0.0, dtype=torch.float32):
    return torch.Tensor._make_subclass(CudaMarked, torch.full((n,), value, dtype=dtype))


def offset_view(n, elements, dtype=torch.float32):
    """A contiguous n-element view starting `elements` elements into a 16-byte aligned allocation."""
    base = cuda_marked(n + elements, dtype=dtype)
    assert base.data_ptr() % 16 == 0  # torch's CPU allocator aligns to 64 bytes
    return base[elements:]


class RecordingDriver:
    """Just what the launcher calls on the hot path: cuLaunchKernel (read back as the driver would)."""

    def __init__(self):
        self.launches = []
        self.callback = _LAUNCH(self._launch)

    def _launch(self, fn, gx, gy, gz, bx, by, bz, smem, stream, argv, extra):
        params = (ctypes.c_uint64.from_address(argv[0]).value, ctypes.c_uint64.from_address(argv[1]).value,
                  ctypes.c_int32.from_address(argv[2]).value)
        self.launches.append({"fn": fn, "grid": (gx, gy, gz), "block": (bx, by, bz), "smem": smem,
                              "stream": stream, "params": params})
        return 0

    def __getitem__(self, name):
        assert name == "cuLaunchKernel"
        return self.callback


@pytest.fixture
def driver(monkeypatch):
    drv = RecordingDriver()
    monkeypatch.setattr(L.toolchain, "libcuda", lambda: drv)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0xABC00 + device, raising=False)
    return drv


@pytest.fixture
def launcher(driver):
    launch = L.CudaKernelLauncher(Artifact(backend="cuda", target="cuda:sm_90a", entry="axpb", source="",
                                           blobs={"cubin": b""}, meta=META))
    launch.functions[0] = ctypes.c_void_p(0x1234)  # as if the cubin were loaded on device 0
    return launch


def test_specialized_runs_pack_each_calls_pointers_and_their_own_sizes(driver, launcher):
    x, y = cuda_marked(5000), cuda_marked(5000)
    run_5000 = launcher.specialize((x, y), {"n": 5000})
    run_3000 = launcher.specialize((cuda_marked(3000), cuda_marked(3000)), {"n": 3000})
    gc.collect()
    junk = [ctypes.c_int32(77) for _ in range(2000)]  # reuse any memory a parameter block lost
    for n, run in ((5000, run_5000), (3000, run_3000), (5000, run_5000)):
        a, b = cuda_marked(n), cuda_marked(n)
        run((a, b))
        assert driver.launches[-1] == {"fn": 0x1234, "grid": (-(-n // 1024), 1, 1), "block": (256, 1, 1),
                                       "smem": 0, "stream": 0xABC00, "params": (a.data_ptr(), b.data_ptr(), n)}
    assert len(junk) == 2000


def test_plain_launch_checks_and_packs(driver, launcher):
    x, y = cuda_marked(3000), cuda_marked(3000)
    launcher([x, y], {"n": 3000})
    assert driver.launches[-1]["params"] == (x.data_ptr(), y.data_ptr(), 3000)
    assert driver.launches[-1]["grid"] == (3, 1, 1) and driver.launches[-1]["stream"] == 0xABC00
    launcher([x, y], {"n": 0})  # an empty grid launches nothing
    assert len(driver.launches) == 1
    with pytest.raises(L.TileRuntimeError, match="argument 'X' is on cpu, expected a CUDA tensor"):
        launcher([torch.zeros(3000), y], {"n": 3000})


def test_specialize_declines_what_it_cannot_run_alone(launcher):
    x = cuda_marked(8)
    assert launcher.specialize((torch.zeros(8), x), {"n": 8}) is None  # not CUDA: the plain path explains
    assert launcher.specialize((), {"n": 8}) is None
    assert launcher.specialize((x, x), {"n": 0})((x, x)) is None  # empty grid: nothing launched


# (dtype, elements into the allocation, address % 16): 16-byte vectors need every array to start on a
# 16-byte boundary, whichever way it came to be off
MISALIGNED = [(torch.float16, 1, 2), (torch.float32, 1, 4), (torch.float32, 2, 8), (torch.float16, 7, 14)]


def _misaligned_message(name, offset):
    return (rf"kernel 'axpb', argument '{name}': device address 0x[0-9a-f]+ is {offset} bytes past a "
            rf"16-byte boundary \(address % 16 = {offset}\).*Pass a 16-byte aligned tensor, e\.g\. "
            rf"x\[1:\]\.clone\(\) instead of the view x\[1:\]")


@pytest.mark.parametrize("dtype,elements,offset", MISALIGNED)
def test_plain_launch_refuses_a_misaligned_array_before_launching(driver, launcher, dtype, elements, offset):
    aligned, view = cuda_marked(3000, dtype=dtype), offset_view(3000, elements, dtype)
    assert view.is_contiguous() and view.data_ptr() % 16 == offset
    with pytest.raises(L.TileRuntimeError, match=_misaligned_message("X", offset)):
        launcher([view, aligned], {"n": 3000})
    with pytest.raises(L.TileRuntimeError, match=_misaligned_message("Y", offset)):
        launcher([aligned, view], {"n": 3000})
    assert driver.launches == []
    other = cuda_marked(3000, dtype=dtype)
    launcher([aligned, other], {"n": 3000})
    assert driver.launches[-1]["params"] == (aligned.data_ptr(), other.data_ptr(), 3000)


@pytest.mark.parametrize("dtype,elements,offset", MISALIGNED)
def test_specialized_run_checks_the_alignment_of_every_call(driver, launcher, dtype, elements, offset):
    x, y = cuda_marked(3000, dtype=dtype), cuda_marked(3000, dtype=dtype)
    run = launcher.specialize((x, y), {"n": 3000})
    run((x, y))
    # same signature (dtype, shape, contiguity, device) as the call it was made for: only the
    # address tells them apart, so the check is per call
    view = offset_view(3000, elements, dtype)
    with pytest.raises(L.TileRuntimeError, match=_misaligned_message("X", offset)):
        run((view, y))
    with pytest.raises(L.TileRuntimeError, match=_misaligned_message("Y", offset)):
        run((x, view))
    assert len(driver.launches) == 1
    run((x, y))  # the run (and its lock) still works after refusing
    assert len(driver.launches) == 2 and driver.launches[-1]["params"] == (x.data_ptr(), y.data_ptr(), 3000)


def test_an_offset_view_on_a_16_byte_boundary_launches(driver, launcher):
    view = offset_view(3000, 4)  # 4 float32 = 16 bytes in: a view, but aligned
    other = offset_view(3000, 8, torch.float16)
    launcher([view, other], {"n": 3000})
    run = launcher.specialize((view, other), {"n": 3000})
    run((view, other))
    assert [launch["params"] for launch in driver.launches] == [(view.data_ptr(), other.data_ptr(), 3000)] * 2


def test_cached_launch_path_stays_light():
    """Loading a cached artifact goes through the plugin, the launcher and the grid function only:
    neither TVM nor the IR node classes are imported (what a fresh process pays on a cache hit)."""
    import subprocess
    import sys

    code = ("import sys; from tile_cuda import plugin, launcher; "
            "from tilecore.lowering.launch_grid import grid_function; "
            "assert grid_function(['4', \"b['n'] // 2\"])({'n': 10}) == (4, 5); "
            "print(sorted(m for m in ('tvm', 'tilecore.ir.nodes', 'tilecore.frontend') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
