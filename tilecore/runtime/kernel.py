"""The Kernel: a compiled PrimFunc that checks its arguments, allocates outputs and launches."""

from __future__ import annotations

import functools
import operator
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..diagnostics import TileError, TileRuntimeError, UnsupportedFeatureError, hide_internal_frames
from ..ir import nodes as N
from ..ir.types import is_int4, storage_of
from . import arrays

if TYPE_CHECKING:
    from ..plugin.backend import Artifact, Backend
    from ..profiler import Profiler

Args = Tuple[Any, ...]  # a call's arrays
Signature = Tuple[Any, ...]  # _signature of each argument (hashable)
Plan = Callable[[Args], Any]  # runs a call of a remembered signature, returns its outputs
Allocators = Tuple[Tuple[int, Callable[[], Any]], ...]  # (parameter index, allocate) per output
# what an int4 tensor is passed as (docs/semantics.md "int4"), said in argument errors
_PACKED_NOTE = " (int4 values packed two per byte along the last dimension)"


def normalize_out_idx(
    out_idx: Union[None, int, Sequence[int]], nparams: int, func_name: str = "kernel"
) -> Tuple[int, ...]:
    """Sorted, non-negative parameter indices of the outputs (None -> no outputs)."""
    if out_idx is None:
        return ()
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    result: List[int] = []
    for i in out_idx:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TileError(f"out_idx entries must be ints, got {i!r}")
        j = i + nparams if i < 0 else i
        if not 0 <= j < nparams:
            raise TileError(f"out_idx {i} is out of range for {func_name!r}, which has {nparams} parameter(s)")
        if j in result:
            raise TileError(f"out_idx names parameter {j} twice")
        result.append(j)
    return tuple(sorted(result))


def output_params(func: N.PrimFunc, out_idx: Any) -> Tuple[int, ...]:
    """Indices into `func.params` (the tensors) of the outputs `out_idx` names.

    out_idx counts every parameter in the order written, scalar ones included (as TileLang's
    does); naming a scalar parameter is an error, as an output is a tensor the kernel allocates.
    """
    scalars = {position for position, _ in func.scalar_params}
    full = normalize_out_idx(out_idx, len(func.params) + len(scalars), func.name)
    for j in full:
        if j in scalars:
            name = next(v.name for position, v in func.scalar_params if position == j)
            raise TileError(
                f"out_idx names parameter {j} of {func.name!r}, the scalar parameter {name!r}; "
                f"outputs are tensors the kernel allocates"
            )
    indices = tuple(j - sum(position < j for position in scalars) for j in full)
    for j in indices:
        if is_int4(func.params[j].dtype):
            param = func.params[j]
            raise UnsupportedFeatureError(
                "tilecore",
                f"the int4 output {param.name!r} (int4 tensors are read-only: two values share a byte); "
                "return an int8 tensor and pack it on the host",
                param.span,
                func.source,
            )
    return indices


_INT32 = (-(1 << 31), (1 << 31) - 1)


def scalar_argument(value: Any, var: N.Var, who: str) -> int:
    """The int a scalar parameter's argument passes (a Python or numpy integer, or a 0-d integer
    tensor); TileRuntimeError naming the parameter for anything else or a value out of range."""
    kind = type(value).__name__
    if (
        isinstance(value, (bool, np.bool_))
        or not hasattr(value, "__index__")
        or getattr(value, "ndim", 0) != 0
        or isinstance(value, float)
    ):
        raise TileRuntimeError(
            f"{who}, argument {var.name!r}: expected an integer for the scalar "
            f"parameter {var.name}: T.{var.dtype}, got {kind} {value!r}"[:400]
        )
    try:
        number = int(value.__index__())
    except TypeError:  # a 0-d float tensor defines __index__ but refuses it
        raise TileRuntimeError(
            f"{who}, argument {var.name!r}: expected an integer for the scalar "
            f"parameter {var.name}: T.{var.dtype}, got {kind} {value!r}"[:400]
        ) from None
    low, high = _INT32
    if not low <= number <= high:
        raise TileRuntimeError(
            f"{who}, argument {var.name!r}: {number} does not fit the scalar "
            f"parameter's dtype {var.dtype} ([{low}, {high}])"
        )
    return number


def written_buffer_names(func: N.PrimFunc) -> FrozenSet[str]:
    """Names of the global buffers (parameters) that the kernel writes."""
    from ..ir.visitor import walk_stmts

    names: set[str] = set()
    for stmt in walk_stmts(func.body):
        if isinstance(stmt, N.Store):
            names.add(stmt.buffer.name)
        elif isinstance(stmt, (N.Copy, N.Fill, N.Atomic)):
            names.add(stmt.dst.buffer.name)
        elif isinstance(stmt, N.Gemm):
            names.add(stmt.c.buffer.name)
        elif isinstance(stmt, (N.Reduce, N.Cumsum)) and stmt.dst is not None:
            names.add(stmt.dst.name)
    return frozenset(n for n in names if any(p.name == n for p in func.params))


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for n in shape:
        count *= int(n)
    return count


def _writeable(array: Any) -> bool:
    """False only for arrays that say they are read-only (numpy's writeable flag)."""
    flags = getattr(array, "flags", None)
    return bool(getattr(flags, "writeable", True)) if flags is not None else True


_NO_KEYWORDS: Dict[str, Any] = {}
_MAX_PLANS = 64  # signatures remembered per kernel (a kernel called with ever new shapes starts over)
_ndarray = np.ndarray
_torch_tensor: Optional[type] = None  # torch.Tensor once torch is imported (tilecore never imports it)


def _signature(value: Any) -> Optional[Signature]:
    """What check_arguments looks at in `value`, as a hashable key; None: always check fully.

    numpy: dtype, shape, C-contiguity and writability; torch: dtype, shape,
    contiguity and device. The type is part of the key, so a subclass or another
    library never shares an entry. Other kinds (cupy, DLPack objects) return None.
    """
    kind = type(value)
    if kind is _ndarray:
        flags = value.flags
        return (kind, value.dtype, value.shape, flags.c_contiguous, flags.writeable)
    tensor = _torch_tensor or _find_torch_tensor()
    if kind is tensor or (tensor is not None and isinstance(value, tensor)):
        return (kind, value.dtype, value.shape, value.is_contiguous(), value.device, value.is_neg())
    return None


def _find_torch_tensor() -> Optional[type]:
    """torch.Tensor if torch has been imported (by the caller), else None."""
    global _torch_tensor
    torch = sys.modules.get("torch")
    _torch_tensor = getattr(torch, "Tensor", None) if torch is not None else None
    return _torch_tensor


def _generic_run(
    launch: Callable[[List[Any], Dict[str, int]], None], bindings: Dict[str, int]
) -> Callable[[Args], None]:
    """`run(args)` through the launcher's plain `launch(args, bindings)` contract (each call gets its
    own list and dict, so a launcher that changes them cannot change the remembered plan)."""
    if not bindings:

        def run_unbound(call_args: Args) -> None:
            launch(list(call_args), {})

        return run_unbound

    def run(call_args: Args) -> None:
        launch(list(call_args), dict(bindings))

    return run


def _shape_text(shape: Sequence[Union[int, N.Var]]) -> str:
    items = [s.name if isinstance(s, N.Var) else str(s) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class Kernel:
    """A compiled kernel. Call it with the inputs; it returns the `out_idx` outputs.

    `ir` is the PrimFunc as compiled, `source` the backend's generated code,
    `artifact` the cached compile result, `backend` the Backend and `target` the
    full target it was compiled for.
    """

    def __init__(
        self,
        func: N.PrimFunc,
        backend: Backend,
        target: str,
        artifact: Artifact,
        out_idx: Union[None, int, Sequence[int]],
        launcher_factory: Callable[[], Callable[..., Any]],
        options: Optional[Dict[str, Any]] = None,
        profiler_inputs: str = "numpy",
    ):
        self.ir = func
        # the array library of the inputs get_profiler() draws: "numpy" (device arrays off the
        # cpu) or "torch" (what TileLang's profiler hands a reference program)
        self.profiler_inputs = profiler_inputs
        self.backend = backend
        self.target = target
        self.artifact = artifact
        self.options = dict(options or {})
        self.out_idx = normalize_out_idx(out_idx, len(func.params), func.name)  # tensor indices
        self._launcher_factory = launcher_factory
        self._launch: Optional[Callable[..., Any]] = None
        self._lock = threading.Lock()
        outs = set(self.out_idx)
        self.inputs: Tuple[N.Buffer, ...] = tuple(p for i, p in enumerate(func.params) if i not in outs)
        self.outputs: Tuple[N.Buffer, ...] = tuple(func.params[i] for i in self.out_idx)
        self._input_index = tuple(i for i in range(len(func.params)) if i not in outs)
        self._written = written_buffer_names(func)
        self._outputs_last = self.out_idx == tuple(range(len(self.inputs), len(func.params)))
        # (inputs + outputs) -> parameter order, for out_idx that are not the last parameters
        positions = {p: k for k, p in enumerate(self._input_index + self.out_idx)}
        self._param_order: Callable[[Args], Args] = (
            operator.itemgetter(*[positions[i] for i in range(len(func.params))]) if len(func.params) > 1 else tuple
        )
        # argument signatures of calls that passed check_arguments -> plan (see _make_plan)
        self._plans: Dict[Signature, Plan] = {}
        # the same signatures -> the launcher's bind_call (see _remember_fast_call); _fast: the latest
        self._fast_calls: Dict[Signature, Plan] = {}
        self._fast: Optional[Plan] = None
        self._index_limit = (1 << (int(getattr(backend.capabilities, "index_bits", 32)) - 1)) - 1
        # a dynamic dimension must also fit its own declared dtype (the code computes with it: an
        # int32 M past 2^31 - 1 wrapped to a negative grid on the interpreter)
        self._dim_limits = {v.name: min(self._index_limit, int(np.iinfo(v.dtype).max)) for v in func.dyn_vars}
        # inputs the kernel writes: such an argument must not share memory with another one
        self._written_inputs = tuple(k for k, p in enumerate(self.inputs) if p.name in self._written)
        # the call's arguments in order: (name, None) for an input tensor, (name, Var) for a scalar
        self._call_slots: Tuple[Tuple[str, Optional[N.Var]], ...] = ()
        if func.scalar_params:
            scalar_at = dict(func.scalar_params)
            tensors = iter(enumerate(func.params))
            slots: List[Tuple[str, Optional[N.Var]]] = []
            for position in range(len(func.params) + len(scalar_at)):
                if position in scalar_at:
                    slots.append((scalar_at[position].name, scalar_at[position]))
                    continue
                k, param = next(tensors)
                if k not in outs:
                    slots.append((param.name, None))
            self._call_slots = tuple(slots)

    @property
    def name(self) -> str:
        """The PrimFunc's name."""
        return self.ir.name

    @property
    def source(self) -> str:
        """The generated code (CUDA C++, LLVM IR, NPU assembly, ...) as text."""
        return str(self.artifact.source)

    def get_kernel_source(self) -> str:
        """The generated code (TileLang's spelling of `source`, for ported code)."""
        return self.source

    def get_profiler(
        self, inputs: Optional[Sequence[Any]] = None, seed: int = 0, tensor_supply_type: Any = None
    ) -> Profiler:
        """A `tilecore.profiler.Profiler` timing this kernel (TileLang's spelling):
        `kernel.get_profiler().do_bench()` is the median run time in ms; `inputs` default to
        random arrays drawn from `seed` (TileLang's `tensor_supply_type` is accepted and ignored)."""
        from ..profiler import Profiler

        return Profiler(self, inputs, seed)

    def __repr__(self) -> str:
        ins = (
            ", ".join(name for name, _ in self._call_slots)
            if self._call_slots
            else ", ".join(p.name for p in self.inputs)
        )
        outs = ", ".join(p.name for p in self.outputs)
        return f"<tilecore.Kernel {self.name}({ins}) -> ({outs}) on {self.target}>"

    # ------------------------------------------------------------------ calling
    #
    # A call whose arguments have the signature (see _signature) of an earlier call that passed
    # check_arguments runs that call's plan: a closure holding the dynamic-dimension bindings, the
    # output allocators and the launch, specialized by the launcher when it offers `specialize`.
    # Every check depends only on what the signature holds, so the plan skips nothing whose
    # result could differ. Anything else (keywords, a new signature, an array kind without a
    # signature) takes the full check in _call. Before all that, __call__ tries the launcher's
    # bind_call for the latest signature (see _remember_fast_call), which checks the signature
    # itself and hands everything else to _checked_call.

    def _launcher(self) -> Callable[..., Any]:
        if self._launch is None:
            with self._lock:
                if self._launch is None:
                    self._launch = self._launcher_factory()
        return self._launch

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        try:
            if fast is not None and not kwargs:
                return fast(args)  # any call it cannot take goes to _checked_call
            return self._checked_call(args, kwargs)
        except TileError as err:  # ready for the user in _checked_call; only this frame to drop
            if os.environ.get("TILECORE_TRACEBACK"):
                raise
            raise err.with_traceback(None) from None

    def _checked_call(self, args: Args, kwargs: Dict[str, Any] = _NO_KEYWORDS) -> Any:
        """A call through the remembered plans, or the full check (_call) for a new signature."""
        try:
            if not kwargs:
                try:
                    signature = tuple(map(_signature, args))
                    plan = self._plans.get(signature)
                except TypeError:  # an argument whose dtype or device cannot be hashed
                    plan = None
                if plan is not None:
                    self._fast = self._fast_calls.get(signature)  # the latest signature gets the fast call
                    try:
                        return plan(args)
                    except TileError:
                        raise
                    except Exception as err:  # a backend failure becomes one clear error, cause chained
                        raise self._launch_failure(err) from err
            return self._call(args, kwargs)
        except TileError as err:  # the message names the user's line; our frames would bury it
            if os.environ.get("TILECORE_TRACEBACK"):
                raise
            raise hide_internal_frames(err) from None

    def _call(self, args: Args, kwargs: Dict[str, Any]) -> Any:
        """The full path: match and check the arguments, allocate, launch, remember the plan."""
        signature: Optional[Signature] = None
        inputs: Sequence[Any]
        scalars: Dict[str, int] = {}
        if self._call_slots:  # scalar values vary per call: bound each time, never a remembered plan
            args, scalars = self._take_scalars(args, kwargs)
            kwargs = _NO_KEYWORDS
        if not kwargs and len(args) == len(self._input_index) and not scalars:
            inputs = args
            try:
                signature = tuple(map(_signature, args))
                hash(signature)
            except TypeError:
                signature = None
        else:
            inputs = self._match_arguments(args, kwargs)
        infos, bindings = self.check_arguments(inputs)
        bindings.update(scalars)
        like = next((info for _, info in infos if info.library != "dlpack"), None)
        space = self.backend.capabilities.memory_space
        filled = {i: not self.writes_every_element(i, bindings) for i in self.out_idx}
        allocators = tuple(
            (
                i,
                arrays.allocator(
                    like,
                    self._output_shape(self.ir.params[i], bindings),
                    self.ir.params[i].dtype,
                    space,
                    zeroed=filled[i],
                ),
            )
            for i in self.out_idx
        )
        checked = tuple(info.array for _, info in infos)
        # CPU DLPack objects are checked (and run) as numpy views: not the caller's object
        cacheable = (
            signature is not None and None not in signature and all(array is arg for array, arg in zip(checked, inputs))
        )
        launch = self._launch or self._launcher()
        outputs = self._allocate(allocators)
        call_args = self._arrange(checked, outputs)
        run: Optional[Callable[[Args], Any]] = None
        try:
            specialize = getattr(launch, "specialize", None) if cacheable else None
            if specialize is not None:
                run = specialize(call_args, dict(bindings))
            if run is None:
                run = _generic_run(launch, bindings)
            run(call_args)
        except TileError:
            raise
        except Exception as err:  # a backend failure becomes one clear error, cause chained
            raise self._launch_failure(err) from err
        if cacheable and signature is not None:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
                self._fast_calls.clear()
            plan = self._make_plan(run, allocators)
            if self._written_inputs and len(self.inputs) > 1:
                plan = self._with_alias_check(plan)
            self._plans[signature] = plan
            self._remember_fast_call(
                signature,
                launch,
                call_args,
                bindings,
                tuple((i, allocate, not filled[i]) for i, allocate in allocators),
            )
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def writes_every_element(self, param_index: int, bindings: Optional[Dict[str, int]] = None) -> bool:
        """Whether the kernel provably writes every element of parameter `param_index` for the dynamic
        sizes `bindings` (tilecore/passes/output_coverage.py); `out_idx` outputs for which this
        holds are allocated without the zero fill."""
        from ..passes.output_coverage import writes_every_element

        return writes_every_element(self.ir, self.ir.params[param_index], bindings or {})

    def _remember_fast_call(
        self,
        signature: Signature,
        launch: Callable[..., Any],
        call_args: Args,
        bindings: Dict[str, int],
        outputs: Tuple[Tuple[int, Callable[[], Any], bool], ...],
    ) -> None:
        """Ask the launcher for `bind_call`: the whole call for this signature as one callable that
        checks the signature itself and hands any other call to `_checked_call`; it becomes the
        first thing __call__ tries. `outputs`: (parameter index, allocate, uninitialised) triples."""
        bind_call = getattr(launch, "bind_call", None)
        fast: Optional[Plan] = None
        if bind_call is not None:
            try:
                fast = bind_call(call_args, dict(bindings), self._input_index, outputs, self._checked_call)
            except Exception:  # an optional speed-up: the plan stays correct without it
                fast = None
        if fast is not None and self._written_inputs and len(self.inputs) > 1:
            fast = self._with_alias_check(fast)  # the launcher's callable does not know about aliasing
        if fast is not None:
            self._fast_calls[signature] = fast
        self._fast = fast

    def _with_alias_check(self, plan: Plan) -> Plan:
        """`plan` preceded by the check that no written input shares memory with another input
        (a signature says nothing about which memory the arrays are in)."""
        check = self._check_aliasing

        @functools.wraps(plan)  # keeps the wrapped callable visible as __wrapped__
        def checked(inputs: Args) -> Any:
            check(inputs)
            return plan(inputs)

        return checked

    def _check_aliasing(self, inputs: Sequence[Any]) -> None:
        """Refuse an input the kernel writes that overlaps another argument's memory: the result
        would depend on the order the backend happens to read and write in."""
        ranges = [arrays.memory_range(a) for a in inputs]
        for k in self._written_inputs:
            span = ranges[k]
            if span is None:
                continue
            start, end = span
            for j, other in enumerate(ranges):
                if j == k or other is None or end <= other[0] or other[1] <= start or start == end:
                    continue
                raise self._param_error(
                    f"{self._where(self.inputs[k])}: shares memory with argument {self.inputs[j].name!r}, "
                    f"but the kernel writes {self.inputs[k].name!r} while it reads the other, so the result "
                    f"would depend on the order of reads and writes; pass a separate array (e.g. a copy)",
                    self.inputs[k],
                )

    def _make_plan(self, run: Callable[[Args], Any], allocators: Allocators) -> Plan:
        """`plan(inputs)` for a remembered signature: allocate the outputs, `run` all arguments, return
        the outputs. Written out per case, as this is the whole per-call cost above the launch; a
        failure of `run` that is not a TileError is wrapped by __call__."""
        if not allocators:
            return run
        allocate, arrange, allocation_failure = self._allocate, self._arrange, self._allocation_failure
        if len(allocators) == 1 and self._outputs_last:
            ((param_index, allocate_one),) = allocators

            def plan_one(inputs: Args) -> Any:
                try:
                    out = allocate_one()
                except Exception as err:
                    raise allocation_failure(param_index, err) from err
                run(inputs + (out,))
                return out

            return plan_one

        def plan(inputs: Args) -> Any:
            outputs = allocate(allocators)
            run(arrange(inputs, outputs))
            return outputs[0] if len(outputs) == 1 else outputs

        return plan

    def _allocate(self, allocators: Allocators) -> Args:
        outputs = []
        for i, allocate in allocators:
            try:
                outputs.append(allocate())
            except Exception as err:
                raise self._allocation_failure(i, err) from err
        return tuple(outputs)

    def _allocation_failure(self, param_index: int, err: Exception) -> TileRuntimeError:
        """The error for an output that could not be allocated (no array library, out of memory)."""
        what = str(err) if isinstance(err, arrays.NotAnArray) else f"{type(err).__name__}: {err}"
        return TileRuntimeError(f"{self._who()}: cannot allocate output {self.ir.params[param_index].name!r}: {what}")

    def _arrange(self, inputs: Args, outputs: Args) -> Args:
        """All arguments in parameter order."""
        if self._outputs_last:  # the usual layout: inputs, then outputs
            return inputs + outputs
        return self._param_order(inputs + outputs)

    def _launch_failure(self, err: Exception) -> TileRuntimeError:
        return TileRuntimeError(
            f"{self._who()}: backend {self.backend.name!r} failed to run the kernel: "
            f"{type(err).__name__}: {err} (TILECORE_TRACEBACK=1 shows the backend's traceback)"
        )

    def _who(self) -> str:
        return f"kernel {self.name!r}"

    def _take_scalars(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, int]]:
        """(the input arrays in order, {scalar parameter: its int}) of a call with scalar parameters."""
        values = self._match_arguments(args, kwargs, [name for name, _ in self._call_slots])
        arrays_in, scalars = [], {}
        for (_, var), value in zip(self._call_slots, values):
            if var is None:
                arrays_in.append(value)
            else:
                scalars[var.name] = scalar_argument(value, var, self._who())
        return tuple(arrays_in), scalars

    def _match_arguments(
        self, args: Sequence[Any], kwargs: Dict[str, Any], names: Optional[List[str]] = None
    ) -> List[Any]:
        names = names or [p.name for p in self.inputs]
        if len(args) > len(names) or (not kwargs and len(args) != len(names)):
            outs = ""
            if self.outputs:
                outs = (
                    f"; the output(s) {', '.join(p.name for p in self.outputs)} are allocated by "
                    f"the kernel (out_idx={list(self.out_idx)})"
                )
            raise TileRuntimeError(
                f"{self._who()} takes {len(names)} input(s) ({', '.join(names)}) but {len(args)} were given{outs}"
            )
        values: Dict[str, Any] = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TileRuntimeError(f"{self._who()} has no input named {key!r}; inputs: {', '.join(names)}")
            if key in values:
                raise TileRuntimeError(f"{self._who()}: input {key!r} given twice")
            values[key] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise TileRuntimeError(f"{self._who()}: missing input(s) {', '.join(missing)}")
        return [values[n] for n in names]

    def check_arguments(self, inputs: Sequence[Any]) -> Tuple[List[Tuple[int, arrays.ArrayInfo]], Dict[str, int]]:
        """Validate every input; return ([(param index, ArrayInfo)], dynamic-dim bindings).

        Raises TileRuntimeError naming the parameter and the expected vs given value.
        """
        space = self.backend.capabilities.memory_space
        bindings: Dict[str, int] = {}
        bound_by: Dict[str, Tuple[str, int]] = {}  # dim name -> (parameter, axis) that bound it
        where = self._where  # messages are built only when raising
        first_device: Optional[Tuple[str, str]] = None
        infos: List[Tuple[int, arrays.ArrayInfo]] = []
        for param, param_index, value in zip(self.inputs, self._input_index, inputs):
            try:
                info = arrays.describe(value)
            except arrays.NotAnArray as err:
                raise self._param_error(f"{where(param)}: {err}", param) from None
            if info.memory_space != space:
                hint = " (e.g. tensor.cpu() or numpy.asarray)" if space == "cpu" else f" (e.g. tensor.to('{space}'))"
                raise self._param_error(
                    f"{where(param)}: expected an array in {space} memory for backend "
                    f"{self.backend.name!r}, got one on {info.device}; move it there first{hint}",
                    param,
                )
            if space != "cpu":
                if first_device is None:
                    first_device = (param.name, info.device)
                elif info.device != first_device[1]:
                    raise self._param_error(
                        f"{where(param)}: is on {info.device} but {first_device[0]!r} is on "
                        f"{first_device[1]}; all arguments must be on one device",
                        param,
                    )
            want_dtype, want_shape = storage_of(param.dtype, param.shape)
            packed = _PACKED_NOTE if is_int4(param.dtype) else ""
            if info.dtype != want_dtype:
                raise self._param_error(f"{where(param)}: expected dtype {want_dtype}{packed}, got {info.dtype}", param)
            if len(info.shape) != param.ndim:
                raise self._param_error(
                    f"{where(param)}: expected a {param.ndim}-D array of shape {_shape_text(want_shape)}"
                    f"{packed}, got a {len(info.shape)}-D array of shape {tuple(info.shape)}",
                    param,
                )
            for axis, (want, got) in enumerate(zip(want_shape, info.shape)):
                if isinstance(want, N.Var):
                    if want.name in bindings and bindings[want.name] != got:
                        raise self._param_error(
                            f"{where(param)}: dimension {axis} is {want.name} = {got}, but {want.name} = "
                            f"{bindings[want.name]} was bound by argument {bound_by[want.name][0]!r} "
                            f"(dimension {bound_by[want.name][1]}); expected shape "
                            f"{_shape_text(param.shape)} with {want.name} = {bindings[want.name]}, "
                            f"got {tuple(info.shape)}",
                            param,
                        )
                    if got > self._dim_limits.get(want.name, self._index_limit):
                        raise self._param_error(self._dimension_message(param, axis, want, got), param)
                    bindings.setdefault(want.name, int(got))
                    bound_by.setdefault(want.name, (param.name, axis))
                elif want != got:
                    raise self._param_error(
                        f"{where(param)}: expected shape {_shape_text(want_shape)}{packed}, got "
                        f"{tuple(info.shape)} (dimension {axis} must be {want}, not {got})",
                        param,
                    )
            # flat offsets of dynamically shaped arrays are computed at the index width too
            if any(isinstance(s, N.Var) for s in param.shape) and _elements(info.shape) > self._index_limit:
                raise self._param_error(
                    self._index_message(param, f"has {_elements(info.shape)} elements (shape {tuple(info.shape)})"),
                    param,
                )
            if info.negated:
                if param.name in self._written:
                    raise self._param_error(
                        f"{where(param)}: the tensor has its negative bit set (a lazily negated view) and "
                        f"the kernel writes it; pass tensor.resolve_neg() and use that result",
                        param,
                    )
                info.array = info.array.resolve_neg()  # a negated copy: the kernel only reads it
            if param.name in self._written and not _writeable(info.array):
                raise self._param_error(
                    f"{where(param)}: the kernel writes this argument, but the array is read-only; pass a "
                    f"writable copy (e.g. numpy.array(a)) or allocate it with out_idx",
                    param,
                )
            if not info.contiguous:
                raise self._param_error(
                    f"{where(param)}: expected a C-contiguous (row-major, dense) array, got strides "
                    f"{info.strides} for shape {tuple(info.shape)}; pass tensor.contiguous() (torch) "
                    f"or numpy.ascontiguousarray(a) (numpy/cupy)",
                    param,
                )
            infos.append((param_index, info))
        if self._written_inputs and len(inputs) > 1:
            self._check_aliasing([info.array for _, info in infos])
        scalars = self.ir.scalar_names
        for var in self.ir.dyn_vars:
            if var.name not in bindings and var.name not in scalars:
                users = [
                    p.name for p in self.outputs if any(isinstance(s, N.Var) and s.name == var.name for s in p.shape)
                ]
                what = f"output {users[0]!r}" if users else "the kernel"
                raise TileRuntimeError(
                    f"{self._who()}: dynamic dimension {var.name} of {what} is not the size of any "
                    f"input dimension, so it cannot be bound"
                )
        return infos, bindings

    def _index_message(self, param: N.Buffer, what: str) -> str:
        bits = self.backend.capabilities.index_bits
        return (
            f"{self._where(param)}: {what}, more than backend {self.backend.name!r} can index (its "
            f"kernels use {bits}-bit signed indices, at most {self._index_limit} per dimension, and per "
            f"array when its shape is dynamic); "
            f"split the work into smaller calls or use a backend with 64-bit indexing"
        )

    def _dimension_message(self, param: N.Buffer, axis: int, var: N.Var, got: int) -> str:
        if got > self._index_limit:
            return self._index_message(param, f"dimension {axis} ({var.name}) is {got}")
        limit = self._dim_limits[var.name]
        return (
            f"{self._where(param)}: dimension {axis} ({var.name}) is {got}, more than its declared "
            f"dtype {var.dtype} can hold (at most {limit}); declare it "
            f'T.dynamic({var.name!r}, "int64") or split the work into smaller calls'
        )

    def _where(self, param: N.Buffer) -> str:
        return f"{self._who()}, argument {param.name!r}"

    def _param_error(self, message: str, param: N.Buffer) -> TileRuntimeError:
        """A TileRuntimeError that also shows where the parameter is declared (when known)."""
        span = param.span if param.span.line > 0 else None
        return TileRuntimeError(message, span, self.ir.source)

    def _output_shape(self, param: N.Buffer, bindings: Dict[str, int]) -> Tuple[int, ...]:
        return tuple(bindings[s.name] if isinstance(s, N.Var) else int(s) for s in param.shape)
