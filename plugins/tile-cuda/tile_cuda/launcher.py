"""Lean kernel launch: the cubin loaded through the CUDA driver API, launched with cuLaunchKernel
(ctypes) on the caller's current stream. No TVM import, so a cached kernel starts fast."""
from __future__ import annotations

import ctypes
from typing import Any, Dict, List

from tilecore.diagnostics import TileRuntimeError

from . import toolchain

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CTYPES = {"int": ctypes.c_int32, "long long": ctypes.c_int64, "int64_t": ctypes.c_int64}


def _check(rc, what):
    if rc != 0:
        cu = toolchain.libcuda()
        msg = ctypes.c_char_p()
        cu.cuGetErrorString(rc, ctypes.byref(msg))
        raise TileRuntimeError(f"CUDA {what} failed: {msg.value.decode() if msg.value else rc}")


def _grid_fn(exprs: List[str]):
    from tilecore.lowering.launch_grid import grid_function

    return grid_function(exprs)


class CudaKernelLauncher:
    """`launch(args, bindings)` for one compiled kernel (see tilecore_launcher)."""

    def __init__(self, artifact):
        meta = artifact.meta
        self.cubin = artifact.blobs["cubin"]
        self.entry = meta["kernel_symbol"]
        self.params = meta["kernel_params"]          # [(kind, name)]
        self.param_names = meta["params"]            # Tile IR parameter names in order
        self.threads = int(meta["threads"])
        self.smem = int(meta["dyn_smem_bytes"])
        self.grid = _grid_fn(meta["grid_py"])
        self.arch = meta["arch"]
        self.functions: Dict[int, Any] = {}           # device ordinal -> CUfunction
        self.cu = toolchain.libcuda()
        if self.cu is None:
            raise TileRuntimeError("no CUDA driver (libcuda.so.1) on this machine: the cuda backend can "
                                   "compile here but not run")
        self.cu.cuLaunchKernel.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                                           ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.slots = []
        for kind, name in self.params:
            self.slots.append(ctypes.c_uint64(0) if kind == "ptr" else _CTYPES.get(kind, ctypes.c_int32)(0))
        self.argv = (ctypes.c_void_p * max(1, len(self.slots)))(
            *[ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in self.slots])
        self.index = {n: i for i, n in enumerate(self.param_names)}
        self._torch = None

    def function(self, device: int):
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
            raise TileRuntimeError(f"kernel was compiled for {self.arch} but GPU {device} is "
                                   f"sm_{have}; compile with target cuda:sm_{have}{suffix} (or target 'cuda' "
                                   f"on the GPU host)")
        mod = ctypes.c_void_p()
        _check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(self.cubin)), "cuModuleLoadData")
        fn = ctypes.c_void_p()
        _check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, self.entry.encode()), "cuModuleGetFunction")
        if self.smem > 48 * 1024:
            _check(cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem),
                   f"raising the shared-memory limit to {self.smem} bytes")
        self.functions[device] = fn
        return fn

    def __call__(self, args, bindings):
        ptrs, device, stream = [], None, None
        for name, a in zip(self.param_names, args):
            ptr, dev, st = _array_info(a, name)
            if device is None:
                device, stream = dev, st
            elif dev != device:
                raise TileRuntimeError(f"argument {name!r} is on cuda:{dev} but the others are on cuda:{device}")
            ptrs.append(ptr)
        fn = self.function(device or 0)
        for slot, (kind, name) in zip(self.slots, self.params):
            if kind == "ptr":
                slot.value = ptrs[self.index[name]]
            else:
                slot.value = int(bindings[name])
        gx, *rest = self.grid(bindings)
        gy = rest[0] if rest else 1
        gz = rest[1] if len(rest) > 1 else 1
        if gx <= 0 or gy <= 0 or gz <= 0:
            return None
        rc = self.cu.cuLaunchKernel(fn, gx, gy, gz, self.threads, 1, 1, self.smem, stream, self.argv, None)
        if rc != 0:
            _check(rc, "cuLaunchKernel")
        return None


def _array_info(a, name):
    """(device pointer, device ordinal, stream handle) of a torch / cupy / DLPack CUDA array."""
    mod = type(a).__module__
    if mod.startswith("torch"):
        if not a.is_cuda:
            raise TileRuntimeError(f"argument {name!r} is on {a.device}, expected a CUDA tensor")
        if not a.is_contiguous():
            raise TileRuntimeError(f"argument {name!r} is not contiguous (strides {a.stride()}); "
                                   f"pass .contiguous()")
        import torch

        dev = a.device.index or 0
        return a.data_ptr(), dev, torch._C._cuda_getCurrentRawStream(dev)
    if mod.startswith("cupy"):
        import cupy

        if not a.flags.c_contiguous:
            raise TileRuntimeError(f"argument {name!r} is not C-contiguous")
        return a.data.ptr, a.device.id, cupy.cuda.get_current_stream().ptr
    if hasattr(a, "__dlpack_device__"):
        dev_type, dev = a.__dlpack_device__()
        if dev_type not in (2, 13):  # kDLCUDA, kDLCUDAManaged
            raise TileRuntimeError(f"argument {name!r} lives on DLPack device type {dev_type}, not CUDA")
        import torch

        t = torch.from_dlpack(a)
        return _array_info(t, name)
    raise TileRuntimeError(f"argument {name!r} of type {type(a).__name__} is not a CUDA array "
                           f"(torch, cupy or DLPack)")
