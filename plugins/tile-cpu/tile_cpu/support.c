/* Run-time helpers linked into every tile-cpu kernel library.
 *
 * Atomics: blocks run in parallel on TVM's thread pool, so T.atomic_* must be
 * real atomic read-modify-writes. Integers use the compiler's atomic builtins
 * (fetch_add, or a compare-and-swap loop for max/min); floats use a
 * compare-and-swap loop on the bit pattern. max/min propagate NaN like numpy.
 * Printing: T.print writes "[block (b0, b1)] msg: value" like the reference
 * interpreter and flushes, so the order with Python output is kept.
 *
 * Plain C that compiles as C++ too (TVM links with g++); no x86-only code.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline float tc_bf16_to_f32(uint16_t b) {
  uint32_t u = ((uint32_t)b) << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t tc_f32_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}
static inline float tc_f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0) {
    if (m == 0) { u = s; }
    else { /* subnormal */
      e = 127 - 15 + 1;
      while ((m & 0x400u) == 0) { m <<= 1; e--; }
      m &= 0x3ffu; u = s | (e << 23) | (m << 13);
    }
  } else if (e == 31) { u = s | 0x7f800000u | (m << 13); }
  else { u = s | ((e + 127 - 15) << 23) | (m << 13); }
  float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t tc_f32_to_f16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u); /* rounds to inf */
  if (a < 0x38800000u) { /* result is subnormal or zero */
    float af; memcpy(&af, &a, 4);
    /* 2^-24 is the unit of a float16 subnormal: nearbyint rounds half to even */
    uint32_t q = (uint32_t)nearbyintf(af * 16777216.0f);
    return (uint16_t)(s | q);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
  return (uint16_t)(s | (r >> 13));
}

static inline float tc_fmax(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }
static inline float tc_fmin(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }
static inline double tc_dmax(double a, double b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }
static inline double tc_dmin(double a, double b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }
static inline float tc_fadd(float a, float b) { return a + b; }
static inline double tc_dadd(double a, double b) { return a + b; }

#define TC_FLOAT_ATOMIC(NAME, T, U, OP)                                                  \
  int32_t tilecore_cpu_atomic_##NAME(T* p, T v) {                                          \
    U* q = (U*)p;                                                                          \
    U old = __atomic_load_n(q, __ATOMIC_RELAXED);                                          \
    for (;;) {                                                                             \
      T cur, nv; U nb;                                                                     \
      memcpy(&cur, &old, sizeof(T)); nv = OP(cur, v); memcpy(&nb, &nv, sizeof(T));        \
      if (__atomic_compare_exchange_n(q, &old, nb, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
        return 0;                                                                          \
    }                                                                                      \
  }
TC_FLOAT_ATOMIC(add_float32, float, uint32_t, tc_fadd)
TC_FLOAT_ATOMIC(max_float32, float, uint32_t, tc_fmax)
TC_FLOAT_ATOMIC(min_float32, float, uint32_t, tc_fmin)
TC_FLOAT_ATOMIC(add_float64, double, uint64_t, tc_dadd)
TC_FLOAT_ATOMIC(max_float64, double, uint64_t, tc_dmax)
TC_FLOAT_ATOMIC(min_float64, double, uint64_t, tc_dmin)

/* 16-bit floats: the value arrives as float32; the update is rounded once to the storage type. */
#define TC_HALF_ATOMIC(NAME, TO32, FROM32, OP)                                             \
  int32_t tilecore_cpu_atomic_##NAME(uint16_t* p, float v) {                               \
    uint16_t old = __atomic_load_n(p, __ATOMIC_RELAXED);                                   \
    for (;;) {                                                                             \
      uint16_t nb = FROM32(OP(TO32(old), v));                                              \
      if (__atomic_compare_exchange_n(p, &old, nb, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
        return 0;                                                                          \
    }                                                                                      \
  }
TC_HALF_ATOMIC(add_float16, tc_f16_to_f32, tc_f32_to_f16, tc_fadd)
TC_HALF_ATOMIC(max_float16, tc_f16_to_f32, tc_f32_to_f16, tc_fmax)
TC_HALF_ATOMIC(min_float16, tc_f16_to_f32, tc_f32_to_f16, tc_fmin)
TC_HALF_ATOMIC(add_bfloat16, tc_bf16_to_f32, tc_f32_to_bf16, tc_fadd)
TC_HALF_ATOMIC(max_bfloat16, tc_bf16_to_f32, tc_f32_to_bf16, tc_fmax)
TC_HALF_ATOMIC(min_bfloat16, tc_bf16_to_f32, tc_f32_to_bf16, tc_fmin)

/* Integers wrap around like numpy's fixed-width arithmetic. */
#define TC_INT_ATOMIC(SUFFIX, T)                                                           \
  int32_t tilecore_cpu_atomic_add_##SUFFIX(T* p, T v) {                                    \
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED); return 0;                                  \
  }                                                                                        \
  int32_t tilecore_cpu_atomic_max_##SUFFIX(T* p, T v) {                                    \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                          \
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED,       \
                                                   __ATOMIC_RELAXED)) {}                   \
    return 0;                                                                              \
  }                                                                                        \
  int32_t tilecore_cpu_atomic_min_##SUFFIX(T* p, T v) {                                    \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                          \
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED,       \
                                                   __ATOMIC_RELAXED)) {}                   \
    return 0;                                                                              \
  }
TC_INT_ATOMIC(int8, int8_t)
TC_INT_ATOMIC(uint8, uint8_t)
TC_INT_ATOMIC(int16, int16_t)
TC_INT_ATOMIC(int32, int32_t)
TC_INT_ATOMIC(int64, int64_t)

/* ---- dynamic block scheduling: each worker takes the next block number until none is left,
 * so a worker that the OS preempts (shared machines, hybrid cores) does not hold up the grid. */
int32_t tilecore_cpu_next_block(int32_t* counter) {
  return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* ---- T.print */
static void tc_head(const char* msg, int32_t nblock, int32_t b0, int32_t b1, int32_t b2) {
  if (nblock <= 1) printf("[block (%d,)]", b0);
  else if (nblock == 2) printf("[block (%d, %d)]", b0, b1);
  else printf("[block (%d, %d, %d)]", b0, b1, b2);
  if (msg && msg[0]) printf(" %s", msg);
  printf(":");
}
int32_t tilecore_cpu_print_float(const char* msg, int32_t nblock, int32_t b0, int32_t b1, int32_t b2,
                                 double v) {
  tc_head(msg, nblock, b0, b1, b2); printf(" %.9g\n", v); fflush(stdout); return 0;
}
int32_t tilecore_cpu_print_int(const char* msg, int32_t nblock, int32_t b0, int32_t b1, int32_t b2,
                               int64_t v) {
  tc_head(msg, nblock, b0, b1, b2); printf(" %lld\n", (long long)v); fflush(stdout); return 0;
}
int32_t tilecore_cpu_print_bool(const char* msg, int32_t nblock, int32_t b0, int32_t b1, int32_t b2,
                                int32_t v) {
  tc_head(msg, nblock, b0, b1, b2); printf(" %s\n", v ? "True" : "False"); fflush(stdout); return 0;
}
/* A whole buffer: its name, then the elements row by row (the last axis on one line). */
int32_t tilecore_cpu_print_buffer_head(const char* msg, int32_t nblock, int32_t b0, int32_t b1,
                                       int32_t b2, const char* name) {
  tc_head(msg, nblock, b0, b1, b2); printf("\n%s =\n", name); return 0;
}
int32_t tilecore_cpu_print_elem_float(double v, int32_t last) {
  printf(last ? "%.9g\n" : "%.9g ", v); if (last) fflush(stdout); return 0;
}
int32_t tilecore_cpu_print_elem_int(int64_t v, int32_t last) {
  printf(last ? "%lld\n" : "%lld ", (long long)v); if (last) fflush(stdout); return 0;
}

#ifdef __cplusplus
}
#endif
