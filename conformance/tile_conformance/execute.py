"""Running one generated program: parse its DSL text with the real frontend,
make its inputs from the seed, run the reference interpreter (the oracle) and
the backend, and compare.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from .compare import Mismatch, compare
from .programs import Param, Program

PASS, FAIL, UNSUPPORTED, SUITE_ERROR = "pass", "fail", "unsupported", "suite_error"


from .edges import np_dtype  # noqa: E402  (re-exported: bundles and repro scripts use it)

OUTPUT_SENTINEL = 77  # what "out" tensors hold before the kernel runs (same on both sides)


def make_inputs(params: Sequence[Param], bindings: Dict[str, int], seed: int) -> List[np.ndarray]:
    """The arguments of a program, in parameter order, reproducibly from `seed`.

    Inputs ("in", "inout") come from `edges.fill`: uniform in [lo, hi] (floats
    drawn in float64 and rounded to nearest in their dtype; integers inclusive),
    mixed with the parameter's edge class when it has one; "out" tensors are
    filled with OUTPUT_SENTINEL.
    """
    from .edges import fill

    rng = np.random.default_rng(seed)
    arrays = []
    for p in params:
        shape = p.concrete_shape(bindings)
        if p.role == "out":
            a = np.full(shape, OUTPUT_SENTINEL if p.dtype != "bool" else True).astype(np_dtype(p.dtype))
        else:
            a = fill(rng, shape, p.dtype, p.lo, p.hi, p.edges)
        arrays.append(a if a.ndim == 0 else np.ascontiguousarray(a))  # (ascontiguousarray makes 0-d 1-d)
    return arrays


class fresh_compile_cache:
    """Compile every program anew during a run: a private, empty tilecore cache folder.

    tilecore's cache key names the backend's version, not the code behind it,
    so artifacts left by an older build of a plugin (or of tilecore's shared
    lowering) could otherwise stand in for what is being certified. Within the
    run the private cache still serves repeated programs (shrinking).
    """

    def __enter__(self):
        from tilecore.runtime import api

        self.saved = os.environ.get("TILECORE_CACHE_DIR")
        from tilecore.runtime.folders import process_tempdir

        # inside this process's private folder: removed at exit, or by the next run after a SIGKILL
        self.folder = tempfile.mkdtemp(prefix="cache-", dir=process_tempdir("conformance"))
        os.environ["TILECORE_CACHE_DIR"] = self.folder
        api.clear_memory_cache()
        return self

    def __exit__(self, *exc):
        import shutil

        from tilecore.runtime import api

        if self.saved is None:
            os.environ.pop("TILECORE_CACHE_DIR", None)
        else:
            os.environ["TILECORE_CACHE_DIR"] = self.saved
        api.clear_memory_cache()
        shutil.rmtree(self.folder, ignore_errors=True)
        return False


def workdir() -> str:
    """Folder holding the generated programs' .py files (so spans point at real lines).

    Always a fresh private folder (mkdtemp, 0700) made by this process, inside
    TILE_CONFORMANCE_WORKDIR when set (which must itself be private: it is refused
    when others can write it): programs are executed from it, so a file that was
    there before the run must never be imported. Removed when the process exits.
    """
    from tilecore.runtime.folders import private_folder, process_tempdir

    base = os.environ.get("TILE_CONFORMANCE_WORKDIR") or None
    if base:
        private_folder(base, "conformance working folder", "TILE_CONFORMANCE_WORKDIR")
    return process_tempdir("conformance", base)


def load_source(source: str, name_hint: str = "prog"):
    """Write DSL `source` to a file and import it; return its `main` PrimFunc."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    from tilecore.runtime.folders import write_private_file

    path = write_private_file(workdir(), f"{name_hint}_{digest}.py", source.encode())
    mod_name = f"_tile_conformance_{name_hint}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the generated program {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(mod_name, None)
    return module.main


@dataclass
class Outcome:
    """The result of one program on one backend."""

    status: str
    features: List[str]
    message: str = ""
    mismatch: Optional[Mismatch] = None
    unsupported: List[str] = field(default_factory=list)
    seconds: float = 0.0
    error_kind: str = ""  # "mismatch", "compile", "run" (failures); "frontend", "oracle" (suite errors)

    def signature(self) -> str:
        """What kind of failure this is (shrinking keeps it the same).

        Mismatches are one kind; compile and run errors are told apart by their
        message with file names, positions and numbers removed.
        """
        if self.error_kind == "mismatch":
            return "mismatch"
        import re

        first = self.message.splitlines()[0] if self.message else ""
        first = re.sub(r"\S+\.py:\d+:\d+:?", "", first)
        first = re.sub(r"\d+", "N", first)
        return f"{self.error_kind}:{first.strip()}"


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def check_with_core_pipeline(func) -> None:
    """Run the core passes for the reference target: a program they reject is not the backend's fault."""
    from tilecore.runtime.api import lower

    for stage in func.split_stages() if func.is_multi_stage else (func,):  # passes see one stage at a time
        lower(stage, target="reference")


class quiet_stdout:
    """Send file descriptor 1 to /dev/null while kernels run (T.print output is not compared)."""

    def __enter__(self):
        sys.stdout.flush()
        try:
            self.saved: Optional[int] = os.dup(1)
        except OSError:
            self.saved = None
            return self
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        self._old = sys.stdout
        sys.stdout = open(os.devnull, "w")
        return self

    def __exit__(self, *exc):
        if self.saved is None:
            return False
        sys.stdout.close()
        sys.stdout = self._old
        os.dup2(self.saved, 1)
        os.close(self.saved)
        return False


def reference_outputs(func, program: Program, arrays: List[np.ndarray]) -> List[np.ndarray]:
    """Run the reference interpreter on copies of `arrays`; return all arrays after the run.

    Inputs ("in", never written by a generated program) are shared, not copied: a tensor past
    2^31 bytes whose untouched pages were never allocated stays so."""
    from tilecore import interp

    ref = [a if p.role == "in" else a.copy() for p, a in zip(program.params, arrays)]
    # scalar parameters (shape ()) are bound by name, like dynamic dimensions
    tensors = [a for p, a in zip(program.params, ref) if p.shape != ()]
    bindings = dict(program.bindings)
    bindings.update({p.name: int(a) for p, a in zip(program.params, ref) if p.shape == ()})
    if "print" in program.features:
        with quiet_stdout():
            interp.run(func, tensors, bindings)
    else:
        interp.run(func, tensors, bindings)
    return ref


def declared(backend) -> frozenset:
    """The features `backend` declares (fp8 dtypes through its `dtypes`, see declared_features)."""
    from tilecore.language.features import declared_features

    return declared_features(backend.capabilities)


def program_features(func, program: Program) -> List[str]:
    """The features the program uses: the IR's own report plus what only the suite knows.

    `partial_tiles` is taken from the generator (before the bounds pass every
    copy is unproven, so the raw IR cannot tell).
    """
    from tilecore.language.features import features_used

    used = set(features_used(func)) - {"partial_tiles"}
    return sorted(used | set(program.features))


def run_program(
    program: Program, backend, tier: str = "execute", reference_cache=None, options: Optional[dict] = None
) -> Outcome:
    """Parse, run on the reference and on `backend` (compiled with `options`), compare; never
    raises for program problems."""
    import tilecore
    from tilecore.diagnostics import UnsupportedFeatureError

    t0 = time.perf_counter()
    try:
        func = load_source(program.source)
    except Exception as err:
        return Outcome(
            SUITE_ERROR,
            sorted(program.features),
            "the frontend rejected a generated program: " + _one_line(err),
            error_kind="frontend",
            seconds=time.perf_counter() - t0,
        )
    feats = program_features(func, program)
    undeclared = [f for f in feats if f not in declared(backend)]
    if undeclared:
        return Outcome(
            UNSUPPORTED,
            feats,
            f"uses undeclared feature(s) {', '.join(undeclared)}",
            unsupported=undeclared,
            seconds=time.perf_counter() - t0,
        )
    try:
        check_with_core_pipeline(func)
    except Exception as err:
        return Outcome(
            SUITE_ERROR,
            feats,
            "the core pass pipeline rejected a generated program (for the reference target): " + _one_line(err),
            error_kind="pipeline",
            seconds=time.perf_counter() - t0,
        )
    arrays = make_inputs(program.params, program.bindings, program.input_seed)
    ref = None
    if tier == "execute":
        try:
            ref = reference_outputs(func, program, arrays)
        except Exception as err:
            return Outcome(
                SUITE_ERROR,
                feats,
                "the reference interpreter failed: " + _one_line(err),
                error_kind="oracle",
                seconds=time.perf_counter() - t0,
            )
    try:
        kernel = tilecore.compile(func, target=backend.name, **(options or {}))
    except UnsupportedFeatureError as err:
        if err.feature not in declared(backend):
            return Outcome(
                UNSUPPORTED, feats, _one_line(err), unsupported=[err.feature], seconds=time.perf_counter() - t0
            )
        return Outcome(
            FAIL,
            feats,
            f"refused a declared feature: {_one_line(err)}",
            error_kind="compile",
            seconds=time.perf_counter() - t0,
        )
    except Exception as err:
        return Outcome(
            FAIL, feats, "compile failed: " + _one_line(err), error_kind="compile", seconds=time.perf_counter() - t0
        )
    if tier == "compile":
        return Outcome(PASS, feats, seconds=time.perf_counter() - t0)
    try:
        if "print" in program.features:
            with quiet_stdout():
                got = call_on_device(kernel, arrays, backend.capabilities.memory_space, _inputs(program))
        else:
            got = call_on_device(kernel, arrays, backend.capabilities.memory_space, _inputs(program))
    except Exception as err:
        return Outcome(FAIL, feats, "run failed: " + _one_line(err), error_kind="run", seconds=time.perf_counter() - t0)
    return _compare_all(program, ref, got, feats, t0)


def _inputs(program: Program) -> frozenset:
    return frozenset(i for i, p in enumerate(program.params) if p.role == "in")


def call_on_device(
    kernel, arrays: Sequence[np.ndarray], memory_space: str, inputs: frozenset = frozenset()
) -> List[np.ndarray]:
    """Call `kernel` on copies of `arrays` in the backend's memory; return them as numpy afterwards.

    CPU backends get numpy arrays: copies, but for the positions in `inputs` (read-only
    arguments; only outputs are compared, and the reference has already run). Device backends
    get torch (else cupy) tensors on the current device, which DLPack hands to the kernel, and
    the 0-d arrays of scalar parameters as Python numbers.
    """
    if memory_space == "cpu":
        got = [a if i in inputs else a.copy() for i, a in enumerate(arrays)]
        kernel(*got)
        return got
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        device = memory_space if memory_space != "rocm" else "cuda"
        dev = [a.item() if a.ndim == 0 else _torch_from_numpy(torch, a).to(device) for a in arrays]
        kernel(*dev)
        return [a if a.ndim == 0 else _torch_to_numpy(torch, t.cpu(), a.dtype) for t, a in zip(dev, arrays)]
    try:
        import cupy
    except ImportError:
        raise RuntimeError(f"running on {memory_space} memory needs torch or cupy to move the inputs there") from None
    dev = [a.item() if a.ndim == 0 else cupy.asarray(a) for a in arrays]
    kernel(*dev)
    return [a if a.ndim == 0 else cupy.asnumpy(t) for t, a in zip(dev, arrays)]


# numpy dtypes (ml_dtypes) that torch.from_numpy refuses: moved as their bits, in the integer dtype
# of their width, and viewed as torch's dtype of the same name on either side
_BITS_OF = {"bfloat16": np.int16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}


def _torch_from_numpy(torch, a: np.ndarray):
    """A torch copy of `a` (bfloat16 and fp8 through their bits)."""
    bits = _BITS_OF.get(a.dtype.name)
    if bits is not None:
        return torch.from_numpy(a.view(bits).copy()).view(getattr(torch, a.dtype.name))
    return torch.from_numpy(a.copy())


def _torch_to_numpy(torch, t, dtype) -> np.ndarray:
    """`t` (on the host) as a numpy array of `dtype` (bfloat16 and fp8 through their bits)."""
    bits = _BITS_OF.get(np.dtype(dtype).name)
    if bits is not None:
        return t.view(getattr(torch, np.dtype(bits).name)).numpy().view(dtype)
    return t.numpy()


def _compare_all(program: Program, ref, got, feats, t0) -> Outcome:
    for i, p in enumerate(program.params):
        if p.role not in ("out", "inout"):
            continue
        tol = program.tolerances.get(p.name)
        m = compare(p.name, p.dtype, ref[i], got[i], tol) if tol is not None else None
        if m is not None:
            return Outcome(
                FAIL, feats, m.describe(), mismatch=m, error_kind="mismatch", seconds=time.perf_counter() - t0
            )
    return Outcome(PASS, feats, seconds=time.perf_counter() - t0)


def compare_outputs(program: Program, ref: Sequence[np.ndarray], got: Sequence[np.ndarray], feats) -> Outcome:
    """Compare already computed outputs (used by bundles)."""
    return _compare_all(program, list(ref), list(got), feats, time.perf_counter())
