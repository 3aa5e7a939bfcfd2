"""The kernel a compile worker builds once at start-up to load its backend's compiler."""

import tilecore.language as T


@T.prim_func
def tiny_copy(
    A: T.Tensor((16,), "float32"),  # type: ignore[valid-type]  # a tile type, read by the frontend
    B: T.Tensor((16,), "float32"),  # type: ignore[valid-type]
):
    with T.Kernel(1) as bx:
        for i in T.Parallel(16):
            B[bx * 16 + i] = A[bx * 16 + i]
