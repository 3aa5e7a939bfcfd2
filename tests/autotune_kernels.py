"""Kernel factories the autotuner's tests tune (one module, so a second process gets the same source).

`vector_add`'s `mode` config makes one candidate misbehave on the cpu backend when
the autotune_faults plugin is registered: its kernel is renamed so that the plugin
crashes, hangs or miscompiles its compile. `scale` makes a candidate compute a
different function (a wrong configuration that only a reference can expose).
"""

import dataclasses

import tilecore
import tilecore.language as T


@tilecore.jit(out_idx=[-1], target="cpu")
def vector_add(n, block=64, scale=1.0, mode="ok"):
    if block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = (A[bx * block + i] + B[bx * block + i]) * scale

    return main if mode == "ok" else dataclasses.replace(main, name=f"{mode}_add")


tuned_add = tilecore.autotune(configs=[{"block": 64}, {"block": 128}], warmup=1, rep=3)(vector_add)
