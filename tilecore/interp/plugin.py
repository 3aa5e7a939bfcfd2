"""The backend "reference": the interpreter, registered like every other backend.

Declared through the entry point `reference = "tilecore.interp.plugin"` in the
group "tilecore". Codegen stores the Tile IR as JSON (the artifact is just the
program); the launcher loads it and runs the interpreter on numpy views of the
arguments (DLPack, zero-copy where possible; otherwise copies that are written
back after the run).
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple

import numpy as np

from ..plugin import hookimpl
from ..plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus, host_memory_bytes

NAME = "reference"
PRIORITY = -1000  # never the default while any real backend can run


def _gemm_dtype_pairs() -> frozenset:
    """(input dtype, accumulator dtype) pairs T.gemm accepts here: all that the type checker allows.

    Derived from the checker's table so that the reference never declares a pair
    (like float64 inputs into a float32 accumulator) that the language rejects.
    """
    from ..passes.check_types import GEMM_ACCUMULATORS

    return frozenset((a, acc) for a, accs in GEMM_ACCUMULATORS.items() for acc in accs)


def _toolchain_status() -> ToolchainStatus:
    import ml_dtypes

    return ToolchainStatus(
        ok=True,
        summary=f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}",
        details=(("numpy", np.__version__), ("ml_dtypes", ml_dtypes.__version__)),
        device="host CPU (numpy interpreter)",
    )


def make_backend() -> Backend:
    """The Backend declaration of the reference interpreter."""
    from .. import __version__
    from ..ir.types import DTYPES
    from ..ir.version import TILE_IR_VERSION
    from ..language.features import ALL_FEATURES

    return Backend(
        name=NAME,
        targets=(NAME,),
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            features=frozenset(ALL_FEATURES | {"while_loop", "parallel_while"}),
            dtypes=frozenset(DTYPES),
            gemm_dtypes=_gemm_dtype_pairs(),
            max_shared_memory=None,
            max_fragment_memory=None,
            max_threads=None,
            warp_size=1,
            vector_bytes=16,
            memory_space="cpu",
            tiers=("execute",),
            index_bits=64,  # numpy indexes with int64
            max_tensor_bytes=host_memory_bytes(),  # numpy arrays in host memory
        ),
        toolchain_status=_toolchain_status,
        device_present=lambda: True,
        distribution="tilecore",
        version=__version__,
        priority=PRIORITY,
        description="the reference interpreter (numpy): the executable definition of the semantics",
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend "reference"."""
    register(make_backend())


@hookimpl
def tilecore_passes(backend, pipeline):
    """The interpreter defines int4 itself (it unpacks packed int4 tensors as a call starts): it
    keeps the int4 IR that the core pass int4_storage rewrites into int8 for every other backend,
    so conformance compares that rewrite with an independent reading of the packing."""
    if backend.name != NAME:
        return
    from ..passes.int4_storage import Int4StoragePass

    pipeline.replace("int4_storage", Int4StoragePass(rewrite=False))


@hookimpl
def tilecore_codegen(backend, module, options):
    """The artifact of the reference backend: the Tile IR as JSON, and its DSL text as source."""
    if backend.name != NAME:
        return None
    from ..ir import printer, serialize

    func = module.func
    # The JSON keeps spans and the user's file text, so run-time errors quote the
    # user's line even when a cached artifact is loaded in another process.
    meta: Dict[str, Any] = {"ir": serialize.dumps(func)}
    return Artifact(backend=NAME, target=module.target, entry=func.name, source=printer.to_source(func), meta=meta)


@hookimpl
def tilecore_launcher(backend, artifact):
    """A callable `launch(args, bindings)` that interprets the artifact's IR."""
    if backend.name != NAME:
        return None
    from ..ir import serialize
    from . import Program

    func = serialize.loads(artifact.meta["ir"])
    program = Program(func)

    def launch(args, bindings=None):
        arrays: List[np.ndarray] = []
        write_back: List[Tuple[Any, np.ndarray]] = []
        for arg in args:
            view, copied = as_numpy(arg)
            arrays.append(view)
            if copied:
                write_back.append((arg, view))
        program.run(arrays, bindings)
        for original, result in write_back:
            _copy_back(original, result)

    return launch


def _is_torch(obj) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def as_numpy(arg) -> Tuple[np.ndarray, bool]:
    """(numpy array for `arg`, whether it is a copy that must be written back).

    numpy arrays pass through; CPU torch tensors and DLPack objects become
    zero-copy views (bfloat16 and fp8 by reinterpreting the bits, which numpy's
    DLPack import does not cover); anything else is converted with a copy.
    """
    if isinstance(arg, np.ndarray):
        if arg.flags.writeable:
            return arg, False
        return np.array(arg), False  # a read-only input: the kernel may not change it anyway
    if _is_torch(arg):
        if arg.device.type == "cpu":
            from ..runtime.arrays import as_numpy as view_as_numpy  # bfloat16 and fp8 by their bits

            return view_as_numpy(arg), False
    if hasattr(arg, "__dlpack__"):
        try:
            view = np.from_dlpack(arg)
        except (TypeError, ValueError, BufferError, RuntimeError):
            view = None
        if view is not None and view.flags.writeable:
            return view, False
    try:
        return np.array(arg), True
    except Exception as err:
        from ..diagnostics import TileRuntimeError

        raise TileRuntimeError(
            f"the reference backend runs on host memory and cannot read a {type(arg).__name__} "
            f"({err}); pass numpy arrays or CPU tensors"
        ) from None


def _copy_back(original, result: np.ndarray) -> None:
    if _is_torch(original):
        torch = sys.modules["torch"]
        if original.dtype == torch.bfloat16:
            src = torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
        else:
            src = torch.from_numpy(result)
        original.copy_(src)
        return
    original[...] = result
