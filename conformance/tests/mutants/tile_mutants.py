"""Throwaway backend plugins with one planted bug each (the suite's mutation check).

Each mutant is the cpu backend (or "reference" where tile-cpu is not
installed, or $TILE_MUTANTS_WRAP) under the name `cpu-bug-<bug>`, with one
bug a real backend could have: the catalog is tile_mutant_bugs.py (IR bugs
rewrite the Tile IR the wrapped backend compiles, launch bugs change what the
kernel wrote, numeric bugs change the interpreter's number handling and exist
only when wrapping reference), plus

  cpu-bug-axis       reductions run along the other axis
  cpu-bug-transpose  T.gemm ignores transpose_A / transpose_B
  cpu-bug-edge       the last row/column of a partial edge tile is never written
  cpu-bug-bf16       bfloat16 results are truncated instead of rounded
  cpu-bug-exit / -segv / -sysexit / -hang
                     on a program with a reduction: os._exit(3), SIGSEGV,
                     raise SystemExit(0), or loop forever (isolation tests;
                     not part of the mutation score)

Registered through the entry-point group "tilecore" (tests write a dist-info
for it) or with tilecore.plugin.manager.register_plugin.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tile_mutant_bugs as bugs

from tilecore.ir import nodes as N
from tilecore.ir.visitor import Transformer, walk
from tilecore.plugin import hookimpl
from tilecore.plugin.backend import Artifact
from tilecore.runtime.kernel import written_buffer_names

# backends that end the process, raise SystemExit or hang on every program with a reduction
CRASHES = ("exit", "segv", "sysexit", "hang")
PREFIX = "cpu-bug-"


def planted_bugs(wrapped: str = "") -> tuple:
    """The bugs of the mutation score for a wrapped backend (numeric ones need the interpreter)."""
    wrapped = wrapped or wrapped_name()
    return tuple(bugs.IR_BUGS) + tuple(bugs.LAUNCH_BUGS) + (tuple(bugs.NUMERIC_BUGS) if wrapped == "reference" else ())


def mutants() -> tuple:
    return planted_bugs() + CRASHES


def wrapped_name() -> str:
    env = os.environ.get("TILE_MUTANTS_WRAP")
    if env:
        return env
    try:
        import tile_cpu.plugin  # noqa: F401

        return "cpu"
    except ImportError:
        return "reference"


def _wrapped_backend():
    if wrapped_name() == "cpu":
        from tile_cpu.plugin import make_backend
    else:
        from tilecore.interp.plugin import make_backend
    return make_backend()


def _mutant(backend):
    name = getattr(backend, "name", "")
    return name[len(PREFIX) :] if name.startswith(PREFIX) and name[len(PREFIX) :] in mutants() else None


def _pm():
    from tilecore.plugin.manager import get_plugin_manager

    return get_plugin_manager()


@hookimpl
def tilecore_register_backends(register):
    """One backend per planted bug, declaring exactly what the wrapped backend declares."""
    base = _wrapped_backend()
    for m in mutants():
        # the version names the wrapped backend so compile caches never mix the two
        register(
            dataclasses.replace(
                base,
                name=PREFIX + m,
                targets=(PREFIX + m,),
                distribution="tile-mutants",
                version=f"0.0.0+{base.name}",
                priority=-100,
                description=f"{base.name} with a planted bug: {m}",
            )
        )


@hookimpl
def tilecore_passes(backend, pipeline):
    if _mutant(backend):
        _pm().hook.tilecore_passes(backend=_wrapped_backend(), pipeline=pipeline)


@hookimpl
def tilecore_layout_rules(backend, rules):
    if _mutant(backend):
        _pm().hook.tilecore_layout_rules(backend=_wrapped_backend(), rules=rules)


# ----------------------------------------------------------------------------- IR bugs


class _WrongAxis(Transformer):
    """Reductions run along the next axis of src instead of `dim`.

    The planted program stays well formed (a native backend must never see
    inconsistent shapes: that is undefined behaviour, not a wrong answer):
    when the other axis gives dst's shape the dim is simply swapped; otherwise
    the wrong-axis result goes into a temporary of its own shape, allocated at
    the top of the kernel, and dst is filled from it (flat index modulo its size).
    """

    _COMBINE = {"sum": "+", "abssum": "+", "max": "max", "absmax": "max", "min": "min"}

    def __init__(self):
        self.allocs = []

    def visit_Kernel(self, k):
        allocs, self.allocs = tuple(self.allocs), []
        return dataclasses.replace(k, body=allocs + k.body) if allocs else k

    def visit_Reduce(self, s):
        src, dst = s.src, s.dst
        if src.ndim < 2:
            return s
        other = (s.dim + 1) % src.ndim
        wrong_shape = tuple(n for i, n in enumerate(src.shape) if i != other)
        kept = tuple(src.shape[:other]) + (1,) + tuple(src.shape[other + 1 :])
        if tuple(dst.shape) in (wrong_shape, kept):
            return dataclasses.replace(s, dim=other)
        n = len(self.allocs)
        tmp = N.Buffer(f"_mutant_axis_{n}", wrong_shape, dst.dtype, dst.scope)
        self.allocs.append(N.Alloc(tmp))
        idx = tuple(N.Var(f"_mutant_i{n}_{d}", "int32") for d in range(dst.ndim))
        flat = N.Const(0, "int32")
        for v, extent in zip(idx, dst.shape):
            flat = N.BinOp("+", N.BinOp("*", flat, N.Const(int(extent), "int32"), "int32"), v, "int32")
        size = 1
        for extent in wrong_shape:
            size *= int(extent)
        flat = N.BinOp("%", flat, N.Const(size, "int32"), "int32")
        tmp_idx, rest = [], flat
        for d in reversed(range(len(wrong_shape))):
            extent = N.Const(int(wrong_shape[d]), "int32")
            tmp_idx.insert(0, N.BinOp("%", rest, extent, "int32"))
            rest = N.BinOp("//", rest, extent, "int32")
        value = N.Load(tmp, tuple(tmp_idx), tmp.dtype)
        if not s.clear:
            value = N.BinOp(self._COMBINE[s.kind], N.Load(dst, idx, dst.dtype), value, dst.dtype)
        fill = N.Parallel(idx, tuple(int(e) for e in dst.shape), (N.Store(dst, idx, value),))
        return (dataclasses.replace(s, dst=tmp, dim=other, clear=True), fill)


class _DropTranspose(Transformer):
    """T.gemm ignores transpose_A / transpose_B, as a backend that reads the
    operand's memory with the untransposed shape would.

    Square operands simply lose the flag. A non-square one is copied into a
    temporary that reinterprets its row-major memory with the swapped shape
    (what the buggy backend would read), so the planted program stays well
    formed: inconsistent shapes would make a native backend run undefined code.
    """

    def __init__(self):
        self.allocs = []

    def visit_Kernel(self, k):
        allocs, self.allocs = tuple(self.allocs), []
        return dataclasses.replace(k, body=allocs + k.body) if allocs else k

    def _reinterpret(self, region: N.Region):
        """(region of a temporary holding `region`'s memory read with swapped extents, fill stmts)."""
        e0, e1 = region.extents
        n = len(self.allocs)
        tmp = N.Buffer(f"_mutant_t{n}", (e1, e0), region.buffer.dtype, region.buffer.scope)
        self.allocs.append(N.Alloc(tmp))
        i, j = N.Var(f"_mutant_t{n}_i", "int32"), N.Var(f"_mutant_t{n}_j", "int32")
        flat = N.BinOp("+", N.BinOp("*", i, N.Const(e0, "int32"), "int32"), j, "int32")
        row = N.BinOp("+", region.starts[0], N.BinOp("//", flat, N.Const(e1, "int32"), "int32"), "int32")
        col = N.BinOp("+", region.starts[1], N.BinOp("%", flat, N.Const(e1, "int32"), "int32"), "int32")
        value = N.Load(region.buffer, (row, col), region.buffer.dtype)
        fill = N.Parallel((i, j), (e1, e0), (N.Store(tmp, (i, j), value),))
        whole = N.Region(tmp, (N.Const(0, "int32"), N.Const(0, "int32")), (e1, e0))
        return whole, (fill,)

    def visit_Gemm(self, s):
        changes, fills = {"transpose_a": False, "transpose_b": False}, ()
        for flag, field in (("transpose_a", "a"), ("transpose_b", "b")):
            region = getattr(s, field)
            if not getattr(s, flag) or len(region.extents) != 2 or region.extents[0] == region.extents[1]:
                continue
            if region.buffer.scope == "global":  # the checker refuses global gemm operands anyway
                return s
            changes[field], fill = self._reinterpret(region)
            fills += fill
        return fills + (dataclasses.replace(s, **changes),)


def _plant(mutant: str, func: N.PrimFunc) -> N.PrimFunc:
    if mutant == "axis":
        return _WrongAxis().visit(func)
    if mutant == "transpose":
        return _DropTranspose().visit(func)
    if mutant in bugs.IR_BUGS:
        return bugs.plant_ir(mutant, func)
    return func


def _edge_writes(func: N.PrimFunc):
    """[(param index, tile extents)] of predicated tile copies into global tensors."""
    index = {p.name: i for i, p in enumerate(func.params)}
    out = []
    for node in walk(func):
        if isinstance(node, N.Copy) and node.predicated and node.dst.buffer.scope == "global":
            out.append((index[node.dst.buffer.name], list(node.dst.extents)))
    return out


@hookimpl
def tilecore_codegen(backend, module, options):
    mutant = _mutant(backend)
    if not mutant:
        return None
    base = _wrapped_backend()
    func = _plant(mutant, module.func)
    # the wrapped backend compiles for its own target (tile-cpu refuses a target it cannot parse)
    wrapped_module = dataclasses.replace(module, func=func, target=base.targets[0])
    inner = _pm().hook.tilecore_codegen(backend=base, module=wrapped_module, options=options)
    meta = dict(inner.meta)
    meta["mutant"] = {
        "bug": mutant,
        "wraps": inner.backend,
        "edge_writes": _edge_writes(module.func) if mutant == "edge" else [],
        "has_reduce": any(isinstance(n, N.Reduce) for n in walk(module.func)),
        "bf16_params": [i for i, p in enumerate(module.func.params) if p.dtype == "bfloat16"],
        "written": [i for i, p in enumerate(module.func.params) if p.name in written_buffer_names(module.func)],
    }
    return Artifact(
        backend=backend.name,
        target=backend.name,
        entry=inner.entry,
        source=inner.source,
        blobs=dict(inner.blobs),
        meta=meta,
    )


def _truncate_bf16(a: np.ndarray) -> None:
    bits = a.view(np.uint16)
    bits &= np.uint16(0xFFFE)


def _run_numeric(mutant: str, artifact, args, bindings) -> None:
    """Interpret the artifact's IR with the interpreter's numbers patched (compiled under the patch too)."""
    from tilecore.interp import executor
    from tilecore.ir import serialize

    func = serialize.loads(artifact.meta["ir"])
    with bugs.numeric_patches(mutant):
        executor.Program(func).run(list(args), bindings)


def _crash(how: str) -> None:
    import signal
    import time

    if how == "exit":
        os._exit(3)
    if how == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if how == "sysexit":
        raise SystemExit(0)
    while True:  # hang
        time.sleep(0.05)


@hookimpl
def tilecore_launcher(backend, artifact):
    mutant = _mutant(backend)
    if not mutant:
        return None
    info = artifact.meta["mutant"]
    base = _wrapped_backend()
    meta = {k: v for k, v in artifact.meta.items() if k != "mutant"}
    inner_artifact = Artifact(
        backend=info["wraps"],
        target=base.targets[0],
        entry=artifact.entry,
        source=artifact.source,
        blobs=dict(artifact.blobs),
        meta=meta,
    )
    inner = _pm().hook.tilecore_launcher(backend=base, artifact=inner_artifact)

    def launch(args, bindings=None):
        if mutant in CRASHES and info["has_reduce"]:
            _crash(mutant)
        before = {}
        if mutant == "edge":
            before = {i: np.array(args[i], copy=True) for i, _ in info["edge_writes"]}
        # launch bugs change what the kernel wrote: copies of the written arguments only (a read-only
        # input past 2^31 bytes keeps its untouched pages unallocated)
        written = set(info["written"])
        state = [np.array(a, copy=True) if i in written else None for i, a in enumerate(args)]
        state = state if mutant in bugs.LAUNCH_BUGS else None
        if mutant in bugs.NUMERIC_BUGS:
            _run_numeric(mutant, artifact, args, bindings)
        else:
            inner(args, bindings)
        if state is not None:
            bugs.launch_after(mutant, args, state)
        if mutant == "edge":
            for i, extents in info["edge_writes"]:
                arr = args[i]
                ext = extents[-arr.ndim :] if len(extents) >= arr.ndim else extents
                for d in range(arr.ndim):
                    if d < len(ext) and ext[d] > 1 and arr.shape[d] % ext[d] != 0:
                        sl = [slice(None)] * arr.ndim
                        sl[d] = arr.shape[d] - 1
                        arr[tuple(sl)] = before[i][tuple(sl)]
        if mutant == "bf16":
            for i in info["bf16_params"]:
                _truncate_bf16(args[i])

    return launch
