"""The launcher's parameter packing, checked without a GPU: cuLaunchKernel is replaced by a ctypes
callback that reads the parameter block as the driver does (argv[i] -> value) at call time, and
CPU tensors marked as CUDA ones stand in for device tensors. What reaches a real driver and GPU is
tested in test_gpu.py."""

from __future__ import annotations

import ctypes
import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_cuda import launcher as L
from tilecore.plugin.backend import Artifact

torch = pytest.importorskip("torch")

# what tile_cuda's codegen records for kernels.elementwise_kernel(0, dynamic=True)
META = {
    "arch": "sm_90a",
    "kernel_symbol": "axpb_kernel",
    "params": ["X", "Y"],
    "kernel_params": [["ptr", "X"], ["ptr", "Y"], ["int", "n"]],
    "threads": 256,
    "dyn_smem_bytes": 0,
    "grid_py": ["((b['n'] + 1023) // 1024)"],
}
_LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *[ctypes.c_uint] * 7,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
)


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
        params = (
            ctypes.c_uint64.from_address(argv[0]).value,
            ctypes.c_uint64.from_address(argv[1]).value,
            ctypes.c_int32.from_address(argv[2]).value,
        )
        self.launches.append(
            {"fn": fn, "grid": (gx, gy, gz), "block": (bx, by, bz), "smem": smem, "stream": stream, "params": params}
        )
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
    launch = L.CudaKernelLauncher(
        Artifact(backend="cuda", target="cuda:sm_90a", entry="axpb", source="", blobs={"cubin": b""}, meta=META)
    )
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
        assert driver.launches[-1] == {
            "fn": 0x1234,
            "grid": (-(-n // 1024), 1, 1),
            "block": (256, 1, 1),
            "smem": 0,
            "stream": 0xABC00,
            "params": (a.data_ptr(), b.data_ptr(), n),
        }
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
    return (
        rf"kernel 'axpb', argument '{name}': device address 0x[0-9a-f]+ is {offset} bytes past a "
        rf"16-byte boundary \(address % 16 = {offset}\).*Pass a 16-byte aligned tensor, e\.g\. "
        rf"x\[1:\]\.clone\(\) instead of the view x\[1:\]"
    )


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

    code = (
        "import sys; from tile_cuda import plugin, launcher; "
        "from tilecore.lowering.launch_grid import grid_function; "
        "assert grid_function(['4', \"b['n'] // 2\"])({'n': 10}) == (4, 5); "
        "print(sorted(m for m in ('tvm', 'tilecore.ir.nodes', 'tilecore.frontend') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---- bind_call: the C FastCall (tile_cuda/_fastcall.c) against the same stand-in driver


@pytest.fixture(scope="module")
def fastcall(tmp_path_factory):
    """tile_cuda._fastcall as installed, else built here from its source with setuptools (what the
    plugin's install does), so that these tests always exercise the real extension."""
    import importlib.util
    import os
    import sys

    module = L._fastcall_module()
    if module is not None:
        yield module
        return
    from setuptools import Distribution, Extension

    source = os.path.join(os.path.dirname(L.__file__), "_fastcall.c")
    out = tmp_path_factory.mktemp("fastcall")
    dist = Distribution({"ext_modules": [Extension("tile_cuda._fastcall", [source])]})
    build = dist.get_command_obj("build_ext")
    build.build_lib, build.build_temp = str(out), str(out / "tmp")
    build.ensure_finalized()
    try:
        build.run()
    except Exception as err:  # no C compiler or no Python headers: the plugin falls back to ctypes
        pytest.skip(f"tile_cuda._fastcall cannot be built here: {err}")
    (path,) = (out / "tile_cuda").glob("_fastcall*")
    spec = importlib.util.spec_from_file_location("tile_cuda._fastcall", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["tile_cuda._fastcall"] = module
    yield module
    del sys.modules["tile_cuda._fastcall"]


class Fallback:
    """The Kernel's checked path, as far as FastCall sees it: records what it was handed."""

    def __init__(self):
        self.calls = []

    def __call__(self, inputs):
        self.calls.append(inputs)
        return "fallback"


def bound(launcher, n, dtype=torch.float32, outputs=()):
    """launcher.bind_call for (X, Y) of n elements, X the input; Y an input too unless `outputs`."""
    x, y = cuda_marked(n, dtype=dtype), cuda_marked(n, dtype=dtype)
    fallback = Fallback()
    inputs = (0,) if outputs else (0, 1)
    call = launcher.bind_call((x, y), {"n": n}, inputs, outputs, fallback)
    return call, fallback


def test_bind_call_launches_each_calls_arrays_with_the_signatures_sizes(driver, launcher, fastcall):
    call, fallback = bound(launcher, 5000)
    assert type(call).__name__ == "FastCall"
    for _ in range(3):  # fresh arrays each call: their own pointers
        a, b = cuda_marked(5000), cuda_marked(5000)
        assert call((a, b)) is None
        assert driver.launches[-1] == {
            "fn": 0x1234,
            "grid": (5, 1, 1),
            "block": (256, 1, 1),
            "smem": 0,
            "stream": None,
            "params": (a.data_ptr(), b.data_ptr(), 5000),
        }
    assert fallback.calls == [] and len(driver.launches) == 3


def test_bind_call_allocates_outputs_with_the_kernels_allocator(driver, launcher, fastcall):
    made = []

    def allocate():
        made.append(cuda_marked(3000))
        return made[-1]

    call, fallback = bound(launcher, 3000, outputs=((1, allocate),))
    x = cuda_marked(3000)
    out = call((x,))
    assert out is made[-1] and driver.launches[-1]["params"] == (x.data_ptr(), out.data_ptr(), 3000)
    assert fallback.calls == []


def _misses(n):
    """Calls whose arguments differ from an n-element float32 (X, Y) signature in one respect."""
    same = cuda_marked(n)
    return {
        "shape": (cuda_marked(n + 1), same),
        "dtype": (cuda_marked(n, dtype=torch.float16), same),
        "type": (torch.zeros(n), same),  # another Python type, even with the same data layout
        "not contiguous": (cuda_marked(2 * n)[::2], same),
        "misaligned": (offset_view(n, 1), same),
        "count": (same,),
        "not an array": (same, [0.0] * n),
    }


@pytest.mark.parametrize("what", list(_misses(8)))
def test_bind_call_hands_every_other_call_to_the_fallback(driver, launcher, fastcall, what):
    call, fallback = bound(launcher, 1000)
    args = _misses(1000)[what]
    assert call(args) == "fallback"
    assert fallback.calls == [args] and driver.launches == []


def test_uninitialised_outputs_come_from_the_array_librarys_c_allocator(driver, fastcall):
    """An output marked uninitialised is allocated through torch's DLPack C allocator, shaped like
    the first call's, and launched with its own pointer; the Python allocator is not called."""

    def never():
        raise AssertionError("the Python allocator was called")

    params = (("ptr", 0), ("ptr", 1), ("scalar", 3000))
    launch_address = ctypes.cast(driver.callback, ctypes.c_void_p).value
    x, y = torch.zeros(3000), torch.zeros(3000)
    call = fastcall.FastCall(
        launch_address, 0x1234, (3, 1, 1), (256, 1, 1), 0, 16, (x, y), (0,), ((1, never, True),), params, Fallback()
    )
    fresh = torch.randn(3000)
    out = call((fresh,))
    assert type(out) is torch.Tensor and out.shape == (3000,) and out.dtype == torch.float32
    assert driver.launches[-1]["params"] == (fresh.data_ptr(), out.data_ptr(), 3000)
    again = call((fresh,))  # `out` is alive, so the second output is new memory
    assert again is not out and again.data_ptr() != out.data_ptr()
    assert driver.launches[-1]["params"] == (fresh.data_ptr(), again.data_ptr(), 3000)
    with pytest.raises(ValueError, match="inputs and outputs must make up the arguments"):
        fastcall.FastCall(launch_address, 0x1234, (3, 1, 1), (256, 1, 1), 0, 16, (x, y), (0,), (), params, Fallback())
    with pytest.raises(ValueError, match="output position out of range"):
        fastcall.FastCall(
            launch_address, 0x1234, (3, 1, 1), (256, 1, 1), 0, 16, (x, y), (0,), ((5, never, True),), params, Fallback()
        )


def test_bind_call_falls_back_when_the_launch_or_an_allocation_fails(driver, launcher, fastcall, monkeypatch):
    def fail():
        raise MemoryError("out of device memory")

    call, fallback = bound(launcher, 100, outputs=((1, fail),))
    x = cuda_marked(100)
    assert call((x,)) == "fallback" and fallback.calls == [(x,)]
    call, fallback = bound(launcher, 100)
    monkeypatch.setattr(driver, "_launch", lambda *args: 700)  # CUDA_ERROR_ILLEGAL_ADDRESS
    driver.callback = _LAUNCH(lambda *args: 700)
    failing = L.CudaKernelLauncher(launcher_artifact())
    failing.functions[0] = ctypes.c_void_p(0x1234)
    call = failing.bind_call((x, cuda_marked(100)), {"n": 100}, (0, 1), (), fallback)
    args = (x, cuda_marked(100))
    assert call(args) == "fallback" and fallback.calls[-1] == args


def test_bind_call_is_garbage_collected_with_its_kernel(driver, launcher, fastcall):
    import weakref

    class Holder:  # stands for the Kernel: holds the call, whose fallback is one of its methods
        def checked(self, inputs):
            return inputs

    holder = Holder()
    holder.call = launcher.bind_call((cuda_marked(8), cuda_marked(8)), {"n": 8}, (0, 1), (), holder.checked)
    ref = weakref.ref(holder)
    del holder
    gc.collect()
    assert ref() is None


def test_bind_call_declines_what_it_cannot_take(launcher, fastcall):
    x = cuda_marked(8)
    assert launcher.bind_call((torch.zeros(8), x), {"n": 8}, (0, 1), (), Fallback()) is None  # not CUDA
    assert launcher.bind_call((x, x), {"n": 0}, (0, 1), (), Fallback()) is None  # empty grid


def launcher_artifact():
    return Artifact(backend="cuda", target="cuda:sm_90a", entry="axpb", source="", blobs={"cubin": b""}, meta=META)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5000), other=st.integers(1, 5000), half=st.booleans(), offset=st.integers(0, 7))
def test_bind_call_launches_exactly_the_calls_of_its_signature(fastcall, n, other, half, offset):
    """Property: a bound call launches iff the arrays have the bound dtype and shape and start on a
    16-byte boundary, with their own pointers and the bound size; anything else falls back."""
    drv = RecordingDriver()
    saved = L.toolchain.libcuda
    L.toolchain.libcuda = lambda: drv
    try:
        launch = L.CudaKernelLauncher(launcher_artifact())
    finally:
        L.toolchain.libcuda = saved
    launch.functions[0] = ctypes.c_void_p(0x1234)
    dtype = torch.float16 if half else torch.float32
    fallback = Fallback()
    call = launch.bind_call((cuda_marked(n, dtype=dtype), cuda_marked(n, dtype=dtype)), {"n": n}, (0, 1), (), fallback)
    a, b = offset_view(other, offset, dtype), cuda_marked(other, dtype=dtype)
    result = call((a, b))
    fits = other == n and (a.data_ptr() % 16 == 0)
    assert (result is None and len(drv.launches) == 1) if fits else (result == "fallback" and not drv.launches)
    if fits:
        assert drv.launches[0]["params"] == (a.data_ptr(), b.data_ptr(), n)


def test_grid_larger_than_cuda_launches_is_refused_never_wrapped(driver, launcher):
    """Issue 16: cuLaunchKernel's grid sizes are 32-bit unsigned; a grid of 2^32 + 1 blocks passed
    as ctypes.c_uint became a 1-block launch. No launch happens; the message names the grid."""
    x, y = cuda_marked(16), cuda_marked(16)
    n = (2**32 + 1) * 1024  # the bindings alone (the arrays are never read)
    with pytest.raises(
        L.TileRuntimeError,
        match=r"kernel 'axpb': the grid \(4294967297, 1, 1\) .* larger than "
        r"CUDA launches \(at most 2147483647 x 65535 x 65535",
    ):
        launcher([x, y], {"n": n})
    with pytest.raises(L.TileRuntimeError, match=r"the grid \(2147483648, 1, 1\)"):
        launcher.specialize((x, y), {"n": 2**31 * 1024})  # the per-signature run is refused too
    assert driver.launches == []


_REPLACE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def test_fastcall_passes_tensor_maps_by_value_with_each_calls_address(fastcall):
    """A ("tmap", position, map) parameter: the 128-byte map goes to the launch by value (from a
    128-byte aligned copy), its address replaced through the stand-in cuTensorMapReplaceAddress only
    when the array moved; the pointer and scalar parameters around it are unchanged."""
    replaced, launches = [], []

    def replace(tensor_map, address):
        replaced.append(address)
        ctypes.c_uint64.from_address(tensor_map + 8).value = address  # where this stand-in keeps it
        return 0

    def launch(fn, gx, gy, gz, bx, by, bz, smem, stream, argv, extra):
        assert argv[1] % 128 == 0
        words = (ctypes.c_uint64 * 16).from_address(argv[1])
        launches.append(
            (
                ctypes.c_uint64.from_address(argv[0]).value,
                words[0],
                words[8 // 8],
                words[15],
                ctypes.c_int32.from_address(argv[2]).value,
            )
        )
        return 0

    replace_cb, launch_cb = _REPLACE(replace), _LAUNCH(launch)
    template = bytes([7] + [0] * 126 + [9])  # a recognizable first and last byte
    x, y = torch.zeros(3000), torch.zeros(3000)
    params = (("ptr", 1), ("tmap", 0, template), ("scalar", 3000))
    call = fastcall.FastCall(
        ctypes.cast(launch_cb, ctypes.c_void_p).value,
        0x1234,
        (3, 1, 1),
        (256, 1, 1),
        0,
        16,
        (x, y),
        (0, 1),
        (),
        params,
        Fallback(),
        ctypes.cast(replace_cb, ctypes.c_void_p).value,
    )
    a, b = torch.randn(3000), torch.randn(3000)
    call((a, b))
    call((a, torch.randn(3000)))  # same A: the map is not touched again
    c = torch.randn(3000)
    call((c, b))
    assert replaced == [a.data_ptr(), c.data_ptr()]
    assert [(ptr, first, addr, last >> 56, n) for ptr, first, addr, last, n in launches][0] == (
        b.data_ptr(),
        7,
        a.data_ptr(),
        9,
        3000,
    )
    assert [addr for _, _, addr, _, _ in launches] == [a.data_ptr(), a.data_ptr(), c.data_ptr()]
    with pytest.raises(ValueError, match="needs replace_address"):
        fastcall.FastCall(0, 0x1234, (3, 1, 1), (256, 1, 1), 0, 16, (x, y), (0, 1), (), params, Fallback())


_ENCODE = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_uint32,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint32),
    ctypes.POINTER(ctypes.c_uint32),
    *[ctypes.c_int] * 4,
)


def test_tensor_map_slot_encodes_with_the_calls_sizes_and_only_when_they_change(monkeypatch):
    """What the Python paths hand cuTensorMapEncodeTiled (a stand-in with its signature): the
    aligned 128-byte map, dims innermost first with the dynamic size bound, byte strides, box, unit
    element strides, swizzle, zero fill; a repeated address and size is not encoded again."""
    from tile_cuda.tma import TensorMapSpec

    seen = []

    def encode(tmap, dtype, rank, address, dims, strides, box, steps, interleave, swizzle, l2, fill):
        seen.append(
            (tmap % 128, dtype, rank, address, dims[:rank], strides[: rank - 1], box[:rank], steps[:rank])
            + (interleave, swizzle, l2, fill)
        )
        return 0

    stand_in = _ENCODE(encode)
    monkeypatch.setattr(L, "_ENCODE_TILED", _ENCODE(ctypes.cast(stand_in, ctypes.c_void_p).value))
    slot = L.TensorMapSlot(TensorMapSpec("tc_tmap0", "K", 6, 2, (128, 2, "S", 1), (64, 1, 128, 1), 3))
    for address, s in ((0x10000, 4096), (0x10000, 4096), (0x20000, 4096), (0x20000, 512)):
        slot.encode(address, {"S": s})
    first = (0, 6, 4, 0x10000, [128, 2, 4096, 1], [256, 512, 256 * 2 * 4096], [64, 1, 128, 1], [1] * 4, 0, 3, 2, 0)
    assert seen[0] == first and len(seen) == 3
    assert seen[1][3] == 0x20000 and seen[2][4] == [128, 2, 512, 1]
