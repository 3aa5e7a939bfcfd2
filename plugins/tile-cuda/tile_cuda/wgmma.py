"""Hopper warpgroup MMA (`wgmma.mma_async`, sm_90a): which gemms take it, and its C++ helpers.

A block-level `T.gemm` runs on wgmma (the `WgmmaGemm` rule of `gemm_rules`) when
  * the target has it (cuda:sm_90a, unless the compile option wgmma=False),
  * dtypes are fp16/bf16 -> fp32 (any transposes) or int8 -> int32 (A row-major, B transposed:
    wgmma reads 8-bit operands only K-major),
  * C is M x N with M = 16 * R * warps (R = 1 or 2 row blocks per warp) and warps % 4 == 0: warp w
    owns rows 16Rw..16Rw+16R-1 -- exactly `MmaLayout(M, N, warps, 1)`, so the accumulator layout,
    the row reductions and the register-A (FlashAttention) trick stay as for mma.sync. Each
    warpgroup issues R m64 instructions per k-step; with R = 2 (TileLang's quickstart: 128 x 128
    on 128 threads) A must be a row-major shared tile, stored with its rows permuted
    (`SharedLayout.row_blocks`) so that instruction i reads rows 16i.. of every warp,
  * N % 8 == 0 and N <= 256 (int8: N % 16 == 0), K a multiple of the k-step,
  * B (and A unless it is a register fragment) are whole 2-D shared tiles whose rows are 32, 64
    or a multiple of 128 bytes, with a multiple of 8 rows.
Operand tiles are stored in the canonical swizzled layouts that wgmma's shared-memory
descriptors describe: rows of W = min(row bytes, 128) bytes, 16-byte chunks XOR-swizzled by the
row (the same XOR as `SharedLayout.xor_term`), and tiles wider than 128 bytes split into
128-byte column blocks (`SharedLayout.blocked`). Tile bases are 1024-byte aligned.

Everything else keeps the mma.sync path. Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from typing import Iterable, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize

WGMMA_TYPES = {"float16": ("f16", "half"), "bfloat16": ("bf16", "__nv_bfloat16"), "int8": ("s8", "signed char")}
SMEM_ALIGN = 1024  # the 128-byte swizzle repeats every 8 rows x 128 bytes; its base must be aligned


def operand_tile_ok(shape, elem_bytes: int) -> bool:
    """Whether a shared tile of `shape` can be described by one wgmma descriptor family."""
    if len(shape) != 2 or shape[0] % 8:
        return False
    row_bytes = shape[1] * elem_bytes
    return row_bytes in (32, 64) or row_bytes % 128 == 0


def candidate(g: N.Gemm, warps: int) -> bool:
    """Shape and dtype conditions on gemm `g` (storage is checked later by the planner)."""
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    if a.dtype != b.dtype or a.dtype not in WGMMA_TYPES or len(c.shape) != 2:
        return False
    if (a.dtype, c.dtype) not in (("float16", "float32"), ("bfloat16", "float32"), ("int8", "int32")):
        return False
    if len(g.a.extents) != 2 or len(g.b.extents) != 2:
        return False
    M, Nn = c.shape
    if not (isinstance(M, int) and isinstance(Nn, int)):
        return False
    if warps % 4 or M not in (16 * warps, 32 * warps) or Nn % 8 or Nn > 256:
        return False
    if M == 32 * warps and g.transpose_a:  # the row permutation is for row-major A only
        return False
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    if a.dtype == "int8":
        return not g.transpose_a and g.transpose_b and Nn % 16 == 0 and K % 32 == 0
    return K % 16 == 0


def row_blocks(g: N.Gemm, warps: int) -> int:
    """m64 instructions per warpgroup and k-step (1 or 2) of a candidate gemm on `warps` warps."""
    return g.c.buffer.static_dims()[0] // (16 * warps)


def operands_ok(g: N.Gemm, storage, a_in_registers: bool) -> bool:
    """Storage conditions: B (and A unless from registers) are whole, describable shared tiles."""
    tiles = [g.b] if a_in_registers else [g.a, g.b]
    for r in tiles:
        buf = r.buffer
        if storage.get(buf.name) != "smem":
            return False
        shape = buf.static_shape() if hasattr(buf, "static_shape") else tuple(buf.shape)
        if not shape or tuple(shape) != tuple(r.extents) or not operand_tile_ok(shape, itemsize(buf.dtype)):
            return False
        if any(not (isinstance(s, N.Const) and s.value == 0) for s in r.starts):
            return False
    return True


# ---------------------------------------------------------------------------------- C++ side

WGMMA_LIB = r"""
#ifndef TILECORE_WGMMA_LIB
#define TILECORE_WGMMA_LIB
namespace tc {
typedef unsigned long long u64;
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// Orders this thread's generic-proxy shared-memory writes (st.shared, cp.async) before later
// async-proxy reads (wgmma operands); issued before every barrier of a wgmma kernel.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keep the compiler from moving accesses of an accumulator register across wgmma fences.
__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
__device__ __forceinline__ void reg_fence(int& r) { asm volatile("" : "+r"(r) :: "memory"); }

// A shared tile of ROWS x COLS elements of EB bytes in the canonical wgmma layout: rows of
// W = min(row bytes, 128) bytes, 16-byte chunks XOR-swizzled by row, column blocks of W bytes.
template <int ROWS, int COLS, int EB> struct WgTile {
  static constexpr int RB = COLS * EB;
  static constexpr int W = RB >= 128 ? 128 : RB;
  static constexpr int MODE = W == 128 ? 1 : (W == 64 ? 2 : 3);  // descriptor swizzle field
  static constexpr int BLOCK = ROWS * W;                          // bytes per column block
  static constexpr int at(int r, int c) { return (c * EB / W) * BLOCK + r * W + (c * EB) % W; }
  static __device__ __forceinline__ u64 desc(const void* p, int lbo, int sbo) {
    const u32 a = smem_addr(p);
    if (a & (8 * W - 1)) __trap();  // swizzle atoms must be aligned: never compute on a misread tile
    return (u64)((a & 0x3FFFF) >> 4) | ((u64)((lbo >> 4) & 0x3FFF) << 16) |
           ((u64)((sbo >> 4) & 0x3FFF) << 32) | ((u64)MODE << 62);
  }
  // K-major operand (rows = M or N, K contiguous): 8-row groups SBO apart; LBO unused.
  static __device__ __forceinline__ u64 desc_k(const void* p) { return desc(p, 16, 8 * W); }
  // MN-major operand (rows = K, M or N contiguous): 8-row groups SBO apart, column blocks LBO apart.
  static __device__ __forceinline__ u64 desc_mn(const void* p) { return desc(p, BLOCK, 8 * W); }
};

template <typename T, int N> struct Wgmma;  // m64nNk16 (k32 for int8), specialized per kernel

// Block GEMM C(M x N) += op(A) op(B) on warpgroup MMA, A and B in shared memory (WgTile layout),
// C in registers in the layout of MmaLayout(M, N, warps, 1). Warpgroup g owns the 64 * MI rows
// from 64 * MI * g and issues MI m64 instructions per k-step: instruction i reads the physical rows
// 64i.. of its slab (SharedLayout.row_blocks put warp w's rows 16i.. there) into acc + i * N / 2.
// A is (M x K) (TA: K x M, MI = 1 only); B is (K x N) (TB: N x K).
// PENDING: wgmma groups left in flight on return (1 in the overlapped main loop of wgmma_pipeline:
// this call's group still runs, the previous one is retired; 0 elsewhere). With PENDING > 0 the
// accumulators must not be touched until a call with PENDING = 0 has retired every group.
// FENCE = false leaves out the proxy fence before the group: for operands only the async proxy
// wrote (TMA-fed stages of a warp-specialized loop; what was written before the loop was fenced
// before its barrier). The fence is a MEMBAR.ALL.CTA per call.
template <int N, int K, bool TA, bool TB, typename T, int AR, int AC, int BR, int BC, int MI, int PENDING = 0,
          bool FENCE = true>
__device__ __forceinline__ void wgmma_ss(const T* A, const T* B, typename MmaOp<T>::Acc* acc) {
  typedef WgTile<AR, AC, sizeof(T)> TileA;
  typedef WgTile<BR, BC, sizeof(T)> TileB;
  constexpr int KS = 32 / sizeof(T);
  static_assert(MI == 1 || !TA, "row blocks need a row-major A");
  const int wg = threadIdx.x >> 7;
  const u64 da = (TA ? TileA::desc_mn(A) : TileA::desc_k(A)) +
                 ((TA ? TileA::at(0, wg * 64) : TileA::at(wg * 64 * MI, 0)) >> 4);
  const u64 db = TB ? TileB::desc_k(B) : TileB::desc_mn(B);
  if constexpr (FENCE) fence_async_smem();
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < K / KS; ++s) {
    const int bo = TB ? TileB::at(0, s * KS) : TileB::at(s * KS, 0);
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const int ao = TA ? TileA::at(s * KS, 0) : TileA::at(i * 64, s * KS);
      // imm-trans: 0 = K-major (A as M x K, B as N x K), 1 = MN-major
      Wgmma<T, N>::template ss<TA ? 1 : 0, TB ? 0 : 1>(acc + i * (N / 2), da + (ao >> 4), db + (bo >> 4));
    }
  }
  wgmma_commit();
  wgmma_wait<PENDING>();
  // the accumulators become readable (fenced against moving above the wait) once no group is left
  if constexpr (PENDING == 0) {
#pragma unroll
    for (int i = 0; i < MI * N / 2; ++i) reg_fence(acc[i]);
  }
}

// Block GEMM with A in registers (a (M x K) fragment in the accumulator layout of the same warp
// rows, e.g. softmax probabilities cast to half), B in shared memory as in wgmma_ss; PENDING as
// there (the A registers must not change either until the group is retired); FENCE as there.
template <int N, int K, bool TB, typename T, int BR, int BC, int PENDING = 0, bool FENCE = true>
__device__ __forceinline__ void wgmma_rs(const T* Areg, const T* B, float* acc) {
  typedef WgTile<BR, BC, sizeof(T)> TileB;
  const u64 db = TB ? TileB::desc_k(B) : TileB::desc_mn(B);
  const u32* a32 = reinterpret_cast<const u32*>(Areg);
  if constexpr (FENCE) fence_async_smem();
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < K / 16; ++s) {
    const u32 a[4] = {a32[4 * s], a32[4 * s + 1], a32[4 * s + 2], a32[4 * s + 3]};
    const int bo = TB ? TileB::at(0, s * 16) : TileB::at(s * 16, 0);
    Wgmma<T, N>::template rs<TB ? 0 : 1>(acc, a, db + (bo >> 4));
  }
  wgmma_commit();
  wgmma_wait<PENDING>();
  if constexpr (PENDING == 0) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) reg_fence(acc[i]);
  }
}

// Retire this warpgroup's wgmma groups (after a call with PENDING > 0) until at most PENDING are
// left (groups retire in order: with PENDING = 1 all but the last issued): the NACC accumulator
// registers of a retired group become readable, fenced against moving above the wait.
template <int NACC, int PENDING = 0, typename A>
__device__ __forceinline__ void wgmma_retire(A* acc) {
  wgmma_wait<PENDING>();
#pragma unroll
  for (int i = 0; i < NACC; ++i) reg_fence(acc[i]);
}
}  // namespace tc
#endif
"""


def _instruction(dtype: str, n: int) -> str:
    """The `Wgmma<T, n>` specialization: ss (both operands by descriptor) and rs (A in registers).
    TRANS_A / TRANS_B are PTX's imm-trans operands: 0 = K-major, 1 = MN-major."""
    ptx, ctype = WGMMA_TYPES[dtype]
    is_int = dtype == "int8"
    k = 32 if is_int else 16
    nacc = n // 2
    acc_t, con = ("int", "+r") if is_int else ("float", "+f")
    dtype_acc = "s32" if is_int else "f32"
    regs = ", ".join(f"%{i}" for i in range(nacc))
    outs = ", ".join(f'"{con}"(d[{i}])' for i in range(nacc))
    shape = f"m64n{n}k{k}.{dtype_acc}.{ptx}.{ptx}"
    s = nacc  # first input operand number
    ss_tmpl = "template <int TRANS_A, int TRANS_B>"
    if is_int:
        ss_asm = (
            f'"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s + 2}, 0;\\n'
            f'wgmma.mma_async.sync.aligned.{shape} {{{regs}}}, %{s}, %{s + 1}, p;\\n}}\\n"'
        )
        ss_in = '"l"(da), "l"(db), "r"(1)'
    else:
        ss_asm = (
            f'"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s + 2}, 0;\\n'
            f"wgmma.mma_async.sync.aligned.{shape} {{{regs}}}, %{s}, %{s + 1}, p, 1, 1, "
            f'%{s + 3}, %{s + 4};\\n}}\\n"'
        )
        ss_in = '"l"(da), "l"(db), "r"(1), "n"(TRANS_A), "n"(TRANS_B)'
    guard = f"TILECORE_WGMMA_{ptx.upper()}_N{n}"  # TVM repeats the source at every call site
    out = [
        f"#ifndef {guard}",
        f"#define {guard}",
        f"template <> struct Wgmma<{ctype}, {n}> {{",
        f"  {ss_tmpl} static __device__ __forceinline__ void ss({acc_t}* d, u64 da, u64 db) {{",
        f"    asm volatile({ss_asm}",
        f"      : {outs}",
        f"      : {ss_in});",
        "  }",
    ]
    if not is_int:
        rs_asm = (
            f'"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s + 5}, 0;\\n'
            f"wgmma.mma_async.sync.aligned.{shape} {{{regs}}}, {{%{s}, %{s + 1}, %{s + 2}, %{s + 3}}}, "
            f'%{s + 4}, p, 1, 1, %{s + 6};\\n}}\\n"'
        )
        out += [
            "  template <int TRANS_B> static __device__ __forceinline__ void rs(float* d, const u32* a, u64 db) {",
            f"    asm volatile({rs_asm}",
            f"      : {outs}",
            '      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1), "n"(TRANS_B));',
            "  }",
        ]
    out += ["};", "#endif"]
    return "\n".join(out)


def cxx_source(shapes: Iterable[Tuple[str, int]]) -> str:
    """WGMMA_LIB plus the instruction wrappers for the (dtype, N) pairs a kernel uses."""
    specs = "\n".join(_instruction(d, n) for d, n in sorted(set(shapes)))
    return WGMMA_LIB + "namespace tc {\n" + specs + "\n}  // namespace tc\n"
