/* GEMM micro-kernels on x86 matrix and dot-product instructions: Intel AMX for bfloat16 (TDPBF16PS)
 * and int8 (TDPBSSD), AVX-512 VNNI for int8 (VPDPBUSD, last in this file), linked into a tile-cpu
 * kernel library only when it calls one, and called only where the target has the kind's features
 * (tile_cpu/dot_gemm.py).
 *
 * Why C: TVM's LLVM pipeline widens every bfloat16 value to float32 before code generation and
 * TIR has no tile registers, so the tile instructions cannot be reached from TIR. The packing
 * loops stay in TIR; each call is one block of C (32 x 32 on AMX), over kb steps of k (32 for
 * bfloat16, 64 for int8: a tile row is 64 bytes).
 *
 * int8 (tilecore_cpu_amx_s8_block): a [kb][32 rows][64 k], b [kb][16 quads][32 columns][4]
 * (B[64 q + 4 p + t, j] at [q][p][j][t]), C int32 (mode 0 accumulate, 1 start from 0); the sums
 * are exact, so they equal every other order's.
 *
 * bfloat16 operands (uint16 bfloat16 bits, packed by the caller; past the edges: zeros):
 *   a: one A panel, [kb][32 rows][32 k]: A[i, 32 q + k] at [q][i][k]
 *   b: one B panel, [kb][16 pairs][32 columns][2]: B[32 q + 2 p + t, j] at [q][p][j][t]
 * C block: rows x cols (at most 32 x 32) at c, ldc elements per row;
 *   mode 0: C is float32 and holds partial sums (accumulate into it),
 *   mode 1: C is float32, start from 0,
 *   mode 2: C is bfloat16, start from 0 and round once, to nearest even (NaN stays a quiet NaN),
 *           as tile-cpu's other bfloat16 stores do.
 * Four 16 x 16 float32 accumulator tiles (tmm0-3), two A tiles (tmm4-5), two B tiles (tmm6-7).
 * TDPBF16PS multiplies bfloat16 pairs exactly and adds them to float32 sums, rounding to nearest
 * even; it treats subnormal inputs and results as zero.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TC_ARCH_REQ_XCOMP_PERM 0x1023
#define TC_XFEATURE_XTILEDATA 18

typedef struct {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tc_tile_config;

/* Linux hands a process the AMX tile state only on request (once per process; idempotent). */
static int tc_amx_permitted(void) {
#ifdef TC_AMX_REFUSED /* tests: the path of a process that is refused */
  return 0;
#endif
  static volatile int state = 0; /* 0 unknown, 1 granted, -1 refused */
  if (state == 0) state = syscall(SYS_arch_prctl, TC_ARCH_REQ_XCOMP_PERM, TC_XFEATURE_XTILEDATA) == 0 ? 1 : -1;
  return state == 1;
}

static inline uint16_t tc_round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u | 0x00400000u) >> 16);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float tc_bf16(uint16_t x) {
  uint32_t u = (uint32_t)x << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The same sums without tile instructions (a process the operating system refuses the tile state:
 * slower, right to float32 rounding, subnormals kept). */
static void tc_sums_without_tiles(const uint16_t* a, const uint16_t* b, float block[32][32], int32_t kb) {
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 32; ++j) {
      float s = block[i][j];
      for (int32_t q = 0; q < kb; ++q)
        for (int p = 0; p < 16; ++p)
          for (int t = 0; t < 2; ++t)
            s += tc_bf16(a[((int64_t)q * 32 + i) * 32 + 2 * p + t]) * tc_bf16(b[(((int64_t)q * 16 + p) * 32 + j) * 2 + t]);
      block[i][j] = s;
    }
}

/* C's 32 x 32 block of 4-byte sums (float32 or int32) in four accumulator tiles: configure the
 * eight tiles (16 rows of 64 bytes each) and load the block, 128 bytes per row. */
static void tc_tiles_open(void* block) {
  tc_tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  /* GCC does not see that LDTILECFG reads cfg and dropped the stores above: a memory barrier */
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
  _tile_loadd(0, (char*)block, 128);
  _tile_loadd(1, (char*)block + 64, 128);
  _tile_loadd(2, (char*)block + 16 * 128, 128);
  _tile_loadd(3, (char*)block + 16 * 128 + 64, 128);
}

static void tc_tiles_close(void* block) {
  _tile_stored(0, (char*)block, 128);
  _tile_stored(1, (char*)block + 64, 128);
  _tile_stored(2, (char*)block + 16 * 128, 128);
  _tile_stored(3, (char*)block + 16 * 128 + 64, 128);
  _tile_release();
}

/* kb steps of the multiply DP: a step of an A panel is 32 rows of 64 bytes (two 16-row A tiles),
 * of a B panel 16 rows of 128 bytes (two B tiles of 64 bytes side by side). */
#define TC_TILE_STEPS(a, b, kb, DP)                             \
  for (int32_t q = 0; q < (kb); ++q) {                          \
    const char* aq = (const char*)(a) + (int64_t)q * 2048;      \
    const char* bq = (const char*)(b) + (int64_t)q * 2048;      \
    _tile_loadd(4, aq, 64);                                     \
    _tile_loadd(5, aq + 1024, 64);                              \
    _tile_loadd(6, bq, 128);                                    \
    _tile_loadd(7, bq + 64, 128);                               \
    DP(0, 4, 6);                                                \
    DP(1, 4, 7);                                                \
    DP(2, 5, 6);                                                \
    DP(3, 5, 7);                                                \
  }

/* rows x cols of C (4-byte elements, ldc apart) into the zeroed block, or back */
static void tc_block_in(uint32_t block[32][32], const void* c, int64_t ldc, int32_t rows, int32_t cols) {
  for (int i = 0; i < rows; ++i) memcpy(block[i], (const uint32_t*)c + i * ldc, (size_t)cols * 4);
}
static void tc_block_out(uint32_t block[32][32], void* c, int64_t ldc, int32_t rows, int32_t cols) {
  for (int i = 0; i < rows; ++i) memcpy((uint32_t*)c + i * ldc, block[i], (size_t)cols * 4);
}

int32_t tilecore_cpu_amx_bf16_block(const uint16_t* a, const uint16_t* b, void* c, int64_t ldc, int32_t kb,
                                    int32_t rows, int32_t cols, int32_t mode) {
  union {
    float f[32][32];
    uint32_t u[32][32];
  } block;
  memset(&block, 0, sizeof block);
  if (mode == 0) tc_block_in(block.u, c, ldc, rows, cols);
  if (tc_amx_permitted()) {
    tc_tiles_open(block.f);
    TC_TILE_STEPS(a, b, kb, _tile_dpbf16ps)
    tc_tiles_close(block.f);
  } else {
    tc_sums_without_tiles(a, b, block.f, kb);
  }
  if (mode != 2) {
    tc_block_out(block.u, c, ldc, rows, cols);
    return 0;
  }
  for (int i = 0; i < rows; ++i) {
    uint16_t* ch = (uint16_t*)c + i * ldc;
    for (int j = 0; j < cols; ++j) ch[j] = tc_round_bf16(block.f[i][j]);
  }
  return 0;
}

static void tc_s8_sums_without_tiles(const int8_t* a, const int8_t* b, int32_t block[32][32], int32_t kb) {
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 32; ++j) {
      int32_t s = block[i][j];
      for (int32_t q = 0; q < kb; ++q)
        for (int p = 0; p < 16; ++p)
          for (int t = 0; t < 4; ++t)
            s += (int32_t)a[((int64_t)q * 32 + i) * 64 + 4 * p + t] * (int32_t)b[(((int64_t)q * 16 + p) * 32 + j) * 4 + t];
      block[i][j] = s;
    }
}

int32_t tilecore_cpu_amx_s8_block(const int8_t* a, const int8_t* b, int32_t* c, int64_t ldc, int32_t kb, int32_t rows,
                                  int32_t cols, int32_t mode) {
  union {
    int32_t i[32][32];
    uint32_t u[32][32];
  } block;
  memset(&block, 0, sizeof block);
  if (mode == 0) tc_block_in(block.u, c, ldc, rows, cols);
  if (tc_amx_permitted()) {
    tc_tiles_open(block.i);
    TC_TILE_STEPS(a, b, kb, _tile_dpbssd)
    tc_tiles_close(block.i);
  } else {
    tc_s8_sums_without_tiles(a, b, block.i, kb);
  }
  tc_block_out(block.u, c, ldc, rows, cols);
  return 0;
}

/* int8 on AVX-512 VNNI (hosts without AMX): VPDPBUSD multiplies unsigned bytes by signed bytes,
 * four per 32-bit lane. A is packed with 128 added (a ^ 0x80, unsigned), so the sum over k of
 * (a + 128) * b is corrected by 128 * (the sum over k of b), computed in the same loop with the
 * byte 0x80 as A (tc_vnni_s8_block). a [kb][12 rows][64 k] (uint8), b as for AMX; C int32, a
 * 12 x 32 block of 24 zmm sums; exact. */
__attribute__((target("avx512f,avx512bw,avx512vnni")))
int32_t tilecore_cpu_vnni_s8_block(const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc, int32_t kb,
                                   int32_t rows, int32_t cols, int32_t mode) {
  __m512i acc[12][2], corr0 = _mm512_setzero_si512(), corr1 = _mm512_setzero_si512();
  const __m512i bias = _mm512_set1_epi32((int32_t)0x80808080u);
  const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1u);
  const __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1u);
  for (int i = 0; i < 12; ++i) {
    const int load = mode == 0 && i < rows;
    acc[i][0] = load ? _mm512_maskz_loadu_epi32(m0, c + i * ldc) : _mm512_setzero_si512();
    acc[i][1] = load ? _mm512_maskz_loadu_epi32(m1, c + i * ldc + 16) : _mm512_setzero_si512();
  }
  for (int32_t q = 0; q < kb; ++q)
    for (int p = 0; p < 16; ++p) {
      const int8_t* bq = b + ((int64_t)q * 16 + p) * 128;
      const __m512i b0 = _mm512_loadu_si512((const void*)bq), b1 = _mm512_loadu_si512((const void*)(bq + 64));
      corr0 = _mm512_dpbusd_epi32(corr0, bias, b0);
      corr1 = _mm512_dpbusd_epi32(corr1, bias, b1);
      const uint8_t* aq = a + (int64_t)q * 12 * 64 + 4 * p;
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) {
        int32_t quad;
        memcpy(&quad, aq + i * 64, 4);
        const __m512i ai = _mm512_set1_epi32(quad);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ai, b0);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], ai, b1);
      }
    }
  for (int i = 0; i < rows; ++i) {
    _mm512_mask_storeu_epi32(c + i * ldc, m0, _mm512_sub_epi32(acc[i][0], corr0));
    _mm512_mask_storeu_epi32(c + i * ldc + 16, m1, _mm512_sub_epi32(acc[i][1], corr1));
  }
  return 0;
}

#ifdef __cplusplus
}
#endif
