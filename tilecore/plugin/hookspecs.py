"""The plugin contract: every hook a backend plugin may implement.

Plugins are pluggy plugins of the project "tilecore", found through the
entry-point group "tilecore". A plugin module (or object) implements hooks with
`@tilecore.plugin.hookimpl`. Contract version: PLUGIN_API_VERSION; it changes
only with a new major Tile IR version or a documented deprecation.

Order of calls when a kernel is compiled for backend B:
  1. tilecore_register_backends      (once, at discovery)
  2. tilecore_passes(B, pipeline)    backend passes joined to the core pipeline
  3. tilecore_layout_rules(B, rules) per-op rules for the layout fixpoint engine
  4. tilecore_lowering_rules(B, rules), tilecore_intrinsics(B, table)
  5. tilecore_codegen(B, module, options)   -> Artifact (firstresult)
  6. tilecore_launcher(B, artifact)         -> callable (firstresult)
Steps 2-5 run for each compile that misses the compile cache (a cache hit goes
straight to step 6), so hooks must not rely on being called once: step 2 gets a
fresh pipeline and step 3 a fresh rule table every time, and step 4 is called
by the backend's own codegen when it builds its tables. Step 6 runs on the
kernel's first call, once per process and artifact.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

import pluggy

if TYPE_CHECKING:  # documentation types only: importing them must stay cheap
    from ..passes.layout_inference import Rule as LayoutRuleFn
    from ..passes.pipeline import Pipeline
    from ..profiler.timer import Timer
    from .backend import Artifact, Backend, TileModule
    from .rules import RuleTable

PROJECT = "tilecore"
PLUGIN_API_VERSION = "1"

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def tilecore_register_backends(register: Callable[[Backend], None]) -> None:
    """Declare backends.

    Call `register(backend)` once per `tilecore.plugin.Backend` this plugin
    provides. Must be cheap and must not import heavy toolchains (TVM, CUDA):
    it runs whenever `tile backends` runs or a target is resolved, and when a
    TileLang name is looked up. Return value is ignored.

    Besides its capabilities, a Backend declares the TileLang spellings its
    hardware owns in `Backend.tilelang` (`tilecore.plugin.TileLangNames`): device
    names for `target=`, `pass_configs` switches and `T.<name>` primitives. The
    core names none of them; `tilecore.compat.tilelang` and `tilecore.language`
    read them from the registry of installed backends. A malformed declaration
    is a registration error shown by `tile backends`.
    """


@hookspec
def tilecore_passes(backend: Backend, pipeline: Pipeline) -> None:
    """Add backend passes to the core pass pipeline.

    `backend` is the Backend being compiled for (check `backend.name` and
    return early for others). Use `pipeline.insert(point, pass_)` with a point
    from `tilecore.passes.pipeline.POINTS`; a pass is a callable
    `(func, ctx) -> func` with a `name` attribute. Return value is ignored.
    """


@hookspec
def tilecore_layout_rules(backend: Backend, rules: Dict[str, LayoutRuleFn]) -> None:
    """Contribute per-op rules to the layout inference fixpoint engine.

    `rules` maps a Tile IR statement class name ("Gemm", "Copy", "Reduce",
    "Parallel", ...) to a rule `(stmt, layouts, ctx) -> {buffer_name: layout}`:
    given the layouts known so far, return the layouts this op implies. The
    engine iterates until nothing changes and reports a conflict at the op's
    line. Assign `rules[name] = rule`; a later plugin may override. Return value
    is ignored.
    """


@hookspec
def tilecore_lowering_rules(backend: Backend, rules: RuleTable) -> None:
    """Contribute lowering rules per tile op for `backend`.

    Called by the backend's codegen for every compile that misses the cache, once
    per plugin (all results; the return value is ignored). Several plugins may
    contribute, so a third party can add a rule for an op of an existing backend,
    or put its own rule in front of the vendor's, without editing either.

    For backends built on the SIMT toolkit (`tilecore.lowering.simt`: cuda, rocm,
    metal, and third-party GPUs) `rules` is a `tilecore.plugin.rules.RuleTable`:
    an ordered list of rules per op, tried in order before the toolkit's portable
    lowering. Ops: "Gemm", "Copy", "Fill", "Reduce", "Cumsum", "Atomic", "Print",
    "Pipelined" (a `T.Pipelined` loop) and "Kernel" (the grid / thread binding).
    `rules.add(op, rule, priority=0)` appends (higher priorities are tried first:
    vendors use 0, overrides more); `rules[op] = rule` replaces the op's rules.

    A rule is called as ``rule(lowering, stmt)``:

    * `lowering` is the `tilecore.lowering.simt.SimtLowering` of this kernel; its
      `target` is the `tilecore.lowering.target.TargetDescription` the backend built
      (name, arch, warp size, shared memory, vector limits, and plugin-private
      `properties`), its `plan` the `tilecore.lowering.simt_plan.KernelPlan`
      (storage and layout of every buffer, and what rules claimed).
    * It emits TIR with TVM's IR builder and returns None, or returns
      `NotImplemented` to decline this instance (a shape it cannot take, a target
      without the instruction); the next rule is tried. It must decline before
      emitting anything.
    * A rule derived from `tilecore.plugin.rules.LoweringRule` also takes part in
      planning: `accumulator_layout(gemm, warps, prefer_rows, existing, target)`
      chooses a gemm accumulator's register layout, `plan(ctx)` claims instances
      and adjusts the layouts of the buffers it lowers before code is emitted.
    * A schedule that overlaps an asynchronous op with other work lowers the op
      through ``rule.issue(lowering, stmt, in_flight)`` (start it, leave up to
      `in_flight` groups running; `NotImplemented` declines) and later
      ``rule.retire(lowering, stmt)``, trying the rules in the same order. The
      `LoweringRule` defaults complete the op in `issue` and retire nothing; a plain
      callable rule is called as usual.

    The cpu and npu backends pass a plain dict (one callable per op, signature
    defined by their codegen; see their READMEs); `rules[op] = rule` works on both.

    :param backend: the Backend being compiled for; return at once when
        `backend.name` is not yours (all plugins share one plugin manager).
    :param rules: the table to fill.
    :returns: None.
    """


@hookspec
def tilecore_intrinsics(backend: Backend, table: Dict[Tuple[str, Any], Any]) -> None:
    """Contribute entries of the intrinsic table for `backend`.

    Called next to `tilecore_lowering_rules` (all results; the return value is
    ignored). The codegen starts from the toolkit's portable table and applies
    what the plugins left in `table`; use `table.setdefault(key, impl)` for your
    own backend's entries so that a third party's entry (assigned with `=`) wins
    whichever plugin runs first.

    Keys are (name, dtype):

    * math functions of `tilecore.ir.MATH_FUNCS` and "pow" per dtype: an
      implementation `impl(args) -> PrimExpr`, or a string (a `tvm.tirx` op name,
      "llvm.<intrinsic>", "extern:<symbol>"); see `tilecore.lowering.intrinsics`.
      Wrapped in `tilecore.lowering.intrinsics.contextual` it is called
      `impl(lowering, args)` and may read the target description.
    * device instructions of the SIMT toolkit (dtype None where it has none):
      "shuffle_xor", "barrier", "vector_copy", "async_copy", "async_commit",
      "async_wait", "atomic_add" / "atomic_max" / "atomic_min"; called
      `impl(lowering, args)` with the arguments listed in
      `tilecore.lowering.simt_intrinsics`. A plugin may add instructions of its
      own for its rules (tile-cuda's "async_proxy_fence").

    :param backend: the Backend being compiled for (return at once for others).
    :param table: the dict to fill.
    :returns: None.
    """


@hookspec(firstresult=True)
def tilecore_codegen(backend: Backend, module: TileModule, options: Dict[str, Any]) -> Optional[Artifact]:
    """Generate code for `module` (a TileModule) on `backend`.

    `options` is a dict of compile options (target, out_idx, user flags). Return
    an `Artifact`, or None when this plugin does not handle `backend` (the
    next plugin is asked). Raise `tilecore.diagnostics.TileCompileError` (or
    UnsupportedFeatureError) with the offending node's span for problems in the
    user's kernel; never let a toolchain traceback escape.
    """


@hookspec(firstresult=True)
def tilecore_launcher(backend: Backend, artifact: Artifact) -> Optional[Callable[..., None]]:
    """Return a callable that runs `artifact`, or None if not handled here.

    The callable is invoked as `launch(args, bindings)`: `args` are the
    already-validated arrays for every PrimFunc parameter in order (inputs and
    freshly allocated outputs, in the caller's array library, on
    `capabilities.memory_space`), `bindings` maps dynamic dimension names to
    ints. It must launch on the caller's current stream and return None.
    Host-memory objects that only speak DLPack arrive as numpy views;
    `tilecore.runtime.arrays.as_numpy(arg)` gives a zero-copy numpy view of
    any host-memory argument (torch CPU tensors included, bfloat16 too).
    Called once per compiled artifact and process (on the Kernel's first
    call), so loading a shared library or module belongs here, not in launch.
    """


@hookspec
def tilecore_cli_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add subcommands to the `tile` command.

    `subparsers` is an argparse subparsers object; add a parser and set its
    default `func` to a callable `(args) -> int` (the exit code). Raise
    `tilecore.diagnostics.TileError` for user errors: `tile` prints them
    without a traceback and exits with status 1. A plugin whose hook raises
    loses its subcommands (with a warning), never the whole command.
    """


@hookspec(firstresult=True)
def tilecore_timer(backend: Backend) -> Optional[Timer]:
    """Return a `tilecore.profiler.Timer` that measures kernels of `backend`, or None.

    The profiler (`kernel.get_profiler()`, `tilecore.bench`, `tilecore.autotune`)
    asks this hook how to time a run: with device events and a cache flush on a
    GPU, in simulated cycles on a simulator. Without an answer it uses the host
    wall clock (`tilecore.profiler.Timer`). The Timer may also state the device's
    peak rates (`Timer.peak`), so the profiler can report a roofline fraction.

    :param backend: the Backend whose kernels are timed (return None for others).
    :returns: a `tilecore.profiler.Timer`, or None.
    """
