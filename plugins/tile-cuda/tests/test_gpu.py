"""Execute tier on a GPU host (skipped where no NVIDIA GPU is present)."""

import kernels as K
import numpy as np
import pytest

from tile_cuda import plugin
from tilecore.plugin.backend import TileModule

pytestmark = pytest.mark.gpu


def build(func, target="cuda"):
    be = plugin.make_backend()
    art = plugin.tilecore_codegen(backend=be, module=TileModule(func, target), options={})
    return plugin.tilecore_launcher(backend=be, artifact=art)


@pytest.mark.parametrize("M,N,Kd,pred", [(512, 512, 256, False), (200, 136, 72, True)])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_matches_torch(M, N, Kd, pred, ta, tb):
    import torch

    launch = build(K.gemm_kernel(M, N, Kd, ta=ta, tb=tb, predicated=pred))
    a = torch.randn((Kd, M) if ta else (M, Kd), device="cuda", dtype=torch.float16)
    b = torch.randn((N, Kd) if tb else (Kd, N), device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    launch([a, b, c], {})
    ref = (a.T if ta else a).float() @ (b.T if tb else b).float()
    err = (c.float() - ref).norm() / ref.norm()
    assert err < 1e-3, err


def test_elementwise_dynamic_partial_tile():
    import torch

    launch = build(K.elementwise_kernel(0, dynamic=True))
    x = torch.randn(5000, device="cuda")
    y = torch.full_like(x, float("nan"))
    launch([x, y], {"n": 5000})
    torch.testing.assert_close(y, 2 * x + 1)


def test_softmax_matches_torch():
    import torch

    launch = build(K.softmax_kernel(64, 1024))
    x = torch.randn(64, 1024, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    launch([x, y], {})
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
def test_gemm_bf16_and_int8(dtype):
    import torch

    M = N = 256
    Kd = 128
    launch = build(
        K.gemm_kernel(
            M,
            N,
            Kd,
            bk=64 if dtype == "int8" else 32,
            dtype=dtype,
            accum="int32" if dtype == "int8" else "float32",
            out_dtype="int32" if dtype == "int8" else dtype,
            tb=dtype == "int8",
        )
    )
    if dtype == "int8":
        a = torch.randint(-8, 8, (M, Kd), device="cuda", dtype=torch.int8)
        b = torch.randint(-8, 8, (N, Kd), device="cuda", dtype=torch.int8)
        c = torch.zeros((M, N), device="cuda", dtype=torch.int32)
        launch([a, b, c], {})
        ref = (a.cpu().long() @ b.cpu().long().T).int()  # torch has no integer matmul on CUDA
        assert torch.equal(c.cpu(), ref)
    else:
        a = torch.randn(M, Kd, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(Kd, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
        launch([a, b, c], {})
        ref = a.float() @ b.float()
        assert ((c.float() - ref).norm() / ref.norm()) < 1e-2


def test_softmax_group_reduce_fp16_tiles():
    import torch

    launch = build(K.softmax_kernel(64, 2048, threads=256, rows=4, frag_dtype="float16"))
    x = torch.randn(64, 2048, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    launch([x, y], {})
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)


@pytest.mark.parametrize("case", range(8))
def test_examples_match_reference(case):
    """Every example kernel on the GPU against the example's own float64 numpy reference."""

    import torch
    from examples_util import CASES, example, prim_func

    import tilecore

    mod_name, fac, args, kwargs = CASES[case]
    func, out_idx = prim_func(*CASES[case])
    kern = tilecore.compile(func, target="cuda", out_idx=out_idx)
    rng = np.random.default_rng()
    dt = func.params[0].dtype
    tdt = getattr(torch, dt)

    def rnd(shape, lo=-1.0, hi=1.0):
        x = rng.uniform(lo, hi, size=shape).astype(np.float32)
        return x, torch.from_numpy(x).to("cuda").to(tdt)

    m = example(mod_name)
    if mod_name == "gemm":
        M, N, Kd = args[:3]
        (a, ta), (b, tb) = rnd((M, Kd)), rnd((Kd, N))
        a, b = ta.float().cpu().numpy(), tb.float().cpu().numpy()
        out, ref = kern(ta, tb), a.astype(np.float64) @ b
    elif mod_name == "softmax":
        ((x, tx_),) = [rnd((args[0], args[1]), -4, 4)]
        out, ref = kern(tx_), m.reference(tx_.float().cpu().numpy())
    elif mod_name == "layernorm":
        M, N = args[:2]
        (x, t1), (w, t2), (b, t3) = rnd((M, N), -3, 3), rnd((N,), 0.5, 1.5), rnd((N,), -0.5, 0.5)
        out, ref = kern(t1, t2, t3), m.reference(x, w, b)
    else:
        B_, H, S, D, causal = args
        ts = [rnd((B_, S, H, D))[1] for _ in range(3)]
        out = kern(*ts)
        ref = m.reference(*[t.float().cpu().numpy() for t in ts], causal)
    got = out.float().cpu().numpy().astype(np.float64)
    err = np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)
    tol = 1e-5 if dt in ("float32", "float64") else 1e-2
    assert np.isfinite(err) and err <= tol, (CASES[case], err)


# ---- the Kernel's remembered plans on the GPU: tile_cuda's specialized run per argument signature


def _axpb_kernels():
    import tilecore

    func = K.elementwise_kernel(0, dynamic=True)  # y = 2x + 1 over n elements, grid from n
    return tilecore.compile(func, target="cuda"), tilecore.compile(func, target="cuda", out_idx=[-1])


def test_kernel_plans_use_each_calls_tensors_and_sizes():
    import torch

    kern, kout = _axpb_kernels()
    for n in (5000, 3000, 5000, 1, 3000):  # new tensors (new pointers) and alternating grids/scalars
        x = torch.randn(n, device="cuda")
        y = torch.full_like(x, float("nan"))
        kern(x, y)
        out = kout(x)
        torch.testing.assert_close(y, 2 * x + 1)
        torch.testing.assert_close(out, 2 * x + 1)
    assert len(kern._plans) == 3 and len(kout._plans) == 3
    assert all("specialize" in p.__qualname__ for p in kern._plans.values())  # the launcher's own run
    from tile_cuda import launcher

    if launcher._fastcall_module() is not None:  # built at install: the latest signature's call is in C
        # kern writes its argument y: its fast call runs behind the aliasing check
        assert type(kern._fast.__wrapped__).__name__ == "FastCall" and len(kern._fast_calls) == 3
        assert kout.writes_every_element(1, {"n": 3000})  # so its output is allocated without the zero fill


def test_kernel_plans_launch_on_the_current_stream():
    import torch

    kern, kout = _axpb_kernels()
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    kern(x, y)  # remembered
    fresh = torch.randn(1 << 20, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # the copy below, and so x's new values, arrive late on `side`
        x.copy_(fresh)
        kern(x, y)  # must run after the copy: on `side`, not on the default stream
        out = kout(x)
    side.synchronize()
    torch.testing.assert_close(y, 2 * fresh + 1)
    torch.testing.assert_close(out, 2 * fresh + 1)


def test_kernel_checks_after_a_remembered_call():
    import torch

    from tilecore.diagnostics import TileRuntimeError

    kern, _ = _axpb_kernels()
    x = torch.randn(64, device="cuda")
    kern(x, torch.empty_like(x))
    kern(x, torch.empty_like(x))
    with pytest.raises(TileRuntimeError, match="expected an array in cuda memory"):
        kern(x.cpu(), torch.empty_like(x))
    with pytest.raises(TileRuntimeError, match="expected dtype float32, got float16"):
        kern(x.half(), torch.empty_like(x))
    with pytest.raises(TileRuntimeError, match="expected a C-contiguous"):
        kern(torch.randn(128, device="cuda")[::2], torch.empty_like(x))
    with pytest.raises(TileRuntimeError, match="n = 64 was bound by argument 'X'"):
        kern(x, torch.empty(65, device="cuda"))


def test_kernel_plans_from_several_threads():
    import threading

    import torch

    kern, _ = _axpb_kernels()
    errors = []

    def worker(seed):
        try:
            g = torch.Generator(device="cuda").manual_seed(seed)
            for _ in range(200):
                x = torch.randn(4096, device="cuda", generator=g)
                y = torch.empty_like(x)
                kern(x, y)
                torch.cuda.current_stream().synchronize()
                if not torch.allclose(y, 2 * x + 1):
                    errors.append(f"thread {seed}: wrong result")
                    return
        except Exception as err:  # reported below
            errors.append(repr(err))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_kernel_call_from_a_thread_that_never_touched_cuda():
    import threading

    import torch

    kern, _ = _axpb_kernels()
    x = torch.randn(4096, device="cuda")
    y = torch.full_like(x, float("nan"))
    kern(x, y)  # remembered on this thread
    y.fill_(float("nan"))
    torch.cuda.synchronize()
    errors = []

    def bare():  # no CUDA context current on this thread until the launcher makes one
        try:
            kern(x, y)
        except Exception as err:
            errors.append(repr(err))

    t = threading.Thread(target=bare)
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    torch.testing.assert_close(y, 2 * x + 1)


# ---- arrays off a 16-byte boundary: refused with a clear error, and the CUDA context stays usable


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_misaligned_views_are_refused_and_the_context_stays_usable(dtype):
    import torch

    import tilecore
    from tilecore.diagnostics import TileRuntimeError

    n = 4096  # whole tiles: y = 2x + 1 moves X and Y with 16-byte vector copies (tc::copy16)
    func = K.elementwise_kernel(n, dtype=dtype)
    kern = tilecore.compile(func, target="cuda")
    assert "copy16(" in kern.source  # what a misaligned address would fault in, poisoning the context
    launch = build(func)
    tdtype = getattr(torch, dtype)
    base_x = torch.randn(n + 8, device="cuda", dtype=tdtype)
    base_y = torch.full_like(base_x, float("nan"))
    x, y = base_x[1 : n + 1], base_y[1 : n + 1]  # contiguous views one element in: off the boundary
    offset = x.data_ptr() % 16
    assert x.is_contiguous() and offset != 0
    message = r"kernel 'axpb', argument '{}': .* \(address % 16 = " + str(offset) + r"\).*x\[1:\]\.clone\(\)"
    aligned_x = torch.randn(n, device="cuda", dtype=tdtype)
    aligned_y = torch.full_like(aligned_x, float("nan"))
    with pytest.raises(TileRuntimeError, match=message.format("X")):
        kern(x, aligned_y)  # the Kernel's full check, then the launcher's specialized run
    kern(aligned_x, aligned_y)  # remembers the plan for this signature, which the views share
    with pytest.raises(TileRuntimeError, match=message.format("Y")):
        kern(aligned_x, y)  # the remembered plan checks each call's addresses
    with pytest.raises(TileRuntimeError, match=message.format("X")):
        launch([x, y], {})  # the raw launcher
    torch.cuda.synchronize()  # no misaligned-address error reached the context
    expected = (2 * aligned_x.float() + 1).to(tdtype)
    torch.testing.assert_close(aligned_y, expected)
    assert torch.isnan(base_y).all()  # nothing was launched on the views
    aligned_y.fill_(float("nan"))
    kern(aligned_x, aligned_y)
    step = 16 // base_x.element_size()  # a view that starts 16 bytes in is aligned, and runs
    launch([base_x[step : step + n], base_y[step : step + n]], {})
    torch.cuda.synchronize()
    torch.testing.assert_close(aligned_y, expected)
    torch.testing.assert_close(base_y[step : step + n], (2 * base_x[step : step + n].float() + 1).to(tdtype))


def test_while_loops_match_the_reference():
    from tilecore.testing import assert_matches_reference, to_device, while_loops_arguments, while_loops_kernel

    args = [to_device(x, "cuda") for x in while_loops_arguments()]  # the kernel takes cuda memory
    assert_matches_reference(while_loops_kernel(), args, backend="cuda")


def test_atomics_in_a_parallel_over_replicated_rows_match_the_reference():
    """Element atomics nested in an `if` / `while` of a T.Parallel over replicated row values."""
    import torch

    from tilecore.testing import assert_matches_reference

    a = (torch.randn(64, 32) * 2).half().cuda()
    b = torch.randn(32, 64).half().cuda()
    assert_matches_reference(
        K.row_sum_counts(), [a, b, torch.zeros(64, dtype=torch.int32, device="cuda")], backend="cuda"
    )


def test_per_thread_while_loops_match_the_reference():
    """`while` loops whose trip count differs between threads (feature `parallel_while`)."""
    from tilecore.testing import assert_per_thread_while_matches_reference

    assert_per_thread_while_matches_reference("cuda", "cuda")  # the kernel takes cuda memory
