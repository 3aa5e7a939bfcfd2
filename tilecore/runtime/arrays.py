"""Array library adapters: describe an argument, allocate outputs, view CPU arrays as numpy.

Supported: numpy arrays, torch tensors, cupy arrays, and any object with
``__dlpack__`` / ``__dlpack_device__``. torch and cupy are imported only when an
argument is one of theirs, so numpy-only users never pay for them.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..ir.types import DTypeError, normalize_dtype

# DLPack device types (dlpack.h) -> tilecore memory space.
_DLPACK_SPACES = {
    1: "cpu",
    2: "cuda",
    3: "cpu",
    4: "opencl",
    7: "vulkan",
    8: "metal",
    9: "vpi",
    10: "rocm",
    11: "cpu",
    13: "cuda",
    14: "oneapi",
}


def _dlpack_device_type(obj: Any) -> Optional[int]:
    """The DLPack device type code of an array, or None where it cannot say (e.g. torch on mps)."""
    try:
        return int(obj.__dlpack_device__()[0])
    except Exception:
        return None


class NotAnArray(TypeError):
    """The object is none of the supported array kinds."""


@dataclass
class ArrayInfo:
    """What the Kernel checks about one argument.

    library: "numpy", "torch", "cupy" or "dlpack" (outputs are allocated in it;
    "dlpack" ones as numpy). dtype: the tilecore dtype name, or the library's own
    spelling when tilecore has no such dtype. device: "cpu", "cuda:0", ...
    memory_space: the device kind ("cpu", "cuda", "rocm", "metal", ...).
    strides: in elements (None when the object does not say).
    array: what the launcher receives (CPU DLPack objects become numpy views).
    """

    library: str
    shape: Tuple[int, ...]
    dtype: str
    device: str
    memory_space: str
    strides: Optional[Tuple[int, ...]]
    contiguous: bool
    array: Any
    negated: bool = False  # a torch tensor whose negative bit is set (its memory holds -value)


_DTYPE_NAMES: Dict[Any, str] = {}  # library dtype object -> name; str(numpy dtype) is slow per call


def _dtype_name(raw: Any) -> str:
    try:
        return _DTYPE_NAMES[raw]
    except (KeyError, TypeError):
        pass
    try:
        name = normalize_dtype(raw)
    except DTypeError:
        name = str(raw).replace("torch.", "")
    try:
        _DTYPE_NAMES[raw] = name
    except TypeError:  # unhashable dtype object
        pass
    return name


def _is_torch(obj: Any) -> bool:
    return (
        "torch" in sys.modules
        and type(obj).__module__.startswith("torch")
        and isinstance(obj, sys.modules["torch"].Tensor)
    )


def _is_cupy(obj: Any) -> bool:
    return (
        "cupy" in sys.modules
        and type(obj).__module__.startswith("cupy")
        and isinstance(obj, sys.modules["cupy"].ndarray)
    )


def _c_contiguous_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    strides: list[int] = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def describe(obj: Any) -> ArrayInfo:
    """An ArrayInfo for `obj`; raises NotAnArray for anything that is not an array."""
    if isinstance(obj, np.ndarray):
        item = obj.dtype.itemsize or 1
        return ArrayInfo(
            "numpy",
            tuple(obj.shape),
            _dtype_name(obj.dtype),
            "cpu",
            "cpu",
            tuple(s // item for s in obj.strides),
            bool(obj.flags.c_contiguous),
            obj,
        )
    if _is_torch(obj):
        dev = obj.device
        space = dev.type
        if space != "cpu":  # torch names several runtimes "cuda"; DLPack's device type tells them apart
            code = _dlpack_device_type(obj)
            fallback = "metal" if space == "mps" else space
            space = _DLPACK_SPACES.get(code, fallback) if code is not None else fallback
        device = space if dev.index is None and space == "cpu" else f"{space}:{dev.index or 0}"
        if obj.is_conj():  # only complex tensors have one, and no tilecore dtype is complex
            raise NotAnArray("got a torch tensor with its conjugate bit set; pass tensor.resolve_conj()")
        return ArrayInfo(
            "torch",
            tuple(obj.shape),
            _dtype_name(obj.dtype),
            device,
            space,
            tuple(obj.stride()),
            bool(obj.is_contiguous()),
            obj,
            bool(obj.is_neg()),
        )
    if _is_cupy(obj):
        space = _DLPACK_SPACES.get(int(obj.__dlpack_device__()[0]), "cuda")
        item = obj.dtype.itemsize or 1
        return ArrayInfo(
            "cupy",
            tuple(obj.shape),
            _dtype_name(obj.dtype),
            f"{space}:{obj.device.id}",
            space,
            tuple(s // item for s in obj.strides),
            bool(obj.flags.c_contiguous),
            obj,
        )
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        space = _DLPACK_SPACES.get(int(dev_type), f"dlpack-device-{int(dev_type)}")
        if space == "cpu":
            try:
                view = np.from_dlpack(obj)
            except (TypeError, ValueError, BufferError, RuntimeError) as err:
                raise NotAnArray(f"a DLPack object numpy cannot view ({err})") from None
            info = describe(view)
            info.library = "dlpack"
            return info
        shape = tuple(int(n) for n in getattr(obj, "shape", ()))
        dtype = _dtype_name(getattr(obj, "dtype", "unknown"))
        strides = getattr(obj, "strides", None)
        strides = tuple(strides) if strides is not None else None
        contiguous = strides is None or strides == _c_contiguous_strides(shape)
        return ArrayInfo("dlpack", shape, dtype, f"{space}:{dev_id}", space, strides, contiguous, obj)
    raise NotAnArray(
        f"got {type(obj).__name__}, which is not an array (expected numpy, torch, cupy or an object with __dlpack__)"
    )


def memory_range(array: Any) -> Optional[Tuple[int, int]]:
    """(first byte address, end address) of a dense array's memory, or None when unknown."""
    try:
        if isinstance(array, np.ndarray):
            start = array.__array_interface__["data"][0]
            return start, start + array.nbytes
        if _is_torch(array):
            start = array.data_ptr()
            return start, start + array.numel() * array.element_size()
        if _is_cupy(array):
            start = array.data.ptr
            return start, start + array.nbytes
    except (AttributeError, TypeError, RuntimeError):
        pass
    return None


def numpy_dtype(dtype: str) -> np.dtype[Any]:
    """The numpy dtype of a tilecore dtype (bfloat16 and fp8 through ml_dtypes)."""
    if dtype in _ML_DTYPES:
        import ml_dtypes

        through_ml_dtypes: np.dtype[Any] = np.dtype(getattr(ml_dtypes, dtype))
        return through_ml_dtypes
    return np.dtype(dtype)


_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def allocate(
    like: Optional[ArrayInfo], shape: Tuple[int, ...], dtype: str, memory_space: str = "cpu", zeroed: bool = True
) -> Any:
    """An array of `shape` and `dtype` in `like`'s library and on its device, zero-filled unless
    `zeroed` is False (the Kernel passes False only for outputs the kernel provably writes in full).

    Zero-filled by default, so an output a kernel leaves partly unwritten is the same on every
    backend. With no `like` (a kernel without inputs) numpy is used for CPU memory and torch, then
    cupy, for device memory.
    """
    return allocator(like, shape, dtype, memory_space, zeroed)()


def allocator(
    like: Optional[ArrayInfo], shape: Tuple[int, ...], dtype: str, memory_space: str = "cpu", zeroed: bool = True
) -> Callable[[], Any]:
    """A function of no arguments that returns what `allocate(like, shape, dtype, memory_space,
    zeroed)` does.

    The Kernel makes one per output and argument signature, so a repeat call
    allocates without looking the library and dtype up again. It keeps the
    device of `like`, never the array itself.
    """
    shape = tuple(int(n) for n in shape)
    if like is not None and like.library == "torch":
        import torch

        make = torch.zeros if zeroed else torch.empty
        return functools.partial(make, shape, dtype=getattr(torch, dtype), device=like.array.device)
    if like is not None and like.library == "cupy":
        return _cupy_allocator(like.array.device.id, shape, dtype, zeroed)
    if memory_space == "cpu":
        return functools.partial(np.zeros if zeroed else np.empty, shape, numpy_dtype(dtype))
    return _device_allocator(shape, dtype, memory_space, zeroed)


def _cupy_allocator(device_id: int, shape: Tuple[int, ...], dtype: str, zeroed: bool) -> Callable[[], Any]:
    def cupy_array() -> Any:
        import cupy

        with cupy.cuda.Device(device_id):
            return (cupy.zeros if zeroed else cupy.empty)(shape, dtype=numpy_dtype(dtype))

    return cupy_array


# tilecore memory space -> the device name torch gives that memory (torch's ROCm build names its
# devices "cuda" too); cupy (CUDA or ROCm builds) serves only the first two
TORCH_DEVICES = {"cuda": "cuda", "rocm": "cuda", "metal": "mps"}
CUPY_SPACES = ("cuda", "rocm")


def _device_allocator(shape: Tuple[int, ...], dtype: str, memory_space: str, zeroed: bool) -> Callable[[], Any]:
    """Device memory with no array to copy the library from: torch, else cupy, on the device that
    holds `memory_space` (an error naming the memory space where neither can)."""

    def device_array() -> Any:
        device = TORCH_DEVICES.get(memory_space)
        try:
            import torch
        except ImportError:
            pass
        else:
            if device is not None:
                return (torch.zeros if zeroed else torch.empty)(shape, dtype=getattr(torch, dtype), device=device)
        if memory_space in CUPY_SPACES:
            try:
                import cupy
            except ImportError:
                pass
            else:
                return (cupy.zeros if zeroed else cupy.empty)(shape, dtype=numpy_dtype(dtype))
        libraries = "torch or cupy" if memory_space in CUPY_SPACES else "torch" if device else "an array library"
        raise NotAnArray(
            f"cannot allocate an output in {memory_space} memory: pass the inputs as arrays in that "
            f"memory ({libraries}), which outputs then follow"
        )

    return device_array


def as_numpy(array: Any) -> np.ndarray[Any, Any]:
    """A zero-copy numpy view of a CPU array (numpy, torch CPU tensor, CPU DLPack object).

    Writes through the view reach the original, so launchers can run in place.
    """
    if isinstance(array, np.ndarray):
        return array
    if _is_torch(array):
        if array.device.type != "cpu":
            raise TypeError(f"as_numpy needs a CPU tensor, got one on {array.device}")
        t = array.detach()
        torch = sys.modules["torch"]
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: view the bits, then reinterpret
            view: np.ndarray[Any, Any] = t.view(torch.int16).numpy().view(numpy_dtype("bfloat16"))
            return view
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # the same for fp8
            fp8: np.ndarray[Any, Any] = t.view(torch.uint8).numpy().view(numpy_dtype(str(t.dtype)[len("torch.") :]))
            return fp8
        host: np.ndarray[Any, Any] = t.numpy()
        return host
    if _is_cupy(array):
        raise TypeError("as_numpy needs a CPU array, got a cupy array")
    return np.from_dlpack(array)
