"""Kernel launch through the HIP runtime (ctypes): hipModuleLoadData + hipModuleLaunchKernel.

Written to the HIP module API and the code object's own argument metadata; it has not
run here (no AMD GPU on the development machine) -- see the README.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Dict, List, Optional

from tilecore.diagnostics import TileRuntimeError

from . import toolchain

HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03


def _grid_fn(exprs: List[str]):
    from tilecore.lowering.launch_grid import grid_function

    return grid_function(exprs)


class RocmKernelLauncher:
    """`launch(args, bindings)` for one compiled code object (see tilecore_launcher)."""

    def __init__(self, artifact):
        meta = artifact.meta
        self.code_object = artifact.blobs["hsaco"]
        self.entry = meta["kernel_symbol"]
        self.kargs = meta["kernel_args"]  # [(name, kind, offset, size)]
        self.kernarg_size = int(meta["kernarg_size"])
        self.param_names = meta["params"]
        self.threads = int(meta["threads"])
        self.dyn_lds = int(meta.get("dyn_lds_bytes", 0))
        self.grid = _grid_fn(meta["grid_py"])
        self.arch = meta["arch"]
        self.functions: Dict[int, Any] = {}
        self.hip: Optional[ctypes.CDLL] = None
        self.index = {n: i for i, n in enumerate(self.param_names)}

    def _ensure_runtime(self) -> ctypes.CDLL:
        """The HIP runtime, checked at the first launch (compiling never needs it)."""
        if self.hip is not None:
            return self.hip
        hip = toolchain.libhip()
        if hip is None:
            raise TileRuntimeError(
                f"no HIP runtime (libamdhip64.so) on this machine: the rocm backend compiled this kernel "
                f"for {self.arch} but running it needs an AMD GPU with ROCm installed"
            )
        if not toolchain.device_present():
            raise TileRuntimeError(
                f"no AMD GPU is present: the rocm backend compiled this kernel for "
                f"{self.arch}, but it can only run on an AMD GPU"
            )
        hip.hipModuleLaunchKernel.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.hip = hip
        return hip

    def _check(self, rc, what):
        if rc != 0:
            hip = self._ensure_runtime()
            hip.hipGetErrorString.restype = ctypes.c_char_p
            msg = hip.hipGetErrorString(rc)
            hint = ""
            if rc == 209:  # hipErrorNoBinaryForGpu
                hint = f" (the kernel was compiled for {self.arch}; compile for this GPU's gfx target)"
            raise TileRuntimeError(f"HIP {what} failed: {msg.decode() if msg else rc}{hint}")

    def function(self, device: int):
        fn = self.functions.get(device)
        if fn is not None:
            return fn
        hip = self._ensure_runtime()
        self._check(hip.hipSetDevice(device), "hipSetDevice")
        mod = ctypes.c_void_p()
        self._check(hip.hipModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(self.code_object)), "hipModuleLoadData")
        fn = ctypes.c_void_p()
        self._check(hip.hipModuleGetFunction(ctypes.byref(fn), mod, self.entry.encode()), "hipModuleGetFunction")
        self.functions[device] = fn
        return fn

    def __call__(self, args, bindings):
        hip = self._ensure_runtime()
        ptrs, device, stream = {}, None, None
        for name, a in zip(self.param_names, args):
            ptr, dev, st = _array_info(a, name)
            if device is None:
                device, stream = dev, st
            elif dev != device:
                raise TileRuntimeError(f"argument {name!r} is on GPU {dev} but the others are on GPU {device}")
            ptrs[name] = ptr
        fn = self.function(device or 0)
        buf = pack_kernargs(self.kargs, self.kernarg_size, ptrs, bindings)
        gx, *rest = self.grid(bindings)
        gy = rest[0] if rest else 1
        gz = rest[1] if len(rest) > 1 else 1
        if gx <= 0 or gy <= 0 or gz <= 0:
            return None
        cbuf = (ctypes.c_char * max(1, len(buf))).from_buffer(buf) if buf else ctypes.create_string_buffer(1)
        size = ctypes.c_size_t(len(buf))
        extra = (ctypes.c_void_p * 5)(
            HIP_LAUNCH_PARAM_BUFFER_POINTER,
            ctypes.addressof(cbuf),
            HIP_LAUNCH_PARAM_BUFFER_SIZE,
            ctypes.addressof(size),
            HIP_LAUNCH_PARAM_END,
        )
        self._check(
            hip.hipModuleLaunchKernel(fn, gx, gy, gz, self.threads, 1, 1, self.dyn_lds, stream, None, extra),
            "hipModuleLaunchKernel",
        )
        return None


def pack_kernargs(kargs, size, pointers, bindings) -> bytearray:
    """The kernel argument segment: device pointers and dynamic dimensions at the offsets that
    the code object's metadata gives (little endian, as on every AMD GPU)."""
    buf = bytearray(size)
    for name, kind, off, nbytes in kargs:
        if kind == "ptr":
            struct.pack_into("<Q", buf, off, pointers[name])
        else:
            struct.pack_into("<q" if nbytes == 8 else "<i", buf, off, int(bindings[name]))
    return buf


def _array_info(a, name):
    """(device pointer, device ordinal, stream) of a torch ROCm tensor or a DLPack ROCm array."""
    mod = type(a).__module__
    if mod.startswith("torch"):
        import torch

        if a.device.type != "cuda" or getattr(torch.version, "hip", None) is None:
            raise TileRuntimeError(f"argument {name!r} is on {a.device}, expected a torch ROCm (HIP) tensor")
        if not a.is_contiguous():
            raise TileRuntimeError(f"argument {name!r} is not contiguous (strides {a.stride()}); pass .contiguous()")
        dev = a.device.index or 0
        return a.data_ptr(), dev, ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)
    if hasattr(a, "__dlpack_device__"):
        dev_type, dev = a.__dlpack_device__()
        if dev_type not in (10, 11):  # kDLROCM, kDLROCMHost
            raise TileRuntimeError(f"argument {name!r} lives on DLPack device type {dev_type}, not ROCm")
        import torch

        return _array_info(torch.from_dlpack(a), name)
    raise TileRuntimeError(f"argument {name!r} of type {type(a).__name__} is not a ROCm array (torch or DLPack)")
