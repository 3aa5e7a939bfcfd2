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
/* The shortest decimal digits of `v` that read back as the same value of dtype
 * `kind` (16, 32, 64): digits (no point, no trailing zeros), their count, the
 * decimal exponent of the first. */
static int tc_shortest(double v, int32_t kind, char* digits, int* exp10) {
  int max_digits = kind == 64 ? 17 : kind == 32 ? 9 : 5;
  int mant_bits = kind == 64 ? 52 : kind == 32 ? 23 : 10;
  char sci[64];
  for (int p = 1; p <= max_digits; p++) {
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
  int nd = 0;
  const char* c = sci + (sci[0] == '-');
  for (; *c && *c != 'e'; c++) if (*c != '.') digits[nd++] = *c;
  *exp10 = atoi(c + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = 0;
  return nd;
}

/* numpy's str() of a float of dtype `kind` (16: float16, 32: float32, 64: float64, 0:
 * bfloat16, which ml_dtypes prints with %g): the shortest digits that read back
 * as the same value, positional between 1e-4 and 10**(3, 6, 16) else scientific.
 * `in_array`: numpy's array style, where an integral value ends in "." not ".0". */
static void tc_format_float(char* out, size_t size, double v, int32_t kind, int in_array) {
  if (isnan(v)) { snprintf(out, size, "nan"); return; }
  if (isinf(v)) { snprintf(out, size, v < 0 ? "-inf" : "inf"); return; }
  if (kind == 0) { snprintf(out, size, "%g", v); return; }
  char digits[32];
  int exp10, neg = signbit(v) != 0;
  int nd = tc_shortest(v, kind, digits, &exp10);
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
/* A printed buffer, numpy style. The elements are collected (per thread: blocks
 * print concurrently) with the brackets to open before each (its trailing
 * indices that are 0) and close after it (those at their end); the last one
 * formats them all, since numpy pads every float to the widest integer and
 * fraction parts. Not reproduced: numpy's line wrapping at 75 characters and
 * its summary of arrays over 1000 elements. */
typedef struct { double v; int64_t i; int32_t opened, closed; } tc_elem;
static __thread tc_elem* tc_elems = NULL;
static __thread int64_t tc_count = 0, tc_capacity = 0;

static void tc_push(double v, int64_t i, int32_t opened, int32_t closed) {
  if (tc_count == tc_capacity) {
    int64_t cap = tc_capacity ? 2 * tc_capacity : 256;
    tc_elem* grown = (tc_elem*)realloc(tc_elems, (size_t)cap * sizeof(tc_elem));
    if (!grown) return;
    tc_elems = grown; tc_capacity = cap;
  }
  tc_elem e; e.v = v; e.i = i; e.opened = opened; e.closed = closed;
  tc_elems[tc_count++] = e;
}

/* numpy's positional array element: shortest digits, at most 8 after the point. */
static void tc_array_float(char* out, size_t size, double v, int32_t kind) {
  tc_format_float(out, size, v, kind, 1);
  const char* dot = strchr(out, '.');
  if (dot && strlen(dot + 1) > 8) {
    snprintf(out, size, "%.8f", v);
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '0') out[--n] = 0;
  }
}

static void tc_flush_buffer(int32_t kind, int32_t is_float, int32_t ndim) {
  char text[80];
  int positional = 1;
  size_t left_w = 0, right_w = 0;
  if (is_float) {
    double lo = INFINITY, hi = 0;
    for (int64_t n = 0; n < tc_count; n++) {
      double a = fabs(tc_elems[n].v);
      if (isfinite(a) && a != 0) { if (a < lo) lo = a; if (a > hi) hi = a; }
    }
    if (hi >= 1e8 || (hi > 0 && (lo < 1e-4 || hi / lo > 1e3))) positional = 0;
    if (kind == 0) positional = 0;
    if (positional)
      for (int64_t n = 0; n < tc_count; n++) {
        if (!isfinite(tc_elems[n].v)) continue;
        tc_array_float(text, sizeof text, tc_elems[n].v, kind);
        const char* dot = strchr(text, '.');
        size_t l = dot ? (size_t)(dot - text) : strlen(text), r = dot ? strlen(dot + 1) : 0;
        if (l > left_w) left_w = l;
        if (r > right_w) right_w = r;
      }
    if (positional)
      for (int64_t n = 0; n < tc_count; n++)
        if (!isfinite(tc_elems[n].v)) {
          size_t l = strlen(isnan(tc_elems[n].v) ? "nan" : tc_elems[n].v < 0 ? "-inf" : "inf");
          if (l > left_w + 1 + right_w) left_w = l - 1 - right_w;
        }
  } else {
    for (int64_t n = 0; n < tc_count; n++) {
      size_t l = (size_t)snprintf(text, sizeof text, "%lld", (long long)tc_elems[n].i);
      if (l > left_w) left_w = l;
    }
  }
  int sci_digits = 0;
  size_t sci_width = 0;
  if (is_float && !positional && kind != 0) {
    char digits[32];
    int exp10;
    for (int64_t n = 0; n < tc_count; n++)
      if (isfinite(tc_elems[n].v)) {
        int nd = tc_shortest(tc_elems[n].v, kind, digits, &exp10);
        if (nd - 1 > sci_digits) sci_digits = nd - 1 > 8 ? 8 : nd - 1;
      }
    for (int64_t n = 0; n < tc_count; n++) {
      size_t l = 3;
      if (isfinite(tc_elems[n].v)) {
        l = (size_t)snprintf(text, sizeof text, "%.*e", sci_digits, tc_elems[n].v) + (sci_digits == 0);
      } else if (tc_elems[n].v < 0) l = 4;
      if (l > sci_width) sci_width = l;
    }
  }
  for (int64_t n = 0; n < tc_count; n++) {
    tc_elem e = tc_elems[n];
    if (n > 0 && e.opened > 0) for (int32_t k = 0; k < ndim - e.opened; k++) printf(" ");
    for (int32_t k = 0; k < e.opened; k++) printf("[");
    if (!is_float) printf("%*lld", (int)left_w, (long long)e.i);
    else if (!positional && kind != 0) {
      /* numpy's scientific array mode: every element with the same number of digits */
      if (isfinite(e.v)) {
        snprintf(text, sizeof text, "%.*e", sci_digits, e.v);
        if (sci_digits == 0) { char* x = strchr(text, 'e'); memmove(x + 1, x, strlen(x) + 1); *x = '.'; }
        printf("%*s", (int)sci_width, text);
      } else {
        printf("%*s", (int)sci_width, isnan(e.v) ? "nan" : e.v < 0 ? "-inf" : "inf");
      }
    }
    else if (!positional) { tc_format_float(text, sizeof text, e.v, kind, 1); printf("%s", text); }
    else if (!isfinite(e.v)) printf("%*s", (int)(left_w + 1 + right_w), isnan(e.v) ? "nan" : e.v < 0 ? "-inf" : "inf");
    else {
      tc_array_float(text, sizeof text, e.v, kind);
      const char* dot = strchr(text, '.');
      size_t l = dot ? (size_t)(dot - text) : strlen(text), r = dot ? strlen(dot + 1) : 0;
      printf("%*s%s%*s", (int)(left_w - l), "", text, (int)(right_w - r), "");
    }
    for (int32_t k = 0; k < e.closed; k++) printf("]");
    if (e.closed == 0) printf(" ");
    else if (n + 1 < tc_count) for (int32_t k = 0; k < e.closed; k++) printf("\n");
  }
  printf("\n");
  fflush(stdout);
  tc_count = 0;
}

int32_t tilecore_cpu_print_elem_float(double v, int32_t kind, int32_t opened, int32_t closed, int32_t ndim) {
  tc_push(v, 0, opened, closed);
  if (closed >= ndim) tc_flush_buffer(kind, 1, ndim);
  return 0;
}
int32_t tilecore_cpu_print_elem_int(int64_t v, int32_t opened, int32_t closed, int32_t ndim) {
  tc_push(0, v, opened, closed);
  if (closed >= ndim) tc_flush_buffer(0, 0, ndim);
  return 0;
}

#ifdef __cplusplus
}
#endif
