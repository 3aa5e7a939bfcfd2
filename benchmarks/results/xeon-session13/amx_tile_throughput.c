#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <immintrin.h>
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct { uint8_t palette, start; uint8_t r[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
int main(){
  long rc = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); printf("perm rc %ld\n", rc);
  cfg_t c; memset(&c,0,sizeof c); c.palette=1;
  for(int t=0;t<4;t++){c.rows[t]=16;c.colsb[t]=64;}      /* C tiles 16x16 fp32 */
  for(int t=4;t<6;t++){c.rows[t]=16;c.colsb[t]=64;}      /* A tiles 16 rows x 32 bf16 */
  for(int t=6;t<8;t++){c.rows[t]=16;c.colsb[t]=64;}      /* B tiles 16 pair-rows x 16 cols x 2 */
  _tile_loadconfig(&c);
  static uint16_t A[2][16*32], B[16*64]; static float C[4][256];
  for(int i=0;i<16*32;i++){A[0][i]=A[1][i]=0x3f80;} for(int i=0;i<16*64;i++)B[i]=0x3c00;
  _tile_zero(0);_tile_zero(1);_tile_zero(2);_tile_zero(3);
  long n=2000000; double t=now();
  for(long r=0;r<n;r++){
    _tile_loadd(4, A[0], 64); _tile_loadd(5, A[1], 64);
    _tile_loadd(6, B, 128); _tile_loadd(7, B+32, 128);
    _tile_dpbf16ps(0,4,6); _tile_dpbf16ps(1,4,7); _tile_dpbf16ps(2,5,6); _tile_dpbf16ps(3,5,7);
  }
  t=now()-t;
  _tile_stored(0, C[0], 64);
  _tile_release();
  printf("AMX: %.1f GMAC/s  (C %g)\n", (double)n*4*16*16*32/t/1e9, C[0][0]);
}
