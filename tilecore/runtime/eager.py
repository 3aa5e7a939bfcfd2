"""`@tilecore.jit` on an eager-style kernel (see tilecore.frontend.eager).

Calling it with arrays and Python values compiles the kernel for those values
and the sizes read from the arrays' shapes (memoized), runs it and returns its
`T.empty` outputs; `.compile(**values)` returns the Kernel for given Python
values and `T.const` sizes, to be called with the tensor arguments.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple, Union

from ..diagnostics import TileError, user_facing
from ..ir import nodes as N
from ..ir.types import is_int4

if TYPE_CHECKING:
    from .api import JITFunction
    from .kernel import Kernel


def _is_array(value: Any) -> bool:
    """Arrays (numpy, torch, cupy, DLPack objects) are tensor arguments; the rest are Python values."""
    if isinstance(value, (str, bytes, int, float, complex, bool)) or value is None:
        return False
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return False
    return hasattr(value, "shape") and hasattr(value, "dtype") or hasattr(value, "__dlpack__")


class EagerJITFunction:
    """An eager-style kernel function: call it with arrays, or `.compile(...)` it."""

    __name__: str  # the kernel function's, copied by functools.update_wrapper

    def __init__(
        self,
        func: Callable[..., Any],
        out_idx: Union[None, int, Sequence[int]] = None,
        target: Optional[str] = None,
        **options: Any,
    ):
        functools.update_wrapper(self, func)
        self.func = func
        self.signature = inspect.signature(func)
        self.target = target
        self.options = options
        if out_idx is not None:
            raise TileError(
                f"{func.__name__}: an eager-style kernel returns its T.empty outputs; out_idx does not apply to it"
            )
        self._kernels: Dict[Any, Kernel] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ compiling
    def _split(self, values: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, int]]:
        """Python arguments (signature names, defaults filled) and T.const values (other names)."""
        params = self.signature.parameters
        py = {k: v for k, v in values.items() if k in params}
        consts = {k: int(v) for k, v in values.items() if k not in params}
        for name, p in params.items():
            if name not in py and p.default is not inspect.Parameter.empty:
                py[name] = p.default
        return py, consts

    def prim_func(self, **values: Any) -> N.PrimFunc:
        """The PrimFunc for these Python arguments and T.const values (not compiled)."""
        from ..frontend.eager import parse_eager

        py, consts = self._split(values)
        prim: N.PrimFunc = parse_eager(self.func, py, consts)[0]
        return prim

    @user_facing
    def compile(self, target: Optional[str] = None, **values: Any) -> Kernel:
        """The Kernel for these Python arguments and T.const values; call it with the tensors."""
        from ..frontend.eager import parse_eager
        from .api import _freeze
        from .api import compile as compile_func

        py, consts = self._split(values)
        target = target or self.target
        try:
            key: Optional[Tuple[Any, ...]] = (_freeze(py), _freeze(consts), target, os.environ.get("TILECORE_TARGET"))
        except TypeError:
            key = None
        if key is not None:
            with self._lock:
                kernel = self._kernels.get(key)
            if kernel is not None:
                return kernel
        prim, parser = parse_eager(self.func, py, consts)
        n_out = len(parser.outputs)
        out_idx = list(range(len(prim.params) - n_out, len(prim.params))) or None
        kernel = compile_func(prim, target=target, out_idx=out_idx, **self.options)
        if key is not None:
            with self._lock:
                self._kernels[key] = kernel
        return kernel

    # ------------------------------------------------------------------ calling
    @user_facing
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kernel, tensors = self._kernel_for(args, kwargs)
        return kernel(*self.in_order(tensors))

    def in_order(self, tensors: Dict[str, Any]) -> List[Any]:
        """The arrays of a call in the order the Kernel takes them."""
        return [tensors[n] for n in self.signature.parameters if n in tensors]

    def as_factory(self, names: Sequence[str], sample: Dict[str, Any]) -> JITFunction:
        """This kernel as a `@tilecore.jit` factory over the Python parameters and T.const sizes
        `names` (what tilecore.autotune tunes); `sample` (values of every name) fixes the outputs."""
        from ..frontend.eager import parse_eager
        from .api import JITFunction

        py, consts = self._split(sample)
        prim, parser = parse_eager(self.func, py, consts)
        n_params, n_out = len(prim.params), len(parser.outputs)
        factory = _EagerFactory(self, tuple(names))
        return JITFunction(
            factory, out_idx=list(range(n_params - n_out, n_params)) or None, target=self.target, **self.options
        )

    @user_facing
    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The generated code of the kernel a call with these arguments runs (not run); without
        arrays, the arguments are those of `compile` (Python parameters and T.const sizes)."""
        if not args and not any(_is_array(v) for v in kwargs.values()):
            return self.compile(**kwargs).source
        return self._kernel_for(args, kwargs)[0].source

    def _kernel_for(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Kernel, Dict[str, Any]]:
        """(the Kernel for a call with these arguments, {tensor parameter: array})."""
        values, tensors = self.bind_call(args, kwargs)
        return self.compile(**values), tensors

    def bind_call(
        self,
        args: Sequence[Any],
        kwargs: Dict[str, Any],
        leave_out: Collection[str] = frozenset(),
    ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """({Python parameter or T.const size: value}, {tensor parameter: array}) of a call with
        arrays: sizes read from the arrays' shapes, defaults applied; the Python parameters in
        `leave_out` (tuned ones) may be missing."""
        from ..frontend.eager import parse_eager

        try:
            bound = self.signature.bind_partial(*args, **kwargs)
        except TypeError as err:
            raise TileError(f"{self.__name__}(): {err}") from None
        for name, p in self.signature.parameters.items():
            if name not in bound.arguments and p.default is inspect.Parameter.empty and name not in leave_out:
                raise TileError(f"{self.__name__}(): missing a required argument: {name!r}")
        bound.apply_defaults()
        tensors = {k: v for k, v in bound.arguments.items() if _is_array(v)}
        py = {k: v for k, v in bound.arguments.items() if k not in tensors}
        _, probe = parse_eager(self.func, py, {}, probe=True)
        consts: Dict[str, int] = {}
        for name, ttype in probe.declared_types.items():
            if name not in tensors:
                raise TileError(
                    f"{self.__name__}(): the tensor parameter '{name}' needs an array, "
                    f"got {type(bound.arguments.get(name)).__name__}"
                )
            shape = tuple(tensors[name].shape)
            if is_int4(str(ttype.dtype)) and shape:  # passed packed: two values a byte along the last dimension
                shape = shape[:-1] + (2 * int(shape[-1]),)
            if len(shape) != len(ttype.shape):
                raise TileError(
                    f"{self.__name__}(): '{name}' is declared with {len(ttype.shape)} "
                    f"dimension(s), got an array of shape {shape}"
                )
            for dim, size in zip(ttype.shape, shape):
                if isinstance(dim, N.Var) and dim.name in probe.const_names:
                    known = consts.setdefault(dim.name, int(size))
                    if known != int(size):
                        raise TileError(
                            f"{self.__name__}(): T.const '{dim.name}' is {known} from "
                            f"one argument and {int(size)} from '{name}'"
                        )
        missing = [n for n in probe.const_names if n not in consts]
        if missing:
            raise TileError(
                f"{self.__name__}(): T.const {', '.join(missing)} cannot be read from "
                f"the arguments' shapes; use {self.__name__}.compile({missing[0]}=...)"
            )
        return {**py, **consts}, tensors

    def __repr__(self) -> str:
        return f"<tilecore.jit eager kernel {self.__name__} target={self.target}>"


class _EagerFactory:
    """An eager kernel seen as a factory of keyword values (EagerJITFunction.as_factory). It
    carries the kernel's `__code__`, so the autotuner's cache key names this kernel's code."""

    def __init__(self, eager: EagerJITFunction, names: Tuple[str, ...]):
        self.eager = eager
        self.__name__ = self.__qualname__ = eager.__name__
        self.__doc__ = eager.func.__doc__
        self.__module__ = eager.func.__module__
        self.__code__ = eager.func.__code__
        self.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])

    def __call__(self, **values: Any) -> N.PrimFunc:
        return self.eager.prim_func(**values)
