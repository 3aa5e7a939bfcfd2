"""Calling a compiled kernel: arrays go to TVM through DLPack, without copies.

numpy arrays and CPU torch tensors are passed to the TVM function as they are
(TVM's FFI takes any DLPack producer). numpy has no DLPack code for
ml_dtypes.bfloat16, so such arrays travel as a zero-copy torch view when torch
is installed, else through a TVM tensor that is copied in and back.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Protocol, Sequence, Tuple, cast

import numpy as np


def _bfloat16_arg(arr: np.ndarray) -> Tuple[Any, Callable[[], None]]:
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and arr.flags.c_contiguous:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16), lambda: None
    import tvm

    t = tvm.runtime.empty(arr.shape, "bfloat16")
    t.copyfrom(np.ascontiguousarray(arr))

    def write_back():
        arr[...] = t.numpy()

    return t, write_back


def prepare(args) -> Tuple[List[Any], List[Callable[[], None]]]:
    """The objects handed to TVM for `args`, and the write-backs to run after the call."""
    out, after = [], []
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.name == "bfloat16":
            obj, back = _bfloat16_arg(a)
            out.append(obj)
            after.append(back)
        elif isinstance(a, np.ndarray) and a.size == 0:
            # numpy's DLPack export of an empty array fails TVM's compactness check
            import tvm

            out.append(tvm.runtime.empty(a.shape, a.dtype.name))
        elif isinstance(a, np.ndarray) and not a.flags.writeable:
            # DLPack 0.8 cannot export read-only arrays; the kernel only reads this one
            # (the Kernel refuses read-only arrays for parameters it writes)
            out.append(a.copy())
        else:
            out.append(a)
    return out, after


ERROR_SLOTS = 10  # tilecore.lowering.tir_stmt.ERROR_SLOTS (not imported: that module loads TVM)


def raise_index_error(artifact, check, error, args) -> None:
    """The interpreter's message for element indexing outside a buffer, at the user's line."""
    from tilecore.diagnostics import TileRuntimeError
    from tilecore.ir.nodes import Span

    name = check["buffer"]
    shape = list(check["shape"])
    if check.get("param") is not None:
        shape = list(np.shape(args[check["param"]])) if hasattr(args[check["param"]], "shape") else shape
    dims = tuple(shape)
    idx = [int(v) for v in error[1 : 1 + len(dims)]]
    axis = next((k for k, (i, n) in enumerate(zip(idx, dims)) if n is not None and not 0 <= i < n), 0)
    span = Span(*check["span"])
    raise TileRuntimeError(
        f"index out of bounds: {name}[{', '.join(map(str, idx))}] but {name} has shape {dims} "
        f"(dimension {axis} index {idx[axis]} is outside [0, {dims[axis]}))",
        span,
        artifact.meta.get("user_source", ""),
    )


def _rejected(entry: str, message: str):
    from tilecore.diagnostics import TileRuntimeError

    lines = message.strip().splitlines()
    return TileRuntimeError(f"kernel {entry!r} on cpu rejected its arguments: {lines[-1] if lines else message}")


def make_launch(artifact, native=None, tvm_function: Optional[Callable[[], Any]] = None) -> Callable:
    """`launch(args, bindings)`: dynamic dims are bound by the kernel from the arguments' shapes.

    native: a tile_cpu.native.Caller (the library called through the C ABI, TVM
    never imported) or None; tvm_function: returns the TVM PackedFunc, used when
    there is no native caller or an argument is of a kind it does not take.
    """
    entry = artifact.entry
    checks = artifact.meta.get("checks")
    has_error_buffer = checks is not None
    cell: List[Any] = []

    def function():
        if not cell:
            if tvm_function is None:
                raise RuntimeError(
                    f"kernel {entry!r}: no TVM loader was given for the arguments the native caller does not take"
                )
            cell.append(tvm_function())
        return cell[0]

    def tvm_launch(args):
        fn = function()
        objs, after = prepare(args)
        error = np.zeros(ERROR_SLOTS, np.int32) if has_error_buffer else None
        if error is not None:
            objs.append(error)
        try:
            fn(*objs)
        except Exception as err:  # a check in TVM's argument unpacking; name the kernel
            raise _rejected(entry, str(err)) from None
        for back in after:
            back()
        if error is not None and error[0]:
            raise_index_error(artifact, checks[int(error[0]) - 1], error, args)

    if native is None:

        def launch(args, bindings=None):
            tvm_launch(args)
    else:
        from .native import NOT_HANDLED, KernelError

        def launch(args, bindings=None):
            try:
                error = native(args)
            except KernelError as err:
                raise _rejected(entry, str(err)) from None
            if error is None:
                return
            if error is NOT_HANDLED:
                tvm_launch(args)
                return
            raise_index_error(artifact, checks[error[0] - 1], error, args)

    typed = as_cpu_launch(launch, native, function if native is None else None)
    scalars = artifact.meta.get("scalars")
    return with_scalar_arguments(typed, scalars) if scalars else typed


class CpuLaunch(Protocol):
    """What the cpu backend's launcher returns: `launch(args, bindings)` and how it runs kernels."""

    native: Any  # the tile_cpu.native.Caller, or None where TVM's loader runs the kernel
    function: Optional[Callable[[], Any]]  # the TVM PackedFunc's getter when there is no native caller

    def __call__(self, args: List[Any], bindings: Any = None) -> None:
        """Run the kernel on `args`."""


def as_cpu_launch(launch: Callable[..., None], native: Any, function: Optional[Callable[[], Any]]) -> CpuLaunch:
    """`launch` with the attributes of a CpuLaunch (for tests and `tile` tooling)."""
    typed = cast(CpuLaunch, launch)
    typed.native = native
    typed.function = function
    return typed


def with_scalar_arguments(launch: CpuLaunch, names: Sequence[str]) -> CpuLaunch:
    """`launch` for a kernel with scalar parameters: their values (from the bindings) follow the
    tensors, as in the lowered function's parameters. Python ints are not DLTensors, so such a
    call takes TVM's packed-function path (the ctypes caller hands it on)."""

    def launch_with_scalars(args: List[Any], bindings: Any = None) -> None:
        launch(list(args) + [int(bindings[name]) for name in names], bindings)

    return as_cpu_launch(launch_with_scalars, launch.native, launch.function)
