#include <stdio.h>
#include <time.h>
#include <immintrin.h>
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
#define N 12
__attribute__((noinline)) __m512 fma_tp(long n, __m512 x, __m512 y){ __m512 a[N]; for(int i=0;i<N;i++)a[i]=_mm512_set1_ps(i);
 for(long r=0;r<n;r++){ for(int i=0;i<N;i++) a[i]=_mm512_fmadd_ps(x,y,a[i]); __asm__ volatile("" : "+v"(x)); }
 __m512 s=a[0]; for(int i=1;i<N;i++) s=_mm512_add_ps(s,a[i]); return s;}
__attribute__((noinline)) __m512 dp_tp(long n, __m512 x, __m512 y){ __m512 a[N]; for(int i=0;i<N;i++)a[i]=_mm512_set1_ps(i);
 for(long r=0;r<n;r++){ for(int i=0;i<N;i++) a[i]=_mm512_dpbf16_ps(a[i],(__m512bh)_mm512_castps_si512(x),(__m512bh)_mm512_castps_si512(y)); __asm__ volatile("" : "+v"(x)); }
 __m512 s=a[0]; for(int i=1;i<N;i++) s=_mm512_add_ps(s,a[i]); return s;}
int main(){ long n=20000000; __m512 x=_mm512_set1_ps(1e-3f), y=_mm512_set1_ps(1e-3f);
 double t=now(); __m512 s=fma_tp(n,x,y); t=now()-t; printf("fma: %.2f G instr/s (%.1f GMAC/s)\n", n*N/t/1e9, n*N*16/t/1e9);
 t=now(); s=_mm512_add_ps(s,dp_tp(n,x,y)); t=now()-t; printf("dpbf16: %.2f G instr/s (%.1f GMAC/s)\n", n*N/t/1e9, n*N*32/t/1e9);
 float o[16]; _mm512_storeu_ps(o,s); return o[0]==12345;}
