"""The compile flow: `tilecore.compile`, `tilecore.jit`, `tilecore.default_target`.

compile(func, target, out_idx, **options):
  1. resolve the target to a backend (registry; Tile IR version checked);
  2. key = sha256(IR JSON, backend name + version, target, options, tilecore version);
  3. artifact from the in-process memo, else the disk cache, else: check the
     toolchain, run the pass pipeline (core passes plus the backend's, from the
     `tilecore_passes` hook) and the backend's `tilecore_codegen`, then store it;
  4. a Kernel whose launcher (`tilecore_launcher`) is created on its first call,
     so code can be generated for hardware that is not present.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..diagnostics import BackendError, TileError, UnsupportedFeatureError, user_facing  # noqa: F401 (BackendError: public here)
from ..ir import nodes as N
from ..plugin.backend import Artifact, Backend, TileModule
from . import cache as _cache
from .kernel import Kernel, output_params

if TYPE_CHECKING:
    import hashlib

    from ..passes.pipeline import PassContext, Pipeline
    from ..plugin.manager import TilecorePluginManager
    from .eager import EagerJITFunction

OutIdx = Union[None, int, Sequence[int]]

_lock = threading.RLock()
_MEMO_SIZE = 256  # artifacts kept in memory (shared libraries can be megabytes each)
_memo: "OrderedDict[str, Artifact]" = OrderedDict()  # cache key -> artifact, least recent first
_launchers: Dict[str, Callable[..., Any]] = {}  # cache key -> launch callable (this process)
_toolchain_ok: Dict[str, bool] = {}  # backend name -> toolchain checked and ok
_fingerprints: Dict[str, str] = {}  # backend name -> _code_fingerprint


def _forget_backend_state() -> None:
    """Drop per-process state that depends on the loaded plugins (called on plugin changes)."""
    with _lock:
        _memo.clear()
        _launchers.clear()
        _toolchain_ok.clear()
        _fingerprints.clear()


def clear_memory_cache() -> None:
    """Forget compiled kernels of this process (the disk cache is untouched)."""
    _forget_backend_state()


def default_target() -> str:
    """The target `compile` uses when none is given (see tilecore.plugin.registry)."""
    from ..plugin.registry import get_registry

    return get_registry().default_target()


def _manager() -> TilecorePluginManager:
    from ..plugin.manager import get_plugin_manager

    return get_plugin_manager()


def resolve_target(target: Optional[str] = None) -> Tuple[Backend, str]:
    """(backend, full target) for `target`, checking the backend accepts our Tile IR."""
    from ..plugin.registry import get_registry

    return get_registry().resolve(target)


def _check_func(func: object) -> N.PrimFunc:
    if isinstance(func, N.PrimFunc):
        return func
    if isinstance(func, JITFunction):
        raise TileError(
            f"{func.__name__} is a @tilecore.jit factory: call it with its arguments "
            f"(e.g. {func.__name__}(...)) to get a compiled kernel"
        )
    raise TileError(f"tilecore.compile expects a PrimFunc (made by @T.prim_func), got {type(func).__name__}")


def _single_stage(func: N.PrimFunc, what: str) -> N.PrimFunc:
    """`func` when it has one T.Kernel block; the pass pipeline runs on one stage at a time."""
    if func.is_multi_stage:
        count = len(func.split_stages())
        raise TileError(
            f"{func.name} has {count} T.Kernel stage(s) and T.alloc_global scratch: "
            f"{what} one stage at a time ({func.name}.split_stages()[k])"
        )
    return func


def _codegen_options(
    target: str, out_idx: Sequence[int], options: Dict[str, Any], backend: Optional[Backend] = None
) -> Dict[str, Any]:
    """The options codegen receives: validated against the backend's declared options (unknown
    names and mistyped values raise OptionError), defaults filled in, target and out_idx added."""
    from ..plugin.options import validate_options

    options = {k: v for k, v in options.items() if k != "profiler_inputs"}  # the Kernel's, not codegen's
    merged = validate_options(backend.name, backend.options, options) if backend is not None else dict(options)
    merged["target"] = target
    merged["out_idx"] = list(out_idx) if out_idx else []
    return merged


def _check_index_range(func: N.PrimFunc, backend: Backend) -> None:
    """Refuse a static dimension larger than the backend's index width can count (dynamic ones
    are checked by the Kernel at call time)."""
    from ..diagnostics import TileCompileError

    bits = backend.capabilities.index_bits
    limit = (1 << (bits - 1)) - 1
    for param in func.params:
        for axis, n in enumerate(param.shape):
            if isinstance(n, int) and n > limit:
                raise TileCompileError(
                    f"dimension {axis} of {param.name!r} has {n} elements, more than backend {backend.name!r} "
                    f"can index ({bits}-bit signed indices, at most {limit} per dimension); split the work "
                    f"or use a backend with 64-bit indexing",
                    param.span if param.span.line > 0 else func.span,
                    func.source,
                )


def _ir_json(func: N.PrimFunc) -> str:
    from ..ir.serialize import dumps

    return dumps(func)


def _check_toolchain(backend: Backend) -> None:
    if _toolchain_ok.get(backend.name):
        return
    try:
        status = backend.toolchain_status()
    except Exception as err:
        raise BackendError(f"backend {backend.name!r}: toolchain_status() failed: {type(err).__name__}: {err}") from err
    if not status.ok:
        fix = f" Fix: {status.fix}" if status.fix else ""
        raise BackendError(f"backend {backend.name!r} cannot compile here: {status.summary}.{fix}")
    _toolchain_ok[backend.name] = True


def build_pipeline(backend: Optional[Backend]) -> Pipeline:
    """The core pass pipeline plus the passes `backend`'s plugins add."""
    from ..passes.pipeline import default_pipeline

    pipeline = default_pipeline()
    if backend is not None:
        _manager().call("tilecore_passes", what=f"for backend {backend.name!r}", backend=backend, pipeline=pipeline)
    return pipeline


def _context(func: N.PrimFunc, backend: Backend, target: str, options: Dict[str, Any]) -> PassContext:
    from ..passes.pipeline import PassContext

    return PassContext(backend=backend, target=target, options=dict(options), source=func.source)


@user_facing
def lower(
    func: N.PrimFunc, target: Optional[str] = None, out_idx: OutIdx = None, **options: Any
) -> Tuple[N.PrimFunc, PassContext]:
    """Run the pass pipeline for `target`; return (function after the passes, PassContext).

    This is what the backend's codegen receives (`tile compile --emit ir`).
    """
    func = _single_stage(_check_func(func), "lower")
    backend, full = resolve_target(target)
    out = output_params(func, out_idx)
    opts = _codegen_options(full, out, options, backend)
    ctx = _context(func, backend, full, opts)
    return build_pipeline(backend).run(func, ctx), ctx


@user_facing
def trace(
    func: N.PrimFunc, target: Optional[str] = None, out_idx: OutIdx = None, **options: Any
) -> List[Tuple[str, N.PrimFunc]]:
    """[("input", func), (pass name, func after it), ...] for `target` (`tile trace`)."""
    func = _single_stage(_check_func(func), "trace")
    backend, full = resolve_target(target)
    out = output_params(func, out_idx)
    opts = _codegen_options(full, out, options, backend)
    return build_pipeline(backend).trace(func, _context(func, backend, full, opts))


def _codegen(func: N.PrimFunc, backend: Backend, target: str, options: Dict[str, Any]) -> Artifact:
    _check_toolchain(backend)
    ctx = _context(func, backend, target, options)
    lowered = build_pipeline(backend).run(func, ctx)
    module = TileModule(lowered, target, ctx.analyses)
    artifact = _manager().call(
        "tilecore_codegen",
        firstresult=True,
        what=f"for backend {backend.name!r} compiling {func.name!r}",
        backend=backend,
        module=module,
        options=dict(options),
    )
    if artifact is None:
        raise BackendError(
            f"no installed plugin generates code for backend {backend.name!r} "
            f"(no tilecore_codegen hook returned an artifact)"
        )
    if not isinstance(artifact, Artifact):
        raise BackendError(
            f"backend {backend.name!r}: tilecore_codegen returned "
            f"{type(artifact).__name__}, expected tilecore.plugin.Artifact"
        )
    return artifact


def _launcher_factory(key: str, backend: Backend, artifact: Artifact) -> Callable[[], Callable[..., Any]]:
    def make() -> Callable[..., Any]:
        with _lock:
            launch: Optional[Callable[..., Any]] = _launchers.get(key)
        if launch is not None:
            return launch
        launch = _manager().call(
            "tilecore_launcher",
            firstresult=True,
            what=f"loading a compiled kernel of backend {backend.name!r}",
            backend=backend,
            artifact=artifact,
        )
        if launch is None:
            raise BackendError(
                f"backend {backend.name!r} has no launcher here (no "
                f"tilecore_launcher hook handled it); code generation works, running "
                f"needs its device and runtime"
            )
        if key:
            with _lock:
                _launchers[key] = launch
        return launch

    return make


@user_facing
def compile(func: N.PrimFunc, target: Optional[str] = None, out_idx: OutIdx = None, **options: Any) -> Kernel:
    """Compile a PrimFunc for `target` (None: the default target) and return a Kernel.

    out_idx: parameter indices (negative allowed) of outputs the kernel
    allocates and returns. `profiler_inputs="torch"` makes `kernel.get_profiler()` draw
    torch tensors (default "numpy"). Other keyword options go to the backend's codegen
    and into the cache key.
    """
    func = _check_func(func)
    profiler_inputs = options.pop("profiler_inputs", "numpy")
    if profiler_inputs not in ("numpy", "torch"):
        raise TileError(f"profiler_inputs must be 'numpy' or 'torch', got {profiler_inputs!r}")
    backend, full = resolve_target(target)
    _check_index_range(func, backend)
    out = output_params(func, out_idx)
    if func.is_multi_stage:
        if func.scalar_params:
            raise UnsupportedFeatureError(
                backend.name,
                "scalar parameters in a prim_func with several T.Kernel stages or T.alloc_global scratch",
                func.scalar_params[0][1].span,
                func.source,
            )
        return _compile_stages(func, backend, full, out, profiler_inputs, options)
    opts = _codegen_options(full, out, options, backend)
    use_cache = _cache.cache_enabled()
    # Asking for the IR dumps means the passes must run: a cached artifact would skip them.
    dumping = bool(opts.get("dump_ir") or os.environ.get("TILECORE_DUMP_IR"))
    key = ""
    artifact: Optional[Artifact] = None
    if use_cache and not dumping:
        key = _key(func, backend, full, opts)
        with _lock:
            artifact = _memo.get(key)
            if artifact is not None:
                _memo.move_to_end(key)
        if artifact is None:
            artifact = _cache.DiskCache().get(key)
            if artifact is not None:
                _remember(key, artifact)
    if artifact is None:
        artifact = _codegen(func, backend, full, opts)
        if use_cache:
            key = key or _key(func, backend, full, opts)
            _cache.DiskCache().put(key, artifact)
            _remember(key, artifact)
    return Kernel(func, backend, full, artifact, out, _launcher_factory(key, backend, artifact), opts, profiler_inputs)


def _compile_stages(
    func: N.PrimFunc, backend: Backend, target: str, out: Tuple[int, ...], profiler_inputs: str, options: Dict[str, Any]
) -> Kernel:
    """A function with several T.Kernel blocks or T.alloc_global scratch: each stage compiled as
    its own PrimFunc (tilecore.runtime.stages), one Kernel launching them in order."""
    from ..passes.check_types import check
    from . import stages as S

    check(func)  # every top-level statement is a stage or scratch, each stage well typed
    S.check_scratch(func)
    parts = [compile(stage, target=target, **options) for stage in func.split_stages()]
    opts = _codegen_options(target, out, options, backend)
    return Kernel(
        func, backend, target, S.stage_artifact(func, parts), out, S.stage_launcher(func, parts), opts, profiler_inputs
    )


def _key(func: N.PrimFunc, backend: Backend, target: str, options: Dict[str, Any]) -> str:
    return _cache.cache_key(
        _ir_json(func),
        backend.name,
        backend.version,
        target,
        options,
        _plugin_fingerprint(),
        _code_fingerprint(backend),
    )


def compile_cache_key(func: N.PrimFunc, target: Optional[str] = None, out_idx: OutIdx = None, **options: Any) -> str:
    """The compile-cache key under which `compile` with these arguments stores its artifact
    (the autotuner moves artifacts compiled on other machines into this process's cache)."""
    func = _check_func(func)
    backend, full = resolve_target(target)
    out = output_params(func, out_idx)
    return _key(func, backend, full, _codegen_options(full, out, options, backend))


def _plugin_fingerprint() -> str:
    """Every loaded plugin as name=distribution@version (part of the cache key)."""
    plugins = _manager().plugins.values()
    return ";".join(sorted(f"{p.name}={p.distribution}@{p.version}" for p in plugins))


def _package_digest(folder: str, h: hashlib._Hash) -> None:
    """Feed every source file under `folder` (sorted paths and contents) into `h`."""
    for dirpath, dirnames, files in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and d != "tests")
        for name in sorted(files):
            if name.endswith((".py", ".c", ".h", ".cc", ".cu", ".ll", ".json")):
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    data = f.read()
                h.update(f"{os.path.relpath(path, folder)}\0{len(data)}\0".encode())
                h.update(data)


def _code_fingerprint(backend: Backend) -> str:
    """What the code behind `backend` is (part of the cache key): a digest of tilecore's own
    sources (passes, lowering toolkit, ...) and of the package of the plugin that declared the
    backend, plus the backend's `toolchain_fingerprint()`. Computed once per process."""
    with _lock:
        found = _fingerprints.get(backend.name)
    if found is not None:
        return found
    import hashlib
    import sys

    from ..plugin.registry import get_registry

    h = hashlib.sha256()
    folders = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # the tilecore package
    provider = get_registry().provider.get(backend.name)
    info = _manager().plugins.get(provider) if provider else None
    module = (
        sys.modules.get(str(getattr(info.plugin, "__module__", None) or getattr(info.plugin, "__name__", "")))
        if info is not None
        else None
    )
    top = sys.modules.get((getattr(module, "__name__", "") or "").split(".")[0])
    top_file = getattr(top, "__file__", None)
    if top_file and top is not sys.modules.get("tilecore"):
        if hasattr(top, "__path__"):  # a package: all of it
            folders.append(os.path.dirname(os.path.abspath(top_file)))
        else:  # a single-module plugin: that file (never the whole folder it sits in)
            with open(top_file, "rb") as f:
                h.update(f.read())
    for folder in folders:
        _package_digest(folder, h)
    if backend.toolchain_fingerprint is not None:
        try:
            h.update(str(backend.toolchain_fingerprint()).encode())
        except Exception as err:
            raise BackendError(
                f"backend {backend.name!r}: toolchain_fingerprint() failed: {type(err).__name__}: {err}"
            ) from err
    found = h.hexdigest()
    with _lock:
        _fingerprints[backend.name] = found
    return found


def _remember(key: str, artifact: Artifact) -> None:
    with _lock:
        _memo[key] = artifact
        _memo.move_to_end(key)
        while len(_memo) > _MEMO_SIZE:
            old, _ = _memo.popitem(last=False)
            _launchers.pop(old, None)


# ---------------------------------------------------------------------- jit


def _freeze(value: Any) -> Tuple[Any, ...]:
    """A hashable stand-in for a factory argument (lists become tuples, dicts sorted items)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    hash(value)
    return (type(value).__name__, value)


class JITFunction:
    """`@tilecore.jit` applied to a factory: calling it builds, compiles and memoizes a Kernel.

    `prim_func(*args, **kwargs)` returns the factory's PrimFunc without compiling.
    """

    __name__: str  # the factory's, copied by functools.update_wrapper

    def __init__(
        self, factory: Callable[..., Any], out_idx: OutIdx = None, target: Optional[str] = None, **options: Any
    ):
        functools.update_wrapper(self, factory)
        self.factory = factory
        self.out_idx = out_idx
        self.target = target
        self.options = options
        self._kernels: Dict[Any, Kernel] = {}
        self._lock = threading.Lock()

    def prim_func(self, *args: Any, **kwargs: Any) -> N.PrimFunc:
        """Call the factory and check it returned a PrimFunc."""
        func = self.factory(*args, **kwargs)
        if not isinstance(func, N.PrimFunc):
            raise TileError(
                f"@tilecore.jit factory {self.__name__!r} must return a function made by "
                f"@T.prim_func, but it returned {type(func).__name__}"
            )
        return func

    @user_facing
    def __call__(self, *args: Any, **kwargs: Any) -> Kernel:
        try:
            key = (_freeze(args), _freeze(kwargs), os.environ.get("TILECORE_TARGET"))
        except TypeError:  # an unhashable argument: compile() still memoizes by IR
            key = None
        if key is not None:
            with self._lock:
                kernel = self._kernels.get(key)
            if kernel is not None:
                return kernel
        kernel = compile(self.prim_func(*args, **kwargs), target=self.target, out_idx=self.out_idx, **self.options)
        if key is not None:
            with self._lock:
                self._kernels[key] = kernel
        return kernel

    def __repr__(self) -> str:
        return f"<tilecore.jit {self.__name__} out_idx={self.out_idx} target={self.target}>"


class LazyKernel:
    """`@tilecore.jit` applied to a PrimFunc: compiled on first use, then behaves as the Kernel."""

    def __init__(self, func: N.PrimFunc, out_idx: OutIdx = None, target: Optional[str] = None, **options: Any):
        self.func = func
        self._args = (out_idx, target, options)
        self._kernel: Optional[Kernel] = None

    @user_facing
    def compiled(self) -> Kernel:
        """The Kernel, compiled on the first call."""
        if self._kernel is None:
            out_idx, target, options = self._args
            self._kernel = compile(self.func, target=target, out_idx=out_idx, **options)
        return self._kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.compiled()(*args, **kwargs)

    def __repr__(self) -> str:
        out_idx, target, _ = self._args
        state = "compiled" if self._kernel is not None else "compiled on first use"
        return f"<tilecore.jit {self.func.name} ({state}) out_idx={out_idx} target={target}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)


def jit(
    func: Optional[Callable[..., Any]] = None, *, out_idx: OutIdx = None, target: Optional[str] = None, **options: Any
) -> Any:
    """Decorate a kernel factory (a function returning a @T.prim_func) to compile on call.

    A function whose own body holds the `with T.Kernel(...)` block is an eager-style
    kernel (tilecore.frontend.eager): calling it runs it, `.compile(...)` compiles it.

    `@tilecore.jit` and `@tilecore.jit(out_idx=[-1], target="cpu")` both work.
    Kernels are memoized per factory arguments; compiled artifacts are also
    cached on disk (see tilecore.runtime.cache).
    """

    def wrap(f: Any) -> Union[LazyKernel, JITFunction, EagerJITFunction]:
        if isinstance(f, N.PrimFunc):
            return LazyKernel(f, out_idx=out_idx, target=target, **options)
        if not callable(f):
            raise TypeError(f"@tilecore.jit expects a factory function or a PrimFunc, got {f!r}")
        from ..frontend.eager import is_eager

        if is_eager(f):
            from .eager import EagerJITFunction

            return EagerJITFunction(f, out_idx=out_idx, target=target, **options)
        return JITFunction(f, out_idx=out_idx, target=target, **options)

    if func is not None:
        return wrap(func)
    return wrap
