// Function: main_kernel
#include <metal_stdlib>
using namespace metal;

union __TVMArgUnion {
 int v_int[2];
};

kernel void main_kernel(  device half* A_ptr [[ buffer(0) ]],
  device half* B_ptr [[ buffer(1) ]],
  device half* C_ptr [[ buffer(2) ]],
  uint2 blockIdx [[threadgroup_position_in_grid]],
  uint2 threadIdx [[thread_position_in_threadgroup]]
) {
  threadgroup float C_f[4096];
  threadgroup half A_s[2048];
  threadgroup half B_s[2048];
  simdgroup_float8x8 mat_c[1];
  simdgroup_half8x8 mat_a[1];
  simdgroup_half8x8 mat_b[1];
  for (int v = 0; v < 32; ++v) {
    C_f[((v * 128) + ((int)threadIdx.x))] = 0.000000e+00f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v1 = (((int)blockIdx.y) * 16384);
  int cse_v18 = (((int)blockIdx.x) * 64);
  int cse_v19 = (((int)threadIdx.x) & 63);
  int cse_v21 = ((((int)threadIdx.x) >> 6) * 256);
  for (int v_1 = 0; v_1 < 8; ++v_1) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v2 = (((int)threadIdx.x) >> 5);
    int cse_v25 = ((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31));
    A_s[((int)threadIdx.x)] = A_ptr[((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31))];
    int cse_v3 = (((int)threadIdx.x) + 128);
    A_s[(((int)threadIdx.x) + 128)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 1024)];
    int cse_v4 = (((int)threadIdx.x) + 256);
    A_s[(((int)threadIdx.x) + 256)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 2048)];
    int cse_v5 = (((int)threadIdx.x) + 384);
    A_s[(((int)threadIdx.x) + 384)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 3072)];
    int cse_v6 = (((int)threadIdx.x) + 512);
    A_s[(((int)threadIdx.x) + 512)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 4096)];
    int cse_v7 = (((int)threadIdx.x) + 640);
    A_s[(((int)threadIdx.x) + 640)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 5120)];
    int cse_v8 = (((int)threadIdx.x) + 768);
    A_s[(((int)threadIdx.x) + 768)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 6144)];
    int cse_v9 = (((int)threadIdx.x) + 896);
    A_s[(((int)threadIdx.x) + 896)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 7168)];
    int cse_v10 = (((int)threadIdx.x) + 1024);
    A_s[(((int)threadIdx.x) + 1024)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 8192)];
    int cse_v11 = (((int)threadIdx.x) + 1152);
    A_s[(((int)threadIdx.x) + 1152)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 9216)];
    int cse_v12 = (((int)threadIdx.x) + 1280);
    A_s[(((int)threadIdx.x) + 1280)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 10240)];
    int cse_v13 = (((int)threadIdx.x) + 1408);
    A_s[(((int)threadIdx.x) + 1408)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 11264)];
    int cse_v14 = (((int)threadIdx.x) + 1536);
    A_s[(((int)threadIdx.x) + 1536)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 12288)];
    int cse_v15 = (((int)threadIdx.x) + 1664);
    A_s[(((int)threadIdx.x) + 1664)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 13312)];
    int cse_v16 = (((int)threadIdx.x) + 1792);
    A_s[(((int)threadIdx.x) + 1792)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 14336)];
    int cse_v17 = (((int)threadIdx.x) + 1920);
    A_s[(((int)threadIdx.x) + 1920)] = A_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 256)) + (v_1 * 32)) + (((int)threadIdx.x) & 31)) + 15360)];
    int cse_v26 = ((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63));
    B_s[((int)threadIdx.x)] = B_ptr[((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63))];
    B_s[(((int)threadIdx.x) + 128)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 512)];
    B_s[(((int)threadIdx.x) + 256)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 1024)];
    B_s[(((int)threadIdx.x) + 384)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 1536)];
    B_s[(((int)threadIdx.x) + 512)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 2048)];
    B_s[(((int)threadIdx.x) + 640)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 2560)];
    B_s[(((int)threadIdx.x) + 768)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 3072)];
    B_s[(((int)threadIdx.x) + 896)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 3584)];
    B_s[(((int)threadIdx.x) + 1024)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 4096)];
    B_s[(((int)threadIdx.x) + 1152)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 4608)];
    B_s[(((int)threadIdx.x) + 1280)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 5120)];
    B_s[(((int)threadIdx.x) + 1408)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 5632)];
    B_s[(((int)threadIdx.x) + 1536)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 6144)];
    B_s[(((int)threadIdx.x) + 1664)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 6656)];
    B_s[(((int)threadIdx.x) + 1792)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 7168)];
    B_s[(((int)threadIdx.x) + 1920)] = B_ptr[(((((v_1 * 8192) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63)) + 7680)];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int v_2 = 0; v_2 < 16; ++v_2) {
      int cse_v20 = (v_2 >> 1);
      int cse_v22 = ((v_2 & 1) * 32);
      int cse_v23 = ((((int)threadIdx.x) >> 5) * 8);
      int cse_v24 = ((((v_2 >> 1) * 512) + ((v_2 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8));
      simdgroup_load(mat_c[0], (&(C_f[((((v_2 >> 1) * 512) + ((v_2 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8))])), 64, 0, (bool)0);
      for (int v_3 = 0; v_3 < 4; ++v_3) {
        simdgroup_load(mat_a[0], (&(A_s[(((v_2 >> 1) * 256) + (v_3 * 8))])), 32, 0, (bool)0);
        simdgroup_load(mat_b[0], (&(B_s[(((v_3 * 512) + ((v_2 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8))])), 64, 0, (bool)0);
        simdgroup_multiply_accumulate(mat_c[0], mat_a[0], mat_b[0], mat_c[0]);
      }
      simdgroup_store(mat_c[0], (&(C_f[((((v_2 >> 1) * 512) + ((v_2 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8))])), 64, 0, (bool)0);
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int v_4 = 0; v_4 < 32; ++v_4) {
    C_ptr[(((((((int)blockIdx.y) * 16384) + (v_4 * 512)) + ((((int)threadIdx.x) >> 6) * 256)) + (((int)blockIdx.x) * 64)) + (((int)threadIdx.x) & 63))] = ((half)C_f[((v_4 * 128) + ((int)threadIdx.x))]);
  }
}


