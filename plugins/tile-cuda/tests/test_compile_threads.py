"""Compiles on several threads at once (issue 17): the SIMT pipeline swaps a TVM module attribute
while it runs (`tilecore.lowering.simt._THREAD_SYNC_SWAP` guards it), so concurrent codegen of
different kernels must give exactly what one thread gives."""

from concurrent.futures import ThreadPoolExecutor

import kernels as K

from tile_cuda.compiler import generate_source


def _kernels():
    return [
        K.softmax_kernel(64, 256, threads=128, rows=1, name="softmax_a"),
        K.gemm_kernel(128, 128, 64, bm=64, bn=64, bk=32, stages=2, threads=128, name="gemm_b"),
        K.softmax_kernel(32, 512, threads=256, rows=2, name="softmax_c"),
        K.gemm_kernel(96, 64, 64, bm=64, bn=64, bk=32, stages=2, threads=128, predicated=True, name="gemm_d"),
    ]


def test_concurrent_codegen_matches_one_thread():
    alone = [generate_source(f, "sm_90a", {})[0] for f in _kernels()]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda f: generate_source(f, "sm_90a", {})[0], _kernels() * 2))
    assert together == alone * 2
    assert len(set(alone)) == len(alone)  # four different kernels
