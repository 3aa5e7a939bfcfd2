"""Run TileLang's example kernels on tilecore with only their imports changed.

    python benchmarks/tilelang_examples.py PATH/TO/tilelang [--target reference] [--only gemm]

PATH is a checkout of https://github.com/tile-ai/tilelang that you provide (nothing of
it is part of this repository). Each example file with a `main()` runs in its own
process, where `import tilelang...` resolves to `tilecore.compat.tilelang...` (what
changing the imports by hand does) and torch's CUDA device is mapped to the CPU (the
examples build their inputs and torch reference results with `device="cuda"`). The
example's own check decides pass or fail. Files are classified before running:

* hopper: uses Hopper/Blackwell-only primitives (barriers, TMA, tcgen05, wgmma, block-scaled
  MMA, ...);
* tvm-fork: imports TileLang's private TVM fork or its CUDA intrinsics directly;
* missing:NAME: it imports a package this Python does not have (triton, flash-attn,
  einops, ...; the CUDA-only ones cannot run here at all);

Examples that read the CUDA device's properties to pick their configuration, or refuse
to start without CUDA, run too: the harness reports an emulated A100 (sm_80, 108 SMs),
so they take their Ampere paths; the kernels run on tilecore's target. CUDA streams and
events become host no-ops (work is synchronous; events read the wall clock).

Reference checks written with Triton (kda/*, cast) or flash-linear-attention (gdn/*,
linear_attention) run with `--deps DIR`, a folder of those packages installed apart from
the project's environment (`pip install --target DIR ...`; the versions used are in the
results file and the JSON): their Triton kernels run in Triton's interpreter on the CPU
tensors (a host driver stands in for the GPU one; libdevice calls run as their
triton.language twins; bfloat16 arithmetic and casts round to nearest even, as on the GPU).
Reference checks that call flash_attn (CUDA-only; blocksparse_attention's
kvcache decoding, flash_attention's varlen files) run with benchmarks/tilelang_deps among
the DEPS folders: a plain-torch stand-in of the flash_attn functions they call, written from
flash_attn's documented semantics (not flash_attn itself; tests/test_tilelang_deps_flash_attn.py
checks it against a naive float64 formula).
Examples that only print their comparison (kda/*) pass when the worst printed relative error
is at most PRINTED_RELATIVE_TOLERANCE; the printed errors are reported with them. Examples
that catch their own check and print "... failed ✗" (gdn/*) fail on that line. Files in
ZEROED_EMPTY compare blocks that neither side writes: their torch.empty buffers start as zeros.

Two rates are printed: the bar's (passes among all files but those NOT_IN_BAR: hopper,
tvm-fork, not-an-example, no-tilelang-kernel; files that cannot be imported count as failures) and the rate among
the files that were run.

The rate reported is passes among the remaining files. Sizes: `main()` runs with the
arguments of SMALL below where the defaults are too large for the interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

HOPPER = re.compile(
    r"alloc_barrier|tma_copy|mbarrier|tcgen05|wgmma|warpgroup|T\.ws\(|"
    r"set_max_nreg|barrier_arrive|barrier_wait|alloc_tmem|sm100|fence_proxy|"
    r"create_tma|tma_load|tma_store|blockscaled"
)
TVM_FORK = re.compile(
    r"^\s*(import tvm|from tvm)|tilelang\.(cuda|rocm)\.intrinsics|T\.ptx_|"
    r"T\.call_extern|tilelang\.intrinsics|from tilelang\.(carver|tileop|engine|"
    r"transform|tools|contrib|cuda|intrinsics)|T\.call_intrin",
    re.M,
)
IMPORTS = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
# `sys.path.append(os.path.join(os.path.dirname(__file__), "../flash_attention"))`: a sibling
# folder the file imports local modules from
# what a file that has a TileLang kernel of its own (or in a local module it imports) contains
TILELANG_KERNEL = re.compile(r"T\.Kernel\(|prim_func|tilelang\.jit|@jit\b|\bT\.Parallel\(")
SYS_PATH_DIRS = re.compile(r"sys\.path\.(?:append|insert)\([^\n]*?dirname\(__file__\)\s*\)?\s*,\s*[\"']([^\"']+)[\"']")

# Smaller problems for examples whose defaults are too large to interpret: main() keyword
# arguments, "argv" for the command line of examples that parse one in main(), or
# "globals" for module-level sizes that main() reads.
_RUN_TEST_SMALL = {"calls": {"run_test": {"B": 1, "S": 128, "H": 1}}}
SMALL = {
    "dynamic_shape/example_dynamic.py": {"M": 256, "N": 256, "K": 256},
    "flash_attention/example_mha_bwd_bhsd.py": {"BATCH": 1, "H": 2, "N_CTX": 128, "D_HEAD": 64},
    "flash_attention/example_mha_bwd_bshd.py": {"BATCH": 1, "H": 2, "N_CTX": 128, "D_HEAD": 64},
    "flash_attention/example_gqa_bwd.py": {"BATCH": 1, "H": 4, "N_CTX": 128, "groups": 2},
    "flash_attention/example_gqa_fwd_bshd.py": {"batch": 1, "heads": 4, "seq_len": 256, "dim": 64, "groups": 2},
    "flash_attention/example_mha_fwd_bshd.py": {"batch": 1, "heads": 2, "seq_len": 256, "dim": 64},
    "flash_attention/example_mha_fwd_bhsd.py": {"batch": 1, "heads": 1, "seq_q": 128, "seq_kv": 128},
    "flash_decoding/example_mha_inference.py": {"H": 2, "Q_CTX": 128, "KV_CTX": 512, "D_HEAD": 64},
    "fusedmoe/example_fusedmoe_tilelang.py": {"d_hidden": 256, "d_expert": 128, "seq_len": 64},
    "cast/example_per_token_cast_to_fp8.py": {"M": 256, "N": 256},
    "linear_attention/example_linear_attn_fwd.py": {"S": 128, "H": 2, "D": 64},
    "linear_attention/example_linear_attn_bwd.py": {"S": 128, "H": 2, "D": 64},
    "cast/example_group_per_split_token_cast_to_fp8.py": {"M": 256, "N": 256, "batch_sizes": [64, 192]},
    "attention_sink/example_mha_sink_fwd_bhsd.py": {"seq_q": 128, "seq_kv": 128, "dim": 64},
    "attention_sink/example_mha_sink_bwd_bhsd.py": {"N_CTX": 128, "D_HEAD": 64},
    "attention_sink/example_gqa_sink_fwd_varlen.py": {
        "heads": 4,
        "groups": 2,
        "q_seqlen": 128,
        "k_seqlen": 128,
        "dim": 64,
    },
    "attention_sink/example_gqa_sink_bwd_varlen.py": {
        "heads": 4,
        "groups": 2,
        "q_seqlen": 128,
        "k_seqlen": 128,
        "dim": 64,
    },
    "linear_attention/example_retention_fwd.py": {"argv": ["--B", "1", "--S", "256", "--H", "2", "--D", "64"]},
    "topk/example_topk.py": {"argv": ["--M", "128"]},
    "deepseek_mhc/example_mhc_bwd.py": {"globals": {"seqlen": 64}},
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_paged.py": {
        "argv": [
            "--batch",
            "1",
            "--heads",
            "8",
            "--heads_kv",
            "2",
            "--max_cache_seqlen",
            "1024",
            "--dim",
            "64",
            "--dim_v",
            "64",
            "--num_pages",
            "16",
        ]
    },
    **{
        f"blocksparse_attention/example_{name}.py": {
            "batch": 2,
            "heads": 8,
            "heads_kv": 2,
            "max_cache_seqlen": 1024,
            "dim": 64,
            "dim_v": 64,
        }
        for name in (
            "tilelang_sparse_gqa_decode_varlen_indice",
            "tilelang_sparse_gqa_decode_varlen_mask",
            "triton_sparse_gqa_decode_varlen_indice",
        )
    },
    "flash_attention/example_gqa_fwd_varlen.py": {
        "batch": 2,
        "heads": 4,
        "groups": 2,
        "q_seqlen": 256,
        "k_seqlen": 256,
        "dim": 64,
    },
    "flash_attention/example_mha_fwd_varlen.py": {"batch": 2, "heads": 2, "seq_len": 256, "dim": 64},
    "blocksparse_gemm/example_blocksparse_gemm.py": {"argv": ["--m", "256", "--n", "256", "--k", "256"]},
    "convolution/example_convolution.py": {"argv": ["--n", "2", "--c", "32", "--h", "16", "--w", "16", "--f", "128"]},
    "convolution/example_convolution_autotune.py": {"n": 2, "c": 32, "h": 16, "w": 16, "f": 128},
    **{
        f"kda/{name}.py": _RUN_TEST_SMALL
        for name in (
            "chunk_bwd_dqkwg",
            "chunk_bwd_dv",
            "chunk_bwd_gla_dA",
            "chunk_bwd_intra",
            "chunk_delta_bwd",
            "chunk_delta_h_fwd",
            "chunk_inter_solve_fused",
            "chunk_intra_token_parallel",
            "chunk_o",
            "wy_fast",
            "wy_fast_bwd",
        )
    },
    **{
        f"gdn/example_{name}.py": _RUN_TEST_SMALL
        for name in (
            "chunk_delta_bwd",
            "chunk_delta_h",
            "chunk_o",
            "chunk_o_bwd",
            "chunk_scaled_dot_kkt",
            "cumsum",
            "wy_fast",
            "wy_fast_bwd_split",
        )
    },
}

# Examples whose check compares blocks of torch.empty buffers that neither the reference
# nor the kernel writes (uninitialized memory, NaN or anything on either device): those
# buffers start as zeros. kda/chunk_inter_solve_fused.py: its FLA reference writes Aqk's
# blocks below the diagonal only (the diagonal ones come from another kernel) into
# `torch.empty(...).clone()`, and Akk's on and below it.
ZEROED_EMPTY = ("kda/chunk_inter_solve_fused.py",)
for _rel in ZEROED_EMPTY:
    SMALL[_rel] = {**SMALL.get(_rel, {}), "empty_as_zeros": True}

# Examples that only print their comparison pass when the worst printed relative error is
# at most this (a few bfloat16 rounding steps).
PRINTED_RELATIVE_TOLERANCE = 2e-2

RUNNER = r'''
import importlib, importlib.abc, importlib.util, os, sys, runpy
sys.path.insert(0, os.path.dirname(@@FILE@@))

class Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import tilelang.x` -> `tilecore.compat.tilelang.x`: the harness's only change to the file."""
    def find_spec(self, name, path=None, target=None):
        if name == "tilelang" or name.startswith("tilelang."):
            return importlib.util.spec_from_loader(name, self)
        return None
    def create_module(self, spec):
        return importlib.import_module("tilecore.compat." + spec.name)
    def exec_module(self, module):
        pass
sys.meta_path.insert(0, Alias())

import torch
def _cpu(kwargs):
    d = kwargs.get("device")
    if d is not None and "cuda" in str(d):
        kwargs["device"] = "cpu"
    return kwargs
def _wrap(fn):
    def call(*a, **k):
        return fn(*a, **_cpu(k))
    return call
for _n in ("randn", "rand", "zeros", "ones", "empty", "full", "arange", "tensor", "randint",
           "zeros_like", "ones_like", "empty_like", "randn_like", "rand_like", "full_like",
           "randperm", "linspace", "eye", "as_tensor", "empty_strided", "normal"):
    if hasattr(torch, _n):
        setattr(torch, _n, _wrap(getattr(torch, _n)))
_to = torch.Tensor.to
def _to_cpu(self, *a, **k):
    a = tuple("cpu" if isinstance(x, (str, torch.device)) and "cuda" in str(x) else x for x in a)
    return _to(self, *a, **_cpu(k))
torch.Tensor.to = _to_cpu
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.synchronize = lambda *a, **k: None
torch.cuda.current_device = lambda: 0
# Examples that size their launch from the device, or refuse to start without one, see
# the device TileLang's `cuda` names on an A100 (sm_80): Ampere paths, no Hopper ones.
class _Props:
    name, major, minor = "NVIDIA A100-SXM4-80GB (emulated: the example runs on tilecore)", 8, 0
    multi_processor_count, total_memory, warp_size = 108, 80 << 30, 32
    max_shared_memory_per_block_optin, L2_cache_size = 166912, 40 << 20
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.set_device = lambda *a, **k: None
torch.cuda.get_device_capability = lambda *a, **k: (_Props.major, _Props.minor)
torch.cuda.get_device_properties = lambda *a, **k: _Props()
torch.cuda.get_device_name = lambda *a, **k: _Props.name
torch.cuda.manual_seed = torch.cuda.manual_seed_all = lambda seed: None  # torch.manual_seed seeds the CPU
torch.cuda.empty_cache = lambda: None
torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()  # the device generator is the CPU one
torch.cuda.set_rng_state = lambda *a, **k: None
# CUDA streams and events on the host: work is synchronous, events read the wall clock.
import contextlib, time as _time
class _Stream:
    def __init__(self, *a, **k): pass
    def synchronize(self): pass
    def wait_stream(self, other): pass
    def wait_event(self, event): pass
    def record_event(self, event=None): return event or _Event()
class _Event:
    def __init__(self, *a, **k): self.t = None
    def record(self, stream=None): self.t = _time.perf_counter()
    def synchronize(self): pass
    def wait(self, stream=None): pass
    def elapsed_time(self, end): return (end.t - self.t) * 1e3
torch.cuda.Stream, torch.cuda.Event = _Stream, _Event
torch.cuda.default_stream = torch.cuda.current_stream = lambda *a, **k: _Stream()
torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
torch.cuda.profiler.start = torch.cuda.profiler.stop = lambda: None  # profiler ranges: nothing to record
torch.cuda.device = lambda *a, **k: contextlib.nullcontext()  # `with torch.cuda.device(i):` selects the one device
_TorchGenerator = torch.Generator
class _Generator(_TorchGenerator):
    """torch.Generator(device="cuda") -> a CPU generator."""
    def __new__(cls, device="cpu"):
        return _TorchGenerator.__new__(cls, device="cpu" if "cuda" in str(device) else device)
    def __init__(self, device="cpu"):
        pass
torch.Generator = _Generator
torch.set_default_device = lambda *a, **k: None
# Triton kernels in the examples' own reference checks (and in fla's) run in Triton's
# interpreter (TRITON_INTERPRET=1, numpy on CPU tensors). Its GPU drivers would look for
# libcuda, so a host driver stands in: the emulated A100 as target, the CPU as torch
# device. Its autotuner benchmarker runs nothing and reports equal times, so the first
# config is taken: timings of interpreted kernels say nothing about GPU configs.
if os.environ.get("TRITON_INTERPRET") == "1" and importlib.util.find_spec("triton"):
    from triton.runtime.driver import driver as _triton_driver
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    class _HostDriver(DriverBase):
        @classmethod
        def is_active(cls): return True
        def map_python_to_cpp_type(self, ty): return ty
        def get_current_target(self): return GPUTarget("cuda", 80, 32)
        def get_active_torch_device(self): return torch.device("cpu")
        def get_current_device(self): return 0
        def get_current_stream(self, device=None): return 0
        def get_device_interface(self): return torch.cuda
        def get_benchmarker(self):
            return lambda kernel_call, quantiles=None, **k: [0.0] * len(quantiles or (0,))
    _triton_driver.set_active(_HostDriver())
    # Triton's interpreter keeps bfloat16 as uint16 bit patterns but has no builder for a
    # nonzero bfloat16 constant; this one rounds through ml_dtypes.
    import ml_dtypes, numpy as _np
    from triton.runtime import interpreter as _triton_interp
    import triton.language as _tl
    # Nor does it run libdevice calls (external CUDA functions): those with a triton.language
    # counterpart run as that one.
    import triton.language.extra.libdevice as _libdevice
    _same = {"fast_expf": "exp", "fast_logf": "log", "fast_log2f": "log2", "fast_dividef": "div_rn"}
    for _name in dir(_libdevice):
        _twin = _same.get(_name, _name)
        if not _name.startswith("_") and callable(getattr(_tl.math, _twin, None)):
            # looked up at call time: the interpreter patches triton.language.math when it runs
            setattr(_libdevice, _name, lambda *a, _twin=_twin: getattr(_tl.math, _twin)(*a))
    _libdevice.tanh = _libdevice.fast_tanhf = lambda x: 2 * _tl.sigmoid(2 * x) - 1
    _libdevice.log1p = lambda x: _tl.log(1 + x)
    # It also applies numpy to those bit patterns (bf16 + bf16 adds the uint16 codes): bf16
    # operands are widened to float32 for the operation and a bf16 result rounded back, as
    # a GPU's bf16 arithmetic does.
    _IB, _bf16 = _triton_interp.InterpreterBuilder, _tl.bfloat16
    def _wide(h):
        return h.data.view(ml_dtypes.bfloat16).astype(_np.float32) if h.dtype.scalar == _bf16 else h.data
    def _narrow(data, dtype):
        if dtype == _bf16 and data.dtype.kind == "f":
            return data.astype(ml_dtypes.bfloat16).view(_np.uint16)
        return data
    def _bf16_aware(name, result_arg):
        original = getattr(_IB, name)
        def op(self, *handles_and_op):
            handles = [h for h in handles_and_op if isinstance(h, _triton_interp.TensorHandle)]
            if not any(h.dtype.scalar == _bf16 for h in handles):
                return original(self, *handles_and_op)
            wide = [
                _triton_interp.TensorHandle(_wide(h), _tl.float32) if isinstance(h, _triton_interp.TensorHandle) else h
                for h in handles_and_op
            ]
            out = original(self, *wide)
            dtype = handles[result_arg].dtype.scalar
            return _triton_interp.TensorHandle(_narrow(out.data, dtype), dtype)
        setattr(_IB, name, op)
    _RESULT_OPERAND = {"binary_op": 0, "unary_op": 0, "ternary_op": -1, "create_fma": -1, "create_dot": 2}
    for _name, _result in _RESULT_OPERAND.items():
        _bf16_aware(_name, _result)
    # Its casts to bfloat16 cut the float32 bits (round toward zero) and other casts from or
    # to bfloat16 apply numpy to the codes; a GPU rounds to nearest even (`.to()` defaults to
    # "rtne"), as ml_dtypes does.
    _cast = _IB.cast_impl
    def _bf16_cast(self, src, dst_type):
        if _bf16 not in (src.dtype.scalar, dst_type.scalar):
            return _cast(self, src, dst_type)
        data = src.data.view(ml_dtypes.bfloat16) if src.dtype.scalar == _bf16 else src.data
        if dst_type.scalar == _bf16:
            return _triton_interp.TensorHandle(data.astype(ml_dtypes.bfloat16).view(_np.uint16), _bf16)
        return _triton_interp.TensorHandle(data.astype(_triton_interp._get_np_dtype(dst_type)), dst_type.scalar)
    _IB.cast_impl = _bf16_cast
    _fp_to_fp = _IB.create_fp_to_fp
    def _bf16_fp_to_fp(self, src, dst_type, rounding_mode):
        rtne = rounding_mode == _triton_interp._ir.ROUNDING_MODE.RTNE
        if dst_type.scalar == _bf16 and src.dtype.scalar.primitive_bitwidth > 16 and rtne:
            return _bf16_cast(self, src, dst_type)
        return _fp_to_fp(self, src, dst_type, rounding_mode)
    _IB.create_fp_to_fp = _bf16_fp_to_fp
    # A scalar is a one-element array in the interpreter; `range(n)` of a scalar computed in
    # the kernel asks `int()` of it, which numpy 2.4 refuses for arrays of one dimension
    # (triton issue 9171, fixed upstream by taking the element: the same here).
    _patch_tensor = _triton_interp._patch_lang_tensor
    def _patch_tensor_index(tensor):
        _patch_tensor(tensor)
        tensor.__index__ = lambda self: int(self.handle.data.item())
    _triton_interp._patch_lang_tensor = _patch_tensor_index
    # A compiled kernel's `for i in range(n)` (or tl.range) has an int32 tensor as its index
    # (`i.to(tl.int64)` works); the interpreter gives a Python int. Its source rewrite makes
    # assigned values tensors; `i = i` first in such a loop's body does that for the index.
    # tl.static_range indices stay Python ints (constexpr, as compiled).
    import ast as _ast
    def _tensor_index_loop(self, node):
        self.generic_visit(node)
        it = node.iter
        name = it.func.id if isinstance(it, _ast.Call) and isinstance(it.func, _ast.Name) else None
        name = it.func.attr if isinstance(it, _ast.Call) and isinstance(it.func, _ast.Attribute) else name
        if name == "range" and isinstance(node.target, _ast.Name):
            index = node.target.id
            same = _ast.Assign(targets=[_ast.Name(index, _ast.Store())], value=_ast.Name(index, _ast.Load()))
            node.body.insert(0, self.visit_Assign(same))
        return node
    _triton_interp.ASTTransformer.visit_For = _tensor_index_loop
    if not hasattr(_triton_interp.InterpreterBuilder, "get_bf16"):
        _triton_interp.InterpreterBuilder.get_bf16 = lambda self, value: _triton_interp.TensorHandle(
            _np.array([value], dtype=ml_dtypes.bfloat16).view(_np.uint16), _tl.bfloat16)
kwargs = dict(@@KWARGS@@)
sys.argv = [@@FILE@@] + kwargs.pop("argv", [])
calls = kwargs.pop("calls", {})
module_sizes = kwargs.pop("globals", {})
if kwargs.pop("empty_as_zeros", False):
    # the example compares blocks that neither its reference nor its kernel writes, in
    # torch.empty buffers: they start as zeros here, so that they agree (see ZEROED_EMPTY)
    _empty = torch.empty
    torch.empty = lambda *a, **k: _empty(*a, **k).zero_()
mod = runpy.run_path(@@FILE@@, run_name="tilelang_example")
# {"seqlen": 1024}: module-level sizes that main() reads, replaced before it runs
mod["main"].__globals__.update(module_sizes)
# {"run_test": {"S": 256}}: main() calls the file's run_test with those arguments replaced
for _fn_name, _replace in calls.items():
    _fn = mod["main"].__globals__[_fn_name]
    mod["main"].__globals__[_fn_name] = lambda *a, _fn=_fn, _replace=_replace, **k: _fn(*a, **{**k, **_replace})
import inspect
params = inspect.signature(mod["main"]).parameters
if "args" in params and params["args"].default is inspect.Parameter.empty:
    runpy.run_path(@@FILE@@, run_name="__main__")  # main(args): its own __main__ block parses sys.argv
else:
    if "argv" in params:
        kwargs.setdefault("argv", sys.argv[1:])
    mod["main"](**kwargs)
print("EXAMPLE-PASSED")
'''


# exclusions that take a file out of the bar's count (issue 13: Hopper/Blackwell-only primitives,
# TileLang's TVM fork; and files that are no TileLang example at all)
NOT_IN_BAR = ("hopper", "tvm-fork", "not-an-example", "no-tilelang-kernel")


def classify(text: str, folder: str):
    """'not-an-example', 'no-tilelang-kernel', 'hopper', 'tvm-fork', 'missing:NAME' or None (the
    example counts towards the rate)."""

    if os.path.basename(folder) == "autodd":
        return "not-an-example"  # deliberately broken inputs of TileLang's bug minimizer
    if not _has_tilelang_kernel(text, folder):
        # e.g. blocksparse_attention/example_triton_*.py: a Triton kernel checked against torch
        # (it imports only tilelang.profiler.do_bench): nothing of it runs on tilecore
        return "no-tilelang-kernel"
    if HOPPER.search(text):
        return "hopper"
    if TVM_FORK.search(text):
        return "tvm-fork"
    return _missing_import(text, folder, set())


def _has_tilelang_kernel(text: str, folder: str) -> bool:
    """Whether the file, or a module of its own folder that it imports, writes a TileLang kernel."""
    if TILELANG_KERNEL.search(text):
        return True
    for name in set(IMPORTS.findall(text)):
        local = os.path.join(folder, name + ".py")
        if os.path.exists(local) and TILELANG_KERNEL.search(open(local, encoding="utf-8", errors="replace").read()):
            return True
    return False


def _missing_import(text: str, folder: str, seen: set):
    """'missing:NAME' for the first package the file, or a local module it imports, lacks;
    'tvm-fork' where such a local module uses TileLang's TVM fork or CUDA intrinsics."""
    import importlib.util

    folders = [folder] + [os.path.normpath(os.path.join(folder, d)) for d in SYS_PATH_DIRS.findall(text)]
    for name in sorted(set(IMPORTS.findall(text))):
        local = next(
            (
                os.path.join(f, name)
                for f in folders
                if os.path.exists(os.path.join(f, name + ".py")) or os.path.isdir(os.path.join(f, name))
            ),
            os.path.join(folder, name),
        )
        paths = (
            [local + ".py"]
            if os.path.exists(local + ".py")
            else sorted(os.path.join(local, f) for f in os.listdir(local) if f.endswith(".py"))
            if os.path.isdir(local)
            else []
        )
        if paths:
            for path in paths:
                if path not in seen:
                    seen.add(path)
                    local_text = open(path, encoding="utf-8", errors="replace").read()
                    if TVM_FORK.search(local_text):
                        return "tvm-fork"  # e.g. gemm_sp's sparse_utils.py: tilelang.cuda.intrinsics
                    found = _missing_import(local_text, os.path.dirname(path), seen)
                    if found:
                        return found
            continue
        if name != "tilelang" and importlib.util.find_spec(name) is None:
            return f"missing:{name}"
    return None


def examples(root: str, only=None):
    base = os.path.join(root, "examples")
    for folder, _, files in sorted(os.walk(base)):
        for f in sorted(files):
            if not f.endswith(".py") or f.startswith(("test_", "regression_", "benchmark")):
                continue
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, base)
            if only and not any(o in rel for o in only):
                continue
            text = open(path, encoding="utf-8", errors="replace").read()
            if not re.search(r"^def main\(", text, re.M) or "tilelang" not in text:
                continue
            yield rel, path, text


def deps_env(deps: str | None) -> dict:
    """Environment for the example processes: DEPS on the path, Triton in its interpreter.

    DEPS is a folder of packages the examples' own reference checks import (installed with
    `pip install --target DEPS`, outside the project's environment). Their Triton kernels
    run in Triton's interpreter on CPU tensors; fla's on-disk autotune cache is off (it
    needs compiled kernels)."""
    if not deps:
        return {}
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYTHONPATH": f"{path}:{deps}" if path else deps,
        "TRITON_INTERPRET": "1",
        "FLA_CACHE_RESULTS": "0",
        # fla's exp/log as libdevice calls, which the runner maps onto triton.language: its
        # default aliases of triton.language builtins are not patched by the interpreter
        "FLA_USE_FAST_OPS": "1",
    }


def deps_versions(deps: str | None) -> dict:
    """{distribution: version} of the packages installed in DEPS.

    A folder holding a package at a git commit rather than a release (the commit an example
    names) has no dist-info; its SOURCE file's line "NAME WHERE" says what it is. A stand-in
    package of ours (benchmarks/tilelang_deps: its `STAND_IN = "..."` line) is listed with that
    description."""
    if not deps:
        return {}
    versions: dict = {}
    for folder in deps.split(os.pathsep):  # the first folder that has a package is the one imported
        source = os.path.join(folder, "SOURCE")
        if os.path.exists(source):
            name, where = open(source, encoding="utf-8").read().strip().split(" ", 1)
            versions.setdefault(name.replace("-", "_"), where)
        for entry in sorted(os.listdir(folder)):
            m = re.match(r"(.+)-([^-]+)\.dist-info$", entry)
            init = os.path.join(folder, entry, "__init__.py")
            if m:
                versions.setdefault(m.group(1).replace("-", "_"), m.group(2))
            elif os.path.exists(init):
                stand_in = re.search(r'^STAND_IN = "([^"]+)"', open(init, encoding="utf-8").read(), re.M)
                if stand_in:
                    versions.setdefault(entry, stand_in.group(1))
    return versions


def run_one(path: str, rel: str, target: str, timeout: int, deps: str | None = None):
    code = RUNNER.replace("@@FILE@@", repr(path)).replace("@@KWARGS@@", repr(SMALL.get(rel, {})))
    env = dict(os.environ, TILECORE_TARGET=target, **deps_env(deps))
    start = time.time()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=os.path.dirname(path),
        )
    except subprocess.TimeoutExpired:
        return "timeout", f"over {timeout} s", time.time() - start
    out = proc.stdout + proc.stderr
    # gdn/* catch their own assert_close and print "... failed ✗" instead of raising
    printed_failure = re.search(r"^.*\bfailed ✗.*$", out, re.M)
    if proc.returncode == 0 and "EXAMPLE-PASSED" in out and printed_failure:
        return "fail", f"printed: {printed_failure.group(0).strip()}", time.time() - start
    if proc.returncode == 0 and "EXAMPLE-PASSED" in out:
        # Some examples only print their comparison (kda/*: "Max absolute error : ..."): keep it
        printed = re.findall(r"^Max (absolute|relative) error\s*:\s*(\S+)", out, re.M)
        # the worst value of each kind; a NaN is the worst
        worst = {
            kind: max((float(v) for k, v in printed if k == kind), key=lambda x: (x != x, x)) for kind, _ in printed
        }
        note = ", ".join(f"printed max {kind} error {v:.2e}" for kind, v in worst.items())
        if any(v != v for v in worst.values()) or not worst.get("relative", 0.0) <= PRINTED_RELATIVE_TOLERANCE:
            return "fail", f"{note} (above {PRINTED_RELATIVE_TOLERANCE:g})", time.time() - start
        return "pass", note, time.time() - start
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    last = next(
        (ln for ln in reversed(lines) if re.match(r"^\S*(Error|Exception)\b|^\S+Error:", ln)),
        lines[-1] if lines else "",
    )
    return "fail", last[:300], time.time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tilelang", help="path to a TileLang checkout (its examples/ folder is read)")
    ap.add_argument("--target", default="reference")
    ap.add_argument("--only", nargs="*", help="substrings of example paths to run")
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--json", help="write the per-example results here")
    ap.add_argument(
        "--deps", help="folders (os.pathsep-separated) of packages the examples' reference checks import (triton, fla)"
    )
    args = ap.parse_args()
    if args.deps:
        sys.path.extend(args.deps.split(os.pathsep))  # classify() finds the packages there
    results = {}
    for rel, path, text in examples(args.tilelang, args.only):
        kind = classify(text, os.path.dirname(path))
        if kind:
            results[rel] = {"status": "excluded", "why": kind}
            print(f"{'excluded':9} {rel} ({kind})", flush=True)
            continue
        status, why, secs = run_one(path, rel, args.target, args.timeout, args.deps)
        results[rel] = {"status": status, "why": why, "seconds": round(secs, 1)}
        print(f"{status:9} {rel} {secs:6.1f}s {why}", flush=True)
    ran = [r for r in results.values() if r["status"] != "excluded"]
    passed = sum(r["status"] == "pass" for r in ran)
    bar = [r for r in results.values() if r.get("why") not in NOT_IN_BAR or r["status"] != "excluded"]
    kinds = {}
    for r in results.values():
        if r["status"] == "excluded":
            kinds[r["why"].split(":")[0]] = kinds.get(r["why"].split(":")[0], 0) + 1
    print(
        f"\n{args.target}: {passed}/{len(bar)} of the files without Hopper/Blackwell-only primitives "
        f"or TileLang's TVM fork passed; {passed}/{len(ran)} of the files run; not run: {kinds}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "target": args.target,
                    "deps": deps_versions(args.deps),
                    "passed": passed,
                    "ran": len(ran),
                    "bar_files": len(bar),
                    "not_run": kinds,
                    "results": results,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
