"""Lean kernel launch: the cubin loaded through the CUDA driver API, launched with cuLaunchKernel
(ctypes) on the caller's current stream. No TVM import, so a cached kernel starts fast.

Three ways in (see tilecore_launcher):
- `launch(args, bindings)`: checks every argument (CUDA, contiguous, one device), then launches;
- `launch.specialize(args, bindings)`: called by tilecore's Kernel once per argument signature
  that passed its own checks, returns `run(args)` for later calls with that signature, which only
  reads the data pointers and the current stream, everything else (device, CUfunction, grid,
  scalar parameters, the parameter block) being fixed per signature;
- `launch.bind_call(args, bindings, input_positions, outputs, fallback)`: the whole Kernel call for
  one signature in C (tile_cuda/_fastcall.c, built at install time; None where it was not built or
  the arrays offer no DLPack C exchange API): it checks each input against the signature, allocates
  the outputs, packs the parameters and launches without Python work per argument, and hands any
  other call to `fallback`, the Kernel's checked path.

Kernels whose stage copies are TMA loads (tile_cuda/tma.py) also take tensor maps by value: the
Python paths encode them with cuTensorMapEncodeTiled (`TensorMapSlot`, again only when an address or
size changed); the C object gets each map encoded for the first call and replaces its address
through cuTensorMapReplaceAddress when an array moved.

Both refuse, before launching, an array whose device address is not a multiple of 16 bytes
(ARRAY_ALIGNMENT): the generated code moves global memory in 16-byte vectors and 16-byte cp.async
copies, and a misaligned one is a CUDA error that poisons the context for the rest of the process.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tilecore.diagnostics import TileRuntimeError

from . import toolchain

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CUDA_ERROR_INVALID_CONTEXT = 201
# Every array argument must start at a multiple of this many bytes (see the module docstring);
# allocations from torch/cupy do, offset views such as x[1:] usually do not.
ARRAY_ALIGNMENT = 16
_MISALIGNED = ARRAY_ALIGNMENT - 1
_CTYPES = {
    "int": ctypes.c_int32,
    "int32_t": ctypes.c_int32,
    "unsigned int": ctypes.c_uint32,
    "uint32_t": ctypes.c_uint32,
    "long long": ctypes.c_int64,
    "int64_t": ctypes.c_int64,
}


def _check(rc, what):
    if rc != 0:
        cu = toolchain.libcuda()
        msg = ctypes.c_char_p()
        cu.cuGetErrorString(rc, ctypes.byref(msg))
        raise TileRuntimeError(f"CUDA {what} failed: {msg.value.decode() if msg.value else rc}")


def misaligned_error(kernel: str, argument: str, address: int) -> TileRuntimeError:
    """The error for an array argument whose device address is not 16-byte aligned."""
    offset = address % ARRAY_ALIGNMENT
    return TileRuntimeError(
        f"kernel {kernel!r}, argument {argument!r}: device address {address:#x} is {offset} bytes past a "
        f"{ARRAY_ALIGNMENT}-byte boundary (address % {ARRAY_ALIGNMENT} = {offset}); the cuda backend's "
        f"kernels read and write arrays in {ARRAY_ALIGNMENT}-byte vectors, so every array argument must "
        f"start on a {ARRAY_ALIGNMENT}-byte boundary, which an offset view such as x[1:] usually does not. "
        f"Pass a {ARRAY_ALIGNMENT}-byte aligned tensor, e.g. x[1:].clone() instead of the view x[1:]"
    )


def _grid_fn(exprs: List[str]):
    from tilecore.lowering.launch_grid import grid_function

    return grid_function(exprs)


class _ParamBlock:
    """The kernel parameters as cuLaunchKernel reads them: one ctypes value per parameter and the
    array of their addresses. `pointers` are the (value, argument index) pairs of the pointer
    parameters, the ones that change from call to call; `maps` the (TensorMapSlot, argument index)
    pairs of the TMA tensor maps, encoded again when their tensor's address or shape changes."""

    def __init__(self, params: Sequence[Tuple[str, str]], index: Dict[str, int], maps=None):
        specs = {m.param: m for m in (maps or ())}
        self.values: List[Any] = [
            ctypes.c_uint64(0)
            if kind in ("ptr", "workspace")
            else TensorMapSlot(specs[name])
            if kind == "tmap"
            else _CTYPES.get(kind, ctypes.c_int32)(0)
            for kind, name in params
        ]
        self.argv = (ctypes.c_void_p * max(1, len(self.values)))(*[_address(v) for v in self.values])
        self.pointers = tuple((v, index[name]) for v, (kind, name) in zip(self.values, params) if kind == "ptr")
        self.maps = tuple((v, index[v.spec.array]) for v, (kind, _) in zip(self.values, params) if kind == "tmap")
        self.workspaces = tuple((v, name) for v, (kind, name) in zip(self.values, params) if kind == "workspace")
        self.scalars = tuple(
            (v, name) for v, (kind, name) in zip(self.values, params) if kind not in ("ptr", "tmap", "workspace")
        )

    def bind(self, bindings: Dict[str, int]) -> None:
        for value, name in self.scalars:
            value.value = int(bindings[name])

    def bind_workspaces(self, pointers: Dict[str, int]) -> None:
        """Point each workspace parameter (split-K) at its buffer."""
        for value, name in self.workspaces:
            value.value = pointers[name]

    def encode_maps(self, ptrs: Sequence[int], bindings: Dict[str, int]) -> None:
        """Encode each tensor map for its tensor's address `ptrs[i]` (argument order) and `bindings`."""
        for slot, i in self.maps:
            slot.encode(ptrs[i], bindings)


def _address(value) -> int:
    return value.address if isinstance(value, TensorMapSlot) else ctypes.addressof(value)


class TensorMapSlot:
    """One TMA tensor map parameter: 128 bytes, 128-byte aligned, written by the driver's
    cuTensorMapEncodeTiled (tile_cuda/tma.py describes what it holds); encoded again only when the
    tensor's address or dynamic sizes differ from the last call's."""

    SIZE, ALIGN = 128, 128  # cuda.h declares CUtensorMap alignas(128)

    def __init__(self, spec):
        self.spec = spec
        self._raw = (ctypes.c_uint8 * (self.SIZE + self.ALIGN))()
        base = ctypes.addressof(self._raw)
        self.address = (base + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        self._key: Optional[tuple] = None
        rank = len(spec.dims)
        self._box = (ctypes.c_uint32 * rank)(*spec.box)
        self._ones = (ctypes.c_uint32 * rank)(*([1] * rank))

    def encode(self, ptr: int, bindings: Dict[str, int]) -> None:
        from .tma import L2_PROMOTION_128B, encode_arguments

        dims, strides = encode_arguments(self.spec, bindings)
        key = (ptr, dims)
        if key == self._key:
            return
        rank = len(dims)
        rc = _encode_tiled()(
            ctypes.c_void_p(self.address),
            self.spec.data_type,
            rank,
            ctypes.c_void_p(ptr),
            (ctypes.c_uint64 * rank)(*dims),
            (ctypes.c_uint64 * max(1, rank - 1))(*strides),
            self._box,
            self._ones,
            0,  # CU_TENSOR_MAP_INTERLEAVE_NONE
            self.spec.swizzle,
            L2_PROMOTION_128B,
            0,  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zeros
        )
        if rc != 0:
            self._key = None
            _check(
                rc,
                f"cuTensorMapEncodeTiled for argument {self.spec.array!r} (dims {dims}, byte strides {strides}, "
                f"box {self.spec.box}; compile with tma=False to use cp.async instead)",
            )
        self._key = key


_ENCODE_TILED = None


def _encode_tiled():
    """The driver's cuTensorMapEncodeTiled as a ctypes function with its argument types."""
    global _ENCODE_TILED
    if _ENCODE_TILED is None:
        fn = toolchain.libcuda()["cuTensorMapEncodeTiled"]
        u32, u64p, u32p = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, u64p, u64p, u32p, u32p] + [ctypes.c_int] * 4
        fn.restype = ctypes.c_int
        _ENCODE_TILED = fn
    return _ENCODE_TILED


MAX_GRID = ((1 << 31) - 1, 65535, 65535)  # gridDim.x, .y, .z limits of every CUDA GPU since sm_30


class CudaKernelLauncher:
    """`launch(args, bindings)` for one compiled kernel (see tilecore_launcher)."""

    def __init__(self, artifact):
        meta = artifact.meta
        self.cubin = artifact.blobs["cubin"]
        self.name = artifact.entry  # the Tile IR function's name, for messages
        self.entry = meta["kernel_symbol"]
        self.params = meta["kernel_params"]  # [(kind, name)]
        self.param_names = meta["params"]  # Tile IR parameter names in order
        self.threads = int(meta["threads"])
        self.smem = int(meta["dyn_smem_bytes"])
        self.grid = _grid_fn(meta["grid_py"])
        self.arch = meta["arch"]
        self.functions: Dict[int, Any] = {}  # device ordinal -> CUfunction
        self.cu = toolchain.libcuda()
        if self.cu is None:
            raise TileRuntimeError(
                "no CUDA driver (libcuda.so.1) on this machine: the cuda backend can compile here but not run"
            )
        # cuLaunchKernel without argtypes, every argument passed as a ready ctypes object: ctypes'
        # per-argument conversion would be about half of the call's Python cost. (`cu[name]` is a
        # function object of our own; the library's shared one keeps whatever argtypes it has.)
        self._cu_launch = self.cu["cuLaunchKernel"]
        self._cu_launch.restype = ctypes.c_int
        self.index = {n: i for i, n in enumerate(self.param_names)}
        from .tma import specs_of

        self.tensor_maps = specs_of(meta.get("tensor_maps", ()))  # TMA tensor maps (kernel parameters)
        self._block = _ParamBlock(self.params, self.index, self.tensor_maps)  # the unspecialized path's
        self.workspaces = Workspaces(self.cu, meta.get("split_k"))  # split-K partial sums and counters
        self._stream = ctypes.c_void_p()
        self._fixed: Dict[tuple, tuple] = {}  # (device, grid) -> _fixed_arguments, for the plain path
        # A parameter block is written, then read by the driver during cuLaunchKernel, which ctypes
        # runs without the GIL: another thread must not write it in between.
        self._lock = threading.Lock()

    def function(self, device: int):
        """The CUfunction on `device` (the cubin is loaded into the current context on first use)."""
        f = self.functions.get(device)
        if f is not None:
            return f
        cu = self.cu
        _check(cu.cuInit(0), "cuInit")
        ctx = ctypes.c_void_p()
        cu.cuCtxGetCurrent(ctypes.byref(ctx))
        if not ctx.value:
            dev = ctypes.c_int()
            _check(cu.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
            _check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        major, minor = ctypes.c_int(), ctypes.c_int()
        dev = ctypes.c_int()
        cu.cuCtxGetDevice(ctypes.byref(dev))
        cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
        cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
        want = toolchain.arch_number(self.arch)
        have = major.value * 10 + minor.value
        # a cubin runs on its own major version with an equal or newer minor; 'a' targets only exactly
        if have // 10 != want // 10 or have < want or (self.arch.endswith(("a", "f")) and have != want):
            suffix = "a" if major.value in (9, 10, 12) else ""
            raise TileRuntimeError(
                f"kernel was compiled for {self.arch} but GPU {device} is "
                f"sm_{have}; compile with target cuda:sm_{have}{suffix} (or target 'cuda' "
                f"on the GPU host)"
            )
        mod = ctypes.c_void_p()
        _check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(self.cubin)), "cuModuleLoadData")
        fn = ctypes.c_void_p()
        _check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, self.entry.encode()), "cuModuleGetFunction")
        if self.smem > 48 * 1024:
            _check(
                cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem),
                f"raising the shared-memory limit to {self.smem} bytes",
            )
        self.functions[device] = fn
        return fn

    def _grid_dims(self, bindings) -> Optional[Tuple[int, int, int]]:
        """(gx, gy, gz) for `bindings`, or None when the grid is empty (nothing to launch)."""
        gx, *rest = self.grid(bindings)
        gy = rest[0] if rest else 1
        gz = rest[1] if len(rest) > 1 else 1
        if gx <= 0 or gy <= 0 or gz <= 0:
            return None
        if gx > MAX_GRID[0] or gy > MAX_GRID[1] or gz > MAX_GRID[2]:
            # cuLaunchKernel takes 32-bit unsigned sizes: a larger one would wrap into a short grid
            raise TileRuntimeError(
                f"kernel {self.name!r}: the grid ({gx}, {gy}, {gz}) for these dynamic dimensions is larger than "
                f"CUDA launches (at most {MAX_GRID[0]} x {MAX_GRID[1]} x {MAX_GRID[2]} blocks): split the work "
                f"into smaller calls or give each block more work"
            )
        return int(gx), int(gy), int(gz)

    def _fixed_arguments(self, fn, grid: Tuple[int, int, int]) -> tuple:
        """cuLaunchKernel's arguments before the stream, as ctypes objects."""
        u = ctypes.c_uint
        return (fn, u(grid[0]), u(grid[1]), u(grid[2]), u(self.threads), u(1), u(1), u(self.smem))

    def __call__(self, args, bindings):
        ptrs, device, stream_of = [], None, None
        for name, a in zip(self.param_names, args):
            ptr, dev, streams = _array_info(a, name)
            if device is None:
                device, stream_of = dev, streams
            elif dev != device:
                raise TileRuntimeError(f"argument {name!r} is on cuda:{dev} but the others are on cuda:{device}")
            ptrs.append(ptr)
        device = device or 0
        fn = self.function(device)
        grid = self._grid_dims(bindings)
        if grid is None:
            return None
        for name, ptr in zip(self.param_names, ptrs):
            if ptr & _MISALIGNED:
                raise misaligned_error(self.name, name, ptr)
        fixed = self._fixed.get((device, grid))
        if fixed is None:
            if len(self._fixed) >= 64:  # a kernel called with ever new dynamic sizes starts over
                self._fixed.clear()
            fixed = self._fixed[(device, grid)] = self._fixed_arguments(fn, grid)
        block = self._block
        with self._lock:
            for value, i in block.pointers:
                value.value = ptrs[i]
            block.bind(bindings)
            block.bind_workspaces(self.workspaces.get(device, grid))
            block.encode_maps(ptrs, bindings)
            self._stream.value = stream_of(device) if stream_of is not None else None
            rc = self._cu_launch(*fixed, self._stream, block.argv, None)
        if rc != 0:
            if rc == CUDA_ERROR_INVALID_CONTEXT and self._make_current(device):
                return self(args, bindings)
            _check(rc, "cuLaunchKernel")
        return None

    def _make_current(self, device: int) -> bool:
        """Make `device`'s primary context current on this thread, where none is (a thread that
        never touched CUDA); True if it changed anything, so the launch is worth repeating."""
        cu = self.cu
        ctx = ctypes.c_void_p()
        if cu.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value:
            return False
        dev = ctypes.c_int()
        _check(cu.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        _check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return True

    def specialize(self, args: Sequence[Any], bindings: Dict[str, int]) -> Optional[Callable[[Sequence[Any]], None]]:
        """`run(args)` for argument tuples with the signature of `args` (tilecore's Kernel calls this
        once per signature that passed its checks: same tensor types, dtypes, shapes, contiguity
        and device). None when `args` are not all CUDA torch tensors on one device (the plain path
        then checks and explains)."""
        torch = sys.modules.get("torch")
        if (
            torch is None
            or not args
            or not all(isinstance(a, torch.Tensor) and a.is_cuda and a.is_contiguous() for a in args)
        ):
            return None
        devices = {a.device.index or 0 for a in args}
        if len(devices) > 1:
            return None
        device = devices.pop()
        fn = self.function(device)
        grid = self._grid_dims(bindings)
        if grid is None:
            return _launch_nothing
        block = _ParamBlock(self.params, self.index, self.tensor_maps)
        block.bind(bindings)
        block.bind_workspaces(self.workspaces.get(device, grid))
        pointers, argv, maps = block.pointers, block.argv, block.maps
        stream = ctypes.c_void_p()
        current_stream = torch._C._cuda_getCurrentRawStream
        fixed = self._fixed_arguments(fn, grid)
        cu_launch = self._cu_launch
        lock = threading.Lock()  # one per parameter block (see __init__)
        make_current = self._make_current
        kernel_name, param_names = self.name, self.param_names

        # argv holds bare addresses into `block`: run keeps it alive (a default value) as long as run lives
        def run(args, _param_block=block):
            with lock:
                for value, i in pointers:
                    ptr = args[i].data_ptr()
                    if ptr & _MISALIGNED:  # per call: a view of the same signature may start anywhere
                        raise misaligned_error(kernel_name, param_names[i], ptr)
                    value.value = ptr
                for slot, i in maps:  # TMA tensor maps: encoded again for a new address
                    ptr = args[i].data_ptr()
                    if ptr & _MISALIGNED:
                        raise misaligned_error(kernel_name, param_names[i], ptr)
                    slot.encode(ptr, bindings)
                stream.value = current_stream(device)
                rc = cu_launch(*fixed, stream, argv, None)
            if rc:
                if rc == CUDA_ERROR_INVALID_CONTEXT and make_current(device):
                    return run(args)
                _check(rc, "cuLaunchKernel")

        return run

    def bind_call(
        self,
        args: Sequence[Any],
        bindings: Dict[str, int],
        input_positions: Sequence[int],
        outputs: Sequence[Tuple[int, Callable[[], Any], bool]],
        fallback: Callable[[tuple], Any],
    ):
        """The Kernel's whole call for the signature of `args` (a first call that passed its checks, in
        parameter order, outputs included), as one C object `call(inputs)`; outputs marked
        uninitialised are allocated through torch's DLPack C allocator instead of `allocate()`.
        None where the extension
        is missing, the arrays are not CUDA torch tensors on one device, or the grid is empty."""
        fastcall = _fastcall_module()
        torch = sys.modules.get("torch")
        if (
            fastcall is None
            or torch is None
            or not args
            or not all(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        ):
            return None
        devices = {a.device.index or 0 for a in args}
        if len(devices) > 1:
            return None
        device = devices.pop()
        fn = self.function(device)
        grid = self._grid_dims(bindings)
        if grid is None:
            return None
        workspaces = self.workspaces.get(device, grid)  # fixed per signature: a 64-bit "scalar" slot each
        try:
            params = tuple(
                ("scalar", workspaces[name])
                if kind == "workspace"
                else self._fastcall_param(kind, name, args, bindings)
                for kind, name in self.params
            )
            replace = (
                ctypes.cast(self.cu["cuTensorMapReplaceAddress"], ctypes.c_void_p).value if self.tensor_maps else 0
            )
            return fastcall.FastCall(
                ctypes.cast(self._cu_launch, ctypes.c_void_p).value,
                fn.value,
                grid,
                (self.threads, 1, 1),
                self.smem,
                ARRAY_ALIGNMENT,
                tuple(args),
                tuple(input_positions),
                tuple(outputs),
                params,
                fallback,
                replace,
            )
        except (TypeError, ValueError, BufferError, AttributeError):  # arrays it cannot read without Python calls
            return None

    def _fastcall_param(self, kind: str, name: str, args: Sequence[Any], bindings: Dict[str, int]) -> tuple:
        """One kernel parameter for the C FastCall: ("ptr", argument position), ("scalar", value) or
        ("tmap", argument position, the tensor map encoded for this call's array and sizes)."""
        if kind == "ptr":
            return ("ptr", self.index[name])
        if kind == "tmap":
            slot = TensorMapSlot(next(m for m in self.tensor_maps if m.param == name))
            i = self.index[slot.spec.array]
            slot.encode(args[i].data_ptr(), bindings)
            return ("tmap", i, ctypes.string_at(slot.address, TensorMapSlot.SIZE))
        return ("scalar", int(bindings[name]))


class Workspaces:
    """The split-K workspaces of one kernel (tile_cuda/split_k.py): per device and grid, a float32
    buffer of partial sums and an int32 counter per tile, allocated with cuMemAlloc on first use
    and zeroed once (each launch's last block resets its tile's counter). They are never freed (a
    launch still running may use them; a kernel has one per grid it was called with). Launches of
    one kernel on several streams at the same time would share the counters, so a split-K kernel
    must not run concurrently with itself."""

    def __init__(self, cu, meta: Optional[dict]):
        self.cu = cu
        self.meta = meta
        self._buffers: Dict[tuple, Dict[str, int]] = {}
        self._lock = threading.Lock()

    def get(self, device: int, grid: Tuple[int, int, int]) -> Dict[str, int]:
        """{parameter name: device pointer} for a launch of `grid` on `device` ({} without split-K);
        the device's context must be current (as it is after `CudaKernelLauncher.function`)."""
        if self.meta is None:
            return {}
        key = (device, grid)
        found = self._buffers.get(key)
        if found is not None:
            return found
        from .split_k import COUNTERS_PARAM, PARTIALS_PARAM, workspace_bytes

        with self._lock:
            if key not in self._buffers:
                sizes = dict(zip((PARTIALS_PARAM, COUNTERS_PARAM), workspace_bytes(self.meta, grid)))
                self._buffers[key] = {name: self._zeroed(nbytes) for name, nbytes in sizes.items()}
        return self._buffers[key]

    def _zeroed(self, nbytes: int) -> int:
        cu = self.cu
        ptr = ctypes.c_uint64()
        _check(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 16))), "cuMemAlloc (split-K workspace)")
        _check(cu.cuMemsetD8_v2(ptr, ctypes.c_ubyte(0), ctypes.c_size_t(max(nbytes, 16))), "cuMemsetD8")
        _check(cu.cuCtxSynchronize(), "cuCtxSynchronize")  # zeroed before any stream's launch reads it
        return ptr.value


def _fastcall_module():
    """tile_cuda._fastcall, or None where the optional extension was not built."""
    try:
        return importlib.import_module("tile_cuda._fastcall")
    except ImportError:
        return None


def _launch_nothing(args) -> None:
    """An empty grid launches nothing."""


def _torch_stream(device: int) -> int:
    return sys.modules["torch"]._C._cuda_getCurrentRawStream(device)


def _cupy_stream(device: int) -> int:
    import cupy

    return cupy.cuda.get_current_stream().ptr


def _array_info(a, name):
    """(device pointer, device ordinal, `stream(device)`) of a torch / cupy / DLPack CUDA array."""
    torch_module, cupy = sys.modules.get("torch"), sys.modules.get("cupy")  # imported by the caller, if used
    if torch_module is not None and isinstance(a, torch_module.Tensor):
        if not a.is_cuda:
            raise TileRuntimeError(f"argument {name!r} is on {a.device}, expected a CUDA tensor")
        if not a.is_contiguous():
            raise TileRuntimeError(f"argument {name!r} is not contiguous (strides {a.stride()}); pass .contiguous()")
        return a.data_ptr(), a.device.index or 0, _torch_stream
    if cupy is not None and isinstance(a, cupy.ndarray):
        if not a.flags.c_contiguous:
            raise TileRuntimeError(f"argument {name!r} is not C-contiguous")
        return a.data.ptr, a.device.id, _cupy_stream
    if hasattr(a, "__dlpack_device__"):
        dev_type, dev = a.__dlpack_device__()
        if dev_type not in (2, 13):  # kDLCUDA, kDLCUDAManaged
            raise TileRuntimeError(f"argument {name!r} lives on DLPack device type {dev_type}, not CUDA")
        try:
            import torch
        except ImportError:
            raise TileRuntimeError(
                f"argument {name!r} is a DLPack CUDA array, which tile-cuda reads through "
                f"torch; install torch or pass a torch or cupy array"
            ) from None
        return _array_info(torch.from_dlpack(a), name)
    raise TileRuntimeError(f"argument {name!r} of type {type(a).__name__} is not a CUDA array (torch, cupy or DLPack)")
