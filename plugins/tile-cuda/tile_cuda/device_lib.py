"""CUDA device helpers that tile-cuda's rules and intrinsics call through `cuda_func_call`.

One C++ source block (`CUDA_DEVICE_LIB`), emitted once into every generated
module: tensor-core MMA (`mma.sync`), `ldmatrix`, `cp.async` with zero-fill
predication, warp shuffles, atomics for every dtype, fast math. Kept in C++
because warp-level GEMM loops are templates over tile shapes: nvcc unrolls them
fully, so the fragments stay in registers.

The swizzle used by `tc::swz` must equal `SharedLayout.offset` in
`tilecore/lowering/simt_layout.py` (the toolkit's layout) (the TIR side writes the tiles that these
helpers read).

Importing this module does not import TVM.
"""

CUDA_DEVICE_LIB = r"""
#ifndef TILECORE_CUDA_LIB
#define TILECORE_CUDA_LIB
#include <cuda_fp16.h>
#include <cuda_bf16.h>
namespace tc {
typedef unsigned int u32;

// Physical element offset of (row, col) in a shared tile with ROW_ELEMS elements per row,
// 16-byte chunks XOR-swizzled by row so ldmatrix / cp.async rows hit distinct banks.
template <int ROW_ELEMS, int ELEM_BYTES, bool SWIZZLE>
__device__ __forceinline__ int swz(int row, int col) {
  if constexpr (!SWIZZLE) {
    return row * ROW_ELEMS + col;
  } else {
    constexpr int VEC = 16 / ELEM_BYTES;
    constexpr int ROW_BYTES = ROW_ELEMS * ELEM_BYTES;
    int chunk = col / VEC;
    int x;
    if constexpr (ROW_BYTES % 128 == 0) x = row & 7;
    else if constexpr (ROW_BYTES == 64) x = (row >> 1) & 3;
    else if constexpr (ROW_BYTES == 32) x = (row >> 2) & 1;
    else x = 0;
    return row * ROW_ELEMS + ((chunk ^ x) * VEC) + (col % VEC);
  }
}

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(u32* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}

template <typename T> struct MmaOp;
template <> struct MmaOp<half> {
  static constexpr int K = 16;
  typedef float Acc;
  static __device__ __forceinline__ void run(float* c, const u32* a, const u32* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <> struct MmaOp<__nv_bfloat16> {
  static constexpr int K = 16;
  typedef float Acc;
  static __device__ __forceinline__ void run(float* c, const u32* a, const u32* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <> struct MmaOp<signed char> {
  static constexpr int K = 32;
  typedef int Acc;
  static __device__ __forceinline__ void run(int* c, const u32* a, const u32* b) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// Pack 32 bits of an operand fragment from 4-byte (b16 pair / int8 quad) runs that are not
// contiguous in shared memory (the transposed int8 cases ldmatrix cannot serve).
template <typename T, int LD, bool SW>
__device__ __forceinline__ u32 gather32(const T* s, int row0, int col, bool along_rows) {
  constexpr int PER = 4 / sizeof(T);
  u32 v = 0;
#pragma unroll
  for (int e = 0; e < PER; ++e) {
    T x = along_rows ? s[swz<LD, sizeof(T), SW>(row0 + e, col)] : s[swz<LD, sizeof(T), SW>(row0, col + e)];
    u32 bits;
    if constexpr (sizeof(T) == 2) bits = (u32)(*reinterpret_cast<const unsigned short*>(&x));
    else bits = (u32)(*reinterpret_cast<const unsigned char*>(&x));
    v |= bits << (8 * sizeof(T) * e);
  }
  return v;
}

// Warp-tiled block GEMM C(MxN) += op(A) op(B) with A, B in (swizzled) shared memory and C in
// registers in the m16n8 accumulator layout: warp w = (warp_m, warp_n) = (w / WN_WARPS, w % WN_WARPS)
// owns rows warp_m*M/WM_WARPS.., cols warp_n*N/WN_WARPS..; acc[((mi*NI + ni)*2 + h)*2 + c].
// A is (M x K) row-major (TA: K x M), B is (K x N) row-major (TB: N x K).
template <int M, int N, int K, int WM_WARPS, int WN_WARPS, bool TA, bool TB, typename T,
          int LDA, int LDB, bool SWA, bool SWB>
struct GemmSS {
  static constexpr int WM = M / WM_WARPS, WN = N / WN_WARPS, MI = WM / 16, NI = WN / 8;
  static constexpr int KS = MmaOp<T>::K;
  static constexpr int EB = sizeof(T);
  static constexpr int HALF_K = KS / 2;  // elements in one 16-byte row of an 8x8 b16 matrix

  static __device__ __forceinline__ void load(const T* A, const T* B, int kk, int lane, int m0, int n0,
                                              u32 (&a)[MI][4], u32 (&b)[NI][2]) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int mb = m0 + mi * 16;
      if constexpr (!TA) {
        const int r = mb + (lane & 15), c = kk + (lane >> 4) * HALF_K;
        ldmatrix_x4(a[mi], A + swz<LDA, EB, SWA>(r, c));
      } else if constexpr (EB == 2) {
        const int j = lane >> 3;
        const int r = kk + (j >> 1) * 8 + (lane & 7), c = mb + (j & 1) * 8;
        ldmatrix_x4_trans(a[mi], A + swz<LDA, EB, SWA>(r, c));
      } else {
        const int row = lane >> 2, kq = (lane & 3) * 4;
        a[mi][0] = gather32<T, LDA, SWA>(A, kk + kq, mb + row, true);
        a[mi][1] = gather32<T, LDA, SWA>(A, kk + kq, mb + row + 8, true);
        a[mi][2] = gather32<T, LDA, SWA>(A, kk + kq + 16, mb + row, true);
        a[mi][3] = gather32<T, LDA, SWA>(A, kk + kq + 16, mb + row + 8, true);
      }
    }
#pragma unroll
    for (int ni = 0; ni < NI; ni += 2) {
      const int nb = n0 + ni * 8;
      if constexpr (NI % 2 == 0 && TB) {
        const int j = lane >> 3;
        const int r = nb + (j >> 1) * 8 + (lane & 7), c = kk + (j & 1) * HALF_K;
        u32 t[4];
        ldmatrix_x4(t, B + swz<LDB, EB, SWB>(r, c));
        b[ni][0] = t[0]; b[ni][1] = t[1]; b[ni + 1][0] = t[2]; b[ni + 1][1] = t[3];
      } else if constexpr (NI % 2 == 0 && !TB && EB == 2) {
        const int j = lane >> 3;
        const int r = kk + (j & 1) * 8 + (lane & 7), c = nb + (j >> 1) * 8;
        u32 t[4];
        ldmatrix_x4_trans(t, B + swz<LDB, EB, SWB>(r, c));
        b[ni][0] = t[0]; b[ni][1] = t[1]; b[ni + 1][0] = t[2]; b[ni + 1][1] = t[3];
      } else {
#pragma unroll
        for (int q = 0; q < 2 && ni + q < NI; ++q) {
          const int n = nb + q * 8 + (lane >> 2);
          const int kq = (lane & 3) * (4 / EB);
          if constexpr (TB) {
            b[ni + q][0] = gather32<T, LDB, SWB>(B, n, kk + kq, false);
            b[ni + q][1] = gather32<T, LDB, SWB>(B, n, kk + kq + HALF_K, false);
          } else {
            b[ni + q][0] = gather32<T, LDB, SWB>(B, kk + kq, n, true);
            b[ni + q][1] = gather32<T, LDB, SWB>(B, kk + kq + HALF_K, n, true);
          }
        }
      }
    }
  }
};

// Warp-tiled block GEMM C(MxN) += op(A) op(B) with A, B in (swizzled) shared memory and C in
// registers in the m16n8 accumulator layout: warp w = (warp_m, warp_n) = (w / WN_WARPS, w % WN_WARPS)
// owns rows warp_m*M/WM_WARPS.., cols warp_n*N/WN_WARPS..; acc[((mi*NI + ni)*2 + h)*2 + c].
// A is (M x K) row-major (TA: K x M), B is (K x N) row-major (TB: N x K). Operand fragments are
// double-buffered: the loads of k-step s+1 are issued before the MMAs of step s.
template <int M, int N, int K, int WM_WARPS, int WN_WARPS, bool TA, bool TB, typename T,
          int LDA, int LDB, bool SWA, bool SWB>
__device__ __forceinline__ void gemm_ss(const T* A, const T* B, typename MmaOp<T>::Acc* acc) {
  typedef GemmSS<M, N, K, WM_WARPS, WN_WARPS, TA, TB, T, LDA, LDB, SWA, SWB> G;
  constexpr int MI = G::MI, NI = G::NI, KS = G::KS, STEPS = K / KS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m0 = (warp / WN_WARPS) * G::WM, n0 = (warp % WN_WARPS) * G::WN;
  u32 a[2][MI][4];
  u32 b[2][NI][2];
  G::load(A, B, 0, lane, m0, n0, a[0], b[0]);
#pragma unroll
  for (int s = 0; s < STEPS; ++s) {
    if (s + 1 < STEPS) G::load(A, B, (s + 1) * KS, lane, m0, n0, a[(s + 1) & 1], b[(s + 1) & 1]);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
        MmaOp<T>::run(acc + (mi * NI + ni) * 4, a[s & 1][mi], b[s & 1][ni]);
  }
}

// Block GEMM with A in registers: A is a (M x K) fragment in the accumulator layout of the same
// warp grid (WM_WARPS x 1), e.g. a softmax tile cast to half (the FlashAttention-2 trick: the
// m16n8 accumulator of two adjacent n-atoms is exactly an m16n8k16 A operand). B as in gemm_ss.
template <int M, int N, int K, int WM_WARPS, bool TB, typename T, int LDB, bool SWB>
__device__ __forceinline__ void gemm_rs(const T* Areg, const T* B, typename MmaOp<T>::Acc* acc) {
  constexpr int WM = M / WM_WARPS, MI = WM / 16, NI = N / 8, NIA = K / 8;
  constexpr int EB = sizeof(T);
  const int lane = threadIdx.x & 31;
  const u32* a32 = reinterpret_cast<const u32*>(Areg);
#pragma unroll
  for (int kk = 0; kk < K; kk += 16) {
    const int s = kk / 16;
    u32 b[NI][2];
#pragma unroll
    for (int ni = 0; ni < NI; ni += 2) {
      const int nb = ni * 8;
      if constexpr (NI % 2 == 0 && TB) {
        const int j = lane >> 3;
        const int r = nb + (j >> 1) * 8 + (lane & 7), c = kk + (j & 1) * 8;
        u32 t[4];
        ldmatrix_x4(t, B + swz<LDB, EB, SWB>(r, c));
        b[ni][0] = t[0]; b[ni][1] = t[1]; b[ni + 1][0] = t[2]; b[ni + 1][1] = t[3];
      } else if constexpr (NI % 2 == 0 && !TB) {
        const int j = lane >> 3;
        const int r = kk + (j & 1) * 8 + (lane & 7), c = nb + (j >> 1) * 8;
        u32 t[4];
        ldmatrix_x4_trans(t, B + swz<LDB, EB, SWB>(r, c));
        b[ni][0] = t[0]; b[ni][1] = t[1]; b[ni + 1][0] = t[2]; b[ni + 1][1] = t[3];
      } else {
#pragma unroll
        for (int q = 0; q < 2 && ni + q < NI; ++q) {
          const int n = nb + q * 8 + (lane >> 2);
          const int kq = (lane & 3) * 2;
          if constexpr (TB) {
            b[ni + q][0] = gather32<T, LDB, SWB>(B, n, kk + kq, false);
            b[ni + q][1] = gather32<T, LDB, SWB>(B, n, kk + kq + 8, false);
          } else {
            b[ni + q][0] = gather32<T, LDB, SWB>(B, kk + kq, n, true);
            b[ni + q][1] = gather32<T, LDB, SWB>(B, kk + kq + 8, n, true);
          }
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      u32 a[4] = {a32[(mi * NIA + 2 * s) * 2], a32[(mi * NIA + 2 * s) * 2 + 1],
                  a32[(mi * NIA + 2 * s + 1) * 2], a32[(mi * NIA + 2 * s + 1) * 2 + 1]};
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
        MmaOp<T>::run(acc + (mi * NI + ni) * 4, a, b[ni]);
    }
  }
}

// 16-byte global -> shared asynchronous copy; when !pred the 16 bytes are zero-filled
// (src-size 0) and `src` is never read.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(smem_addr(dst)), "l"(src), "r"(pred ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// 16-byte vector copy between any memory spaces (both addresses 16-byte aligned).
__device__ __forceinline__ void copy16(void* dst, const void* src) {
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}
__device__ __forceinline__ void zero16(void* dst) {
  *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
}

template <typename T> __device__ __forceinline__ T shfl_xor(T v, int m) {
  if constexpr (sizeof(T) == 2) {
    unsigned short b = *reinterpret_cast<unsigned short*>(&v);
    b = (unsigned short)__shfl_xor_sync(0xffffffffu, (unsigned)b, m);
    return *reinterpret_cast<T*>(&b);
  } else {
    return __shfl_xor_sync(0xffffffffu, v, m);
  }
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// min / max where a NaN operand gives NaN (the language's semantics) in one instruction (sm_80+)
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// Atomic read-modify-write for every dtype; Op 0 add, 1 max, 2 min. 16-bit types go through
// a CAS on the enclosing aligned 32-bit word.
template <int Op, typename T> __device__ __forceinline__ T combine(T a, T b) {
  if constexpr (Op == 0) return a + b;
  else if constexpr (Op == 1) return a > b ? a : b;
  else return a < b ? a : b;
}
template <int Op, typename T> __device__ __forceinline__ void atomic(T* addr, T val) {
  if constexpr (Op == 0 && (sizeof(T) == 4 || std::is_same<T, double>::value)) {
    atomicAdd(addr, val);
  } else if constexpr (Op != 0 && sizeof(T) == 4 && (T(-1) < T(0)) && !(T(0.5) > T(0))) {
    if constexpr (Op == 1) atomicMax(reinterpret_cast<int*>(addr), (int)val);
    else atomicMin(reinterpret_cast<int*>(addr), (int)val);
  } else if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    typedef typename std::conditional<sizeof(T) == 4, unsigned int, unsigned long long>::type U;
    U* p = reinterpret_cast<U*>(addr);
    U old = *p, assumed;
    do {
      assumed = old;
      T cur = *reinterpret_cast<T*>(&assumed);
      T nxt = combine<Op, T>(cur, val);
      old = atomicCAS(p, assumed, *reinterpret_cast<U*>(&nxt));
    } while (assumed != old);
  } else {
    // 8- and 16-bit: CAS on the aligned 32-bit word holding the value
    size_t a = reinterpret_cast<size_t>(addr);
    unsigned int* w = reinterpret_cast<unsigned int*>(a & ~(size_t)3);
    const int shift = (int)(a & 3) * 8;
    const unsigned int mask = (sizeof(T) == 2 ? 0xffffu : 0xffu) << shift;
    unsigned int old = *w, assumed;
    do {
      assumed = old;
      unsigned int bits = (assumed & mask) >> shift;
      T cur;
      if constexpr (sizeof(T) == 2) { unsigned short s = (unsigned short)bits; cur = *reinterpret_cast<T*>(&s); }
      else { unsigned char s = (unsigned char)bits; cur = *reinterpret_cast<T*>(&s); }
      T nxt = combine<Op, T>(cur, val);
      unsigned int nb;
      if constexpr (sizeof(T) == 2) nb = *reinterpret_cast<unsigned short*>(&nxt);
      else nb = *reinterpret_cast<unsigned char*>(&nxt);
      old = atomicCAS(w, assumed, (assumed & ~mask) | (nb << shift));
    } while (assumed != old);
  }
}
}  // namespace tc
#endif
"""
