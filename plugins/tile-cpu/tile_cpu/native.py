"""Calling a compiled kernel library without importing TVM (the fast path).

A kernel library exported by TVM's LLVM codegen is a plain shared object: its
entry `__tvm_ffi_<name>` follows the tvm-ffi C calling convention
(`int f(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result)`,
tvm_ffi/include/tvm/ffi/c_api.h), it imports TVMFFIErrorSetRaisedFromCStrParts
from libtvm_ffi, and it holds "context symbols" (`__TVMBackendParallelLaunch`,
`__TVMBackendAllocWorkspace`, ...): function-pointer variables that TVM's
loader fills with the runtime's functions. This module does the same with
ctypes: it loads libtvm_ffi and libtvm_runtime by path (from the installed
tvm_ffi / tvm packages, located without importing them), fills the context
symbols, and calls the entry with DLTensors built directly from the arrays'
data pointers, shapes and strides.

Importing TVM costs seconds; this path costs a few milliseconds once per
process, so a cache hit in a fresh process stays cheap. Whenever something is
outside what this path understands (an unknown context symbol, a library with
embedded modules, a non-ELF platform, an argument that is neither a numpy
array nor a CPU torch tensor), `load` returns None or `Caller.__call__`
returns NOT_HANDLED and the caller uses TVM instead.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

NOT_HANDLED = object()  # Caller result: this call needs the TVM path

# DLPack type codes (dlpack.h): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6,
# kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12
_DL_CODES = {
    "int8": (0, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "uint16": (1, 16),
    "uint32": (1, 32),
    "uint64": (1, 64),
    "float16": (2, 16),
    "float32": (2, 32),
    "float64": (2, 64),
    "bfloat16": (4, 16),
    "bool": (6, 8),
    "float8_e4m3fn": (10, 8),
    "float8_e5m2": (12, 8),
}
_KDL_CPU = 1
_TYPE_DLTENSOR_PTR = 7  # kTVMFFIDLTensorPtr
_TYPE_STATIC_OBJECT_BEGIN = 64
_OBJECT_HEADER_BYTES = 24  # TVMFFIObject: ref count u64, type index i32, padding u32, deleter ptr
_ANY_WORDS = 2  # TVMFFIAny: 16 bytes
_DLTENSOR_WORDS = 6  # data, device, ndim+dtype, shape*, strides*, byte_offset
_ERROR_WORDS = 5  # the kernels' int32[10] error buffer (runtime.ERROR_SLOTS)

_lock = threading.Lock()
_runtime: Dict[str, ctypes.CDLL] = {}
_libraries: Dict[str, ctypes.CDLL] = {}
unavailable_reason: Optional[str] = None  # why the last `load` returned None (for tests and logs)


def _dtype_word(name: str) -> int:
    """The DLTensor word that holds ndim (low 32 bits) and DLDataType (high 32), without ndim."""
    code, bits = _DL_CODES[name]
    return (code | (bits << 8) | (1 << 16)) << 32


def _numpy_dtype_words() -> Dict[np.dtype, int]:
    table = {}
    for name in _DL_CODES:
        if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            try:
                import ml_dtypes
            except ImportError:
                continue
            table[np.dtype(getattr(ml_dtypes, name))] = _dtype_word(name)
        else:
            table[np.dtype(name)] = _dtype_word(name)
    return table


_NUMPY_DTYPES = _numpy_dtype_words()
_torch_dtypes: Optional[Dict] = None


def _torch_dtype_words(torch) -> Dict:
    global _torch_dtypes
    if _torch_dtypes is None:
        table = {}
        for name in _DL_CODES:
            dt = getattr(torch, name, None)
            if dt is not None and isinstance(dt, torch.dtype):
                table[dt] = _dtype_word(name)
        _torch_dtypes = table
    return _torch_dtypes


# ------------------------------------------------------------------ libraries


def _package_dir(package: str) -> Optional[str]:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _runtime_paths() -> Tuple[str, str]:
    """(libtvm_ffi, libtvm_runtime): the ones TVM loaded if it is imported, else the packages' own."""
    loaded_ffi = getattr(sys.modules.get("tvm_ffi"), "LIB", None)
    base = sys.modules.get("tvm.base")
    loaded_rt = getattr(base, "_LOADED_LIBS", {}).get("tvm_runtime") if base is not None else None
    ffi_path = getattr(loaded_ffi, "_name", None)
    rt_path = getattr(loaded_rt, "_name", None)
    if ffi_path is None:
        folder = _package_dir("tvm_ffi")
        if folder is None:
            raise OSError("the tvm_ffi package is not installed")
        ffi_path = os.path.join(folder, "lib", "libtvm_ffi.so")
    if rt_path is None:
        folder = _package_dir("tvm")
        if folder is None:
            raise OSError("the tvm package is not installed")
        rt_path = os.path.join(folder, "lib", "libtvm_runtime.so")
    for path in (ffi_path, rt_path):
        if not os.path.isfile(path):
            raise OSError(f"{path} does not exist")
    return ffi_path, rt_path


def _load_runtime() -> Tuple[ctypes.CDLL, ctypes.CDLL]:
    """libtvm_ffi and libtvm_runtime, loaded once, globally (kernels resolve symbols in them)."""
    if not _runtime:
        ffi_path, rt_path = _runtime_paths()
        ffi = ctypes.CDLL(ffi_path, mode=ctypes.RTLD_GLOBAL)
        rt = ctypes.CDLL(rt_path, mode=ctypes.RTLD_GLOBAL)
        ffi.TVMFFIErrorMoveFromRaised.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        ffi.TVMFFIErrorMoveFromRaised.restype = None
        ffi.TVMFFIObjectDecRef.argtypes = [ctypes.c_void_p]
        ffi.TVMFFIObjectDecRef.restype = ctypes.c_int
        _runtime["ffi"], _runtime["runtime"] = ffi, rt
    return _runtime["ffi"], _runtime["runtime"]


def dynamic_symbols(path: str) -> List[Tuple[str, bool, bool]]:
    """[(name, defined, is_data)] of an ELF64 little-endian shared object's dynamic symbols.

    Raises ValueError for anything else (the caller then uses TVM's loader).
    """
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for sh in sections:
        if sh[1] != 11:  # SHT_DYNSYM
            continue
        offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9] or 24
        stroff = sections[link][4]
        for k in range(1, size // entsize):
            st_name, info, _other, shndx = struct.unpack_from("<IBBH", data, offset + k * entsize)
            end = data.index(b"\0", stroff + st_name)
            out.append(
                (data[stroff + st_name : end].decode("ascii", "replace"), shndx != 0, info & 0xF == 1)
            )  # STT_OBJECT
    return out


def _prepare_library(path: str) -> ctypes.CDLL:
    """dlopen a kernel library and fill its context symbols as TVM's loader would."""
    symbols = dynamic_symbols(path)
    defined = {name for name, is_defined, _ in symbols if is_defined}
    if "__tvm_ffi__library_bin" in defined or "__tvm_ffi__library_ctx" in defined:
        raise ValueError("the library embeds modules or needs a module context")
    ffi, rt = _load_runtime()
    fills = []
    # context symbols are data (function-pointer variables): never write into code
    for name in sorted(n for n, is_defined, is_data in symbols if is_defined and is_data):
        if not name.startswith("__TVM"):
            continue
        target = name[2:]  # __TVMBackendParallelLaunch -> TVMBackendParallelLaunch
        func = None
        for lib in (rt, ffi):
            try:
                func = getattr(lib, target)
                break
            except AttributeError:
                continue
        if func is None:
            raise ValueError(f"unknown context symbol {name}")
        fills.append((name, ctypes.cast(func, ctypes.c_void_p).value))
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    for name, address in fills:
        ctypes.c_void_p.in_dll(lib, name).value = address
    return lib


def load(path: str, entry: str, n_params: int, with_error: bool) -> Optional["Caller"]:
    """A Caller for `entry` in the library at `path`, or None (reason in `unavailable_reason`).

    n_params: the kernel's parameters; with_error: the kernel takes the int32
    error buffer of its run-time checks after them.
    """
    global unavailable_reason
    if os.environ.get("TILE_CPU_LAUNCH", "").lower() == "tvm":
        unavailable_reason = "TILE_CPU_LAUNCH=tvm"
        return None
    if not sys.platform.startswith("linux"):
        unavailable_reason = f"the ctypes launcher handles ELF libraries only, not {sys.platform}"
        return None
    try:
        with _lock:
            lib = _libraries.get(path)
            if lib is None:
                lib = _prepare_library(path)
                _libraries[path] = lib
            func = ctypes.cast(getattr(lib, f"__tvm_ffi_{entry}"), ctypes.c_void_p).value
    except (OSError, ValueError, AttributeError, IndexError, struct.error) as err:
        unavailable_reason = f"{type(err).__name__}: {err}"
        return None
    if func is None:
        unavailable_reason = f"the library's entry __tvm_ffi_{entry} has no address"
        return None
    unavailable_reason = None
    return Caller(func, n_params, with_error, lib)


# ------------------------------------------------------------------ calling


_SLOT_DIMS = 8  # shape/stride words kept per argument; higher ranks get a private array


class _Frame:
    """One thread's argument block: TVMFFIAny[n], DLTensor[n], shapes, strides, result, error buffer.

    Each slot remembers the (dtype, shape, strides) it holds, so a call with
    arrays like the previous call's writes only the data pointers.
    """

    def __init__(self, n_params: int, with_error: bool):
        n = n_params + (1 if with_error else 0)
        self.args_at = 0
        self.tensors_at = self.args_at + _ANY_WORDS * n
        self.shapes_at = self.tensors_at + _DLTENSOR_WORDS * n
        self.strides_at = self.shapes_at + _SLOT_DIMS * n
        self.result_at = self.strides_at + _SLOT_DIMS * n
        self.error_at = self.result_at + _ANY_WORDS
        self.buffer = (ctypes.c_int64 * (self.error_at + _ERROR_WORDS + 8))()  # + 64 bytes to align
        base = self.base = ctypes.addressof(self.buffer)
        # the error buffer on a 64-byte boundary, like a numpy / TVM allocation
        self.error_at += (-(base + 8 * self.error_at) % 64) // 8
        w = self.buffer
        for i in range(n):
            t = self.tensors_at + _DLTENSOR_WORDS * i
            w[self.args_at + 2 * i] = _TYPE_DLTENSOR_PTR
            w[self.args_at + 2 * i + 1] = base + 8 * t
            w[t + 1] = _KDL_CPU  # device_type kDLCPU, device_id 0
        if with_error:
            t = self.tensors_at + _DLTENSOR_WORDS * (n - 1)
            w[t] = base + 8 * self.error_at
            w[t + 2] = 1 | _dtype_word("int32")
            w[self.shapes_at + _SLOT_DIMS * (n - 1)] = 2 * _ERROR_WORDS
            w[t + 3] = base + 8 * (self.shapes_at + _SLOT_DIMS * (n - 1))
        self.n = n
        self.data_at = [self.tensors_at + _DLTENSOR_WORDS * i for i in range(n_params)]
        self.signature: List[object] = [None] * n_params
        self.extra: Dict[int, object] = {}
        self.args_ptr = ctypes.c_void_p(base + 8 * self.args_at)
        self.result_ptr = ctypes.c_void_p(base + 8 * self.result_at)

    def set_slot(self, i: int, word: int, shape, strides) -> None:
        """Write slot i's ndim + dtype, shape and strides (None: compact row-major)."""
        w = self.buffer
        t = self.tensors_at + _DLTENSOR_WORDS * i
        nd = len(shape)
        if nd > _SLOT_DIMS:
            extra = (ctypes.c_int64 * (2 * nd))(*shape, *(strides or ()))
            self.extra[i] = extra
            w[t + 3] = ctypes.addressof(extra)
            w[t + 4] = ctypes.addressof(extra) + 8 * nd if strides is not None else 0
        else:
            at = self.shapes_at + _SLOT_DIMS * i
            w[at : at + nd] = list(shape)
            w[t + 3] = self.base + 8 * at
            if strides is None:
                w[t + 4] = 0
            else:
                s_at = self.strides_at + _SLOT_DIMS * i
                w[s_at : s_at + nd] = list(strides)
                w[t + 4] = self.base + 8 * s_at
        w[t + 2] = nd | word


class Caller:
    """`caller(arrays)`: run the kernel on numpy arrays / CPU torch tensors through the C ABI.

    Returns None, the kernel's error buffer (a list of ints) when the kernel
    recorded a failed run-time check, or NOT_HANDLED when an argument needs the
    TVM path. A failure inside
    TVM's argument checks raises KernelError with TVM's message.
    """

    def __init__(self, address: int, n_params: int, with_error: bool, library: ctypes.CDLL):
        # c_void_p objects prepared in the frame are passed as they are (no per-call conversion)
        self.function = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p
        )(address)
        self.library = library  # keeps the library loaded while the caller lives
        self.n_params = n_params
        self._with_error = with_error
        self._local = threading.local()

    def _frame(self) -> _Frame:
        frame = getattr(self._local, "frame", None)
        if frame is None:
            frame = self._local.frame = _Frame(self.n_params, self._with_error)
        return frame

    def __call__(self, args):
        if len(args) != self.n_params:
            return NOT_HANDLED
        frame = self._frame()
        w = frame.buffer
        sig = frame.signature
        data_at = frame.data_at
        i = 0
        for a in args:
            if type(a) is _ndarray and a.flags.c_contiguous:
                key: Tuple[Any, ...] = (a.dtype, a.shape)
                try:
                    # 0.3 us; a.ctypes.data takes 1 us. numpy's stubs do not declare the buffer protocol
                    ptr = _addressof(_from_buffer(a))  # type: ignore[arg-type]
                except (TypeError, ValueError, BufferError):  # read-only or empty
                    ptr = a.ctypes.data
            elif (
                type(a) is not _ndarray
                and (torch := sys.modules.get("torch")) is not None
                and isinstance(a, torch.Tensor)
            ):
                # (a conjugate bit exists only on complex tensors, which have no entry in the dtype table)
                if not a.is_cpu or a.is_neg():
                    return NOT_HANDLED
                key = (a.dtype, a.shape) if a.is_contiguous() else (a.dtype, a.shape, a.stride())
                ptr = a.data_ptr()
            elif type(a) is _ndarray:  # strided numpy array: TVM's checks decide about it
                item = a.itemsize
                if any(st % item for st in a.strides):
                    return NOT_HANDLED
                key = (a.dtype, a.shape, tuple(st // item for st in a.strides))
                ptr = a.ctypes.data
            else:
                return NOT_HANDLED
            if key != sig[i]:
                word = (_NUMPY_DTYPES if type(a) is _ndarray else _torch_dtype_words(sys.modules["torch"])).get(key[0])
                if word is None:
                    return NOT_HANDLED
                frame.set_slot(i, word, tuple(key[1]), key[2] if len(key) == 3 else None)
                sig[i] = key
            w[data_at[i]] = ptr
            i += 1
        e = frame.error_at
        if self._with_error:
            w[e] = 0  # slots 0-1; the kernel writes the index slots with the flag in slot 0
        r = frame.result_at
        w[r] = 0  # result type index: None
        status = self.function(None, frame.args_ptr, frame.n, frame.result_ptr)
        if status != 0:
            raise KernelError(*_raised_error_message())
        if w[r] & 0xFFFFFFFF >= _TYPE_STATIC_OBJECT_BEGIN:  # an object result: not ours to keep
            _runtime["ffi"].TVMFFIObjectDecRef(ctypes.c_void_p(w[r + 1]))
        if self._with_error and w[e] & 0xFFFFFFFF:
            return [int(v) for v in np.frombuffer(memoryview(frame.buffer), np.int32, 2 * _ERROR_WORDS, 8 * e)]
        return None


_ndarray = np.ndarray
_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


class KernelError(RuntimeError):
    """An error the kernel raised through TVMFFIErrorSetRaised (e.g. TVM's argument checks)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _raised_error_message() -> Tuple[str, str]:
    """(kind, message) of the error the failed call left in tvm-ffi's thread-local slot."""
    ffi = _runtime["ffi"]
    handle = ctypes.c_void_p()
    ffi.TVMFFIErrorMoveFromRaised(ctypes.byref(handle))
    if not handle.value:
        return "RuntimeError", "the kernel failed without an error message"
    try:
        cell = handle.value + _OBJECT_HEADER_BYTES  # TVMFFIErrorCell follows the object header

        def byte_array(at):
            data, size = struct.unpack("<QQ", ctypes.string_at(at, 16))
            return ctypes.string_at(data, size).decode("utf-8", "replace") if data else ""

        return byte_array(cell), byte_array(cell + 16)
    finally:
        ffi.TVMFFIObjectDecRef(handle)
