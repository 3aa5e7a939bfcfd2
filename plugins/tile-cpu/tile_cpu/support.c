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
#include <stdlib.h>
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
/* numpy's str() of a float of dtype `kind` (16: float16, 32: float32, 64: float64, 0:
 * bfloat16, which ml_dtypes prints with %g): the shortest digits that read back
 * as the same value, positional between 1e-4 and 10**(3, 6, 16) else scientific.
 * `in_array`: numpy's array style, where an integral value ends in "." not ".0". */
static void tc_format_float(char* out, size_t size, double v, int32_t kind, int in_array) {
  if (isnan(v)) { snprintf(out, size, "nan"); return; }
  if (isinf(v)) { snprintf(out, size, v < 0 ? "-inf" : "inf"); return; }
  if (kind == 0) { snprintf(out, size, "%g", v); return; }
  int max_digits = kind == 64 ? 17 : kind == 32 ? 9 : 5;
  int mant_bits = kind == 64 ? 52 : kind == 32 ? 23 : 10;
  char sci[64];
  int p = 1;
  for (; p <= max_digits; p++) {
    snprintf(sci, sizeof sci, "%.*e", p - 1, v);
    double back = strtod(sci, NULL);
    int same;
    if (kind == 64) same = back == v;
    else if (kind == 32) same = (float)back == (float)v;
    else {  /* float16: within half an ulp (exponent floor -14: subnormals) */
      int e; frexp(v, &e);
      if (e - 1 < -14) e = -13;
      same = fabs(back - v) <= ldexp(1.0, e - 1 - mant_bits) / 2;
    }
    if (same) break;
  }
  /* sci is "[-]d.ddde[+-]XX": digits and exponent */
  char digits[32]; int nd = 0, neg = sci[0] == '-';
  const char* c = sci + neg;
  for (; *c && *c != 'e'; c++) if (*c != '.') digits[nd++] = *c;
  int exp10 = atoi(c + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = 0;
  double a = fabs(v), limit = kind == 64 ? 1e16 : kind == 32 ? 1e6 : 1e3;
  char* o = out; size_t left = size;
#define TC_PUT(...) do { int w = snprintf(o, left, __VA_ARGS__); if (w > 0 && (size_t)w < left) { o += w; left -= w; } } while (0)
  if (neg) TC_PUT("-");
  if (v == 0 || (a >= 1e-4 && a < limit)) {
    if (exp10 >= 0) {
      for (int k = 0; k <= exp10; k++) TC_PUT("%c", k < nd ? digits[k] : '0');
      TC_PUT(".");
      if (nd > exp10 + 1) TC_PUT("%s", digits + exp10 + 1);
      else if (!in_array) TC_PUT("0");
    } else {
      TC_PUT("0.");
      for (int k = 0; k < -exp10 - 1; k++) TC_PUT("0");
      TC_PUT("%s", digits);
    }
  } else {
    TC_PUT("%c", digits[0]);
    if (nd > 1) TC_PUT(".%s", digits + 1);
    TC_PUT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  }
#undef TC_PUT
}
int32_t tilecore_cpu_print_float(const char* msg, int32_t nblock, int32_t b0, int32_t b1, int32_t b2,
                                 double v, int32_t kind) {
  char text[80];
  tc_format_float(text, sizeof text, v, kind, 0);
  tc_head(msg, nblock, b0, b1, b2); printf(" %s\n", text); fflush(stdout); return 0;
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
/* One element of a printed buffer, numpy style: `opened` brackets open before it
 * (its trailing indices that are 0), `closed` close after it (those at their end). */
static void tc_elem_prefix(int32_t opened, int32_t ndim, int32_t first) {
  if (!first && opened > 0) for (int32_t k = 0; k < ndim - opened; k++) printf(" ");
  for (int32_t k = 0; k < opened; k++) printf("[");
}
static void tc_elem_suffix(int32_t closed, int32_t ndim) {
  for (int32_t k = 0; k < closed; k++) printf("]");
  if (closed == 0) printf(" ");
  else if (closed >= ndim) { printf("\n"); fflush(stdout); }
  else for (int32_t k = 0; k < closed; k++) printf("\n");
}
int32_t tilecore_cpu_print_elem_float(double v, int32_t kind, int32_t opened, int32_t closed, int32_t ndim) {
  char text[80];
  tc_format_float(text, sizeof text, v, kind, 1);
  tc_elem_prefix(opened, ndim, opened >= ndim);
  printf("%s", text);
  tc_elem_suffix(closed, ndim);
  return 0;
}
int32_t tilecore_cpu_print_elem_int(int64_t v, int32_t opened, int32_t closed, int32_t ndim) {
  tc_elem_prefix(opened, ndim, opened >= ndim);
  printf("%lld", (long long)v);
  tc_elem_suffix(closed, ndim);
  return 0;
}

#ifdef __cplusplus
}
#endif
