// Function: main_kernel
#include <metal_stdlib>
using namespace metal;

union __TVMArgUnion {
 int v_int[2];
};

kernel void main_kernel(  device float* Bias_ptr [[ buffer(0) ]],
  device float* W_ptr [[ buffer(1) ]],
  device float* X_ptr [[ buffer(2) ]],
  device float* Y_ptr [[ buffer(3) ]],
  uint blockIdx [[threadgroup_position_in_grid]],
  uint threadIdx [[thread_position_in_threadgroup]]
) {
  thread float4 xh[2];
  thread float x[8];
  threadgroup float reduce_scratch[2];
  thread float mean[1];
  thread float sq[8];
  thread float rstd[1];
  thread float4 w[2];
  thread float4 b[2];
  thread float v[1];
  thread float v_1[2];
  thread float v_2[1];
  thread float v_3[2];
  int cse_v1 = (((int)blockIdx) * 4096);
  int cse_v2 = (((int)threadIdx) * 4);
  int cse_v5 = ((((int)blockIdx) * 4096) + (((int)threadIdx) * 4));
  xh[0] = *(device float4*)(X_ptr + ((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)));
  xh[1] = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 256));
  for (int v_4 = 0; v_4 < 8; ++v_4) {
    x[0] = (xh[0])[0];
    x[1] = (xh[0])[1];
    x[2] = (xh[0])[2];
    x[3] = (xh[0])[3];
    x[4] = (xh[1])[0];
    x[5] = (xh[1])[1];
    x[6] = (xh[1])[2];
    x[7] = (xh[1])[3];
    int cse_v12 = (((((int)blockIdx) * 4096) + (v_4 * 512)) + (((int)threadIdx) * 4));
    if (v_4 < 7) {
      xh[0] = *(device float4*)(X_ptr + ((((((int)blockIdx) * 4096) + (v_4 * 512)) + (((int)threadIdx) * 4)) + 512));
      xh[1] = *(device float4*)(X_ptr + ((((((int)blockIdx) * 4096) + (v_4 * 512)) + (((int)threadIdx) * 4)) + 768));
    }
    v[0] = 0.000000e+00f;
    v_1[0] = (x[0] + x[1]);
    v_1[1] = (x[2] + x[3]);
    v_1[0] = (v_1[0] + v_1[1]);
    v[0] = (v[0] + v_1[0]);
    v_1[0] = (x[4] + x[5]);
    v_1[1] = (x[6] + x[7]);
    v_1[0] = (v_1[0] + v_1[1]);
    v[1] = (v[1] + v_1[0]);
    int cse_v3 = (((int)threadIdx) & 31);
    int cse_v6 = ((((int)threadIdx) & 31) ^ 16);
    float v_5 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 16));
    v[0] = (v[0] + v_5);
    int cse_v7 = ((((int)threadIdx) & 31) ^ 8);
    float v_6 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 8));
    v[0] = (v[0] + v_6);
    int cse_v8 = ((((int)threadIdx) & 31) ^ 4);
    float v_7 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 4));
    v[0] = (v[0] + v_7);
    int cse_v9 = ((((int)threadIdx) & 31) ^ 2);
    float v_8 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 2));
    v[0] = (v[0] + v_8);
    int cse_v10 = ((((int)threadIdx) & 31) ^ 1);
    float v_9 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 1));
    v[0] = (v[0] + v_9);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v4 = (((int)threadIdx) >> 5);
    if ((((int)threadIdx) % 32) == 0) {
      reduce_scratch[(((int)threadIdx) >> 5)] = v[0];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v[0] = reduce_scratch[0];
    v[0] = (v[0] + reduce_scratch[1]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    mean[0] = v[0];
    x[0] = (x[0] - (mean[0] / 5.120000e+02f));
    sq[0] = (x[0] * x[0]);
    x[1] = (x[1] - (mean[0] / 5.120000e+02f));
    sq[1] = (x[1] * x[1]);
    x[2] = (x[2] - (mean[0] / 5.120000e+02f));
    sq[2] = (x[2] * x[2]);
    x[3] = (x[3] - (mean[0] / 5.120000e+02f));
    sq[3] = (x[3] * x[3]);
    x[4] = (x[4] - (mean[1] / 5.120000e+02f));
    sq[4] = (x[4] * x[4]);
    x[5] = (x[5] - (mean[1] / 5.120000e+02f));
    sq[5] = (x[5] * x[5]);
    x[6] = (x[6] - (mean[1] / 5.120000e+02f));
    sq[6] = (x[6] * x[6]);
    x[7] = (x[7] - (mean[1] / 5.120000e+02f));
    sq[7] = (x[7] * x[7]);
    v_2[0] = 0.000000e+00f;
    v_3[0] = (sq[0] + sq[1]);
    v_3[1] = (sq[2] + sq[3]);
    v_3[0] = (v_3[0] + v_3[1]);
    v_2[0] = (v_2[0] + v_3[0]);
    v_3[0] = (sq[4] + sq[5]);
    v_3[1] = (sq[6] + sq[7]);
    v_3[0] = (v_3[0] + v_3[1]);
    v_2[1] = (v_2[1] + v_3[0]);
    float v_10 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 16));
    v_2[0] = (v_2[0] + v_10);
    float v_11 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 8));
    v_2[0] = (v_2[0] + v_11);
    float v_12 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 4));
    v_2[0] = (v_2[0] + v_12);
    float v_13 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 2));
    v_2[0] = (v_2[0] + v_13);
    float v_14 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 1));
    v_2[0] = (v_2[0] + v_14);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((((int)threadIdx) % 32) == 0) {
      reduce_scratch[(((int)threadIdx) >> 5)] = v_2[0];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v_2[0] = reduce_scratch[0];
    v_2[0] = (v_2[0] + reduce_scratch[1]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    rstd[0] = v_2[0];
    rstd[0] = (1.000000e+00f / sqrt(((rstd[0] / 5.120000e+02f) + 1.000000e-05f)));
    w[0] = *(device float4*)(W_ptr + (((int)threadIdx) * 4));
    int cse_v11 = ((((int)threadIdx) * 4) + 256);
    w[1] = *(device float4*)(W_ptr + ((((int)threadIdx) * 4) + 256));
    b[0] = *(device float4*)(Bias_ptr + (((int)threadIdx) * 4));
    b[1] = *(device float4*)(Bias_ptr + ((((int)threadIdx) * 4) + 256));
    x[0] = (((x[0] * rstd[0]) * (w[0])[0]) + (b[0])[0]);
    x[1] = (((x[1] * rstd[0]) * (w[0])[1]) + (b[0])[1]);
    x[2] = (((x[2] * rstd[0]) * (w[0])[2]) + (b[0])[2]);
    x[3] = (((x[3] * rstd[0]) * (w[0])[3]) + (b[0])[3]);
    x[4] = (((x[4] * rstd[1]) * (w[1])[0]) + (b[1])[0]);
    x[5] = (((x[5] * rstd[1]) * (w[1])[1]) + (b[1])[1]);
    x[6] = (((x[6] * rstd[1]) * (w[1])[2]) + (b[1])[2]);
    x[7] = (((x[7] * rstd[1]) * (w[1])[3]) + (b[1])[3]);
    *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (v_4 * 512)) + (((int)threadIdx) * 4))) = *(thread float4*)(x + 0);
    *(device float4*)(Y_ptr + ((((((int)blockIdx) * 4096) + (v_4 * 512)) + (((int)threadIdx) * 4)) + 256)) = *(thread float4*)(x + 4);
  }
}


