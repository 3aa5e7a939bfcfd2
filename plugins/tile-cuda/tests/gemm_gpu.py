"""A GEMM artifact checked on the GPU against torch and, bit for bit, against another build of the
same kernel (for the GPU tests of schedules that must not change the result: persistent blocks,
the TMA-store epilogue)."""

from __future__ import annotations

GUARD = 4096  # elements after C that no store may touch


def check_against(art, base, M: int, N: int, K: int, dtype: str, calls: int = 2) -> None:
    """Run `art` and `base` on fresh data `calls` times: the product within the dtype's rounding of
    torch's (float64), the same bits as `base`, and nothing written past C (C is the front of a
    larger NaN-filled buffer)."""
    import torch

    from tile_cuda import plugin

    be = plugin.make_backend()
    run, run_base = (plugin.tilecore_launcher(backend=be, artifact=x) for x in (art, base))
    tdt = getattr(torch, dtype)
    for _ in range(calls):
        a = torch.randn(M, K, device="cuda", dtype=tdt)
        b = torch.randn(K, N, device="cuda", dtype=tdt)
        flat = torch.full((M * N + GUARD,), float("nan"), device="cuda", dtype=tdt)
        c = flat[: M * N].view(M, N)
        c_base = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
        run([a, b, c], {})
        run_base([a, b, c_base], {})
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < (1e-2 if dtype == "bfloat16" else 2e-3), err
        assert torch.equal(c, c_base)
        assert torch.isnan(flat[M * N :]).all()
