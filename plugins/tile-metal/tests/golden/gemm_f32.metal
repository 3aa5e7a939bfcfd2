// Function: main_kernel
#include <metal_stdlib>
using namespace metal;

union __TVMArgUnion {
 int v_int[2];
};

kernel void main_kernel(  device float* A_ptr [[ buffer(0) ]],
  device float* B_ptr [[ buffer(1) ]],
  device float* C_ptr [[ buffer(2) ]],
  uint2 blockIdx [[threadgroup_position_in_grid]],
  uint2 threadIdx [[thread_position_in_threadgroup]]
) {
  threadgroup float C_f[4096];
  threadgroup float A_s[2048];
  threadgroup float B_s[2048];
  simdgroup_float8x8 mat_c[1];
  simdgroup_float8x8 mat_a[1];
  simdgroup_float8x8 mat_b[1];
  for (int v = 0; v < 32; ++v) {
    C_f[((v * 128) + ((int)threadIdx.x))] = 0.000000e+00f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v1 = (((int)threadIdx.x) * 4);
  int cse_v2 = (((int)blockIdx.x) * 64);
  int cse_v4 = ((((int)threadIdx.x) * 4) + 512);
  int cse_v5 = ((((int)threadIdx.x) * 4) + 1024);
  int cse_v6 = ((((int)threadIdx.x) * 4) + 1536);
  int cse_v7 = ((((int)threadIdx.x) >> 4) * 128);
  int cse_v8 = ((((int)threadIdx.x) & 15) * 4);
  for (int v_1 = 0; v_1 < 2; ++v_1) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v12 = ((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4));
    *(threadgroup float4*)(A_s + (((int)threadIdx.x) * 4)) = *(device float4*)(A_ptr + ((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)));
    *(threadgroup float4*)(A_s + ((((int)threadIdx.x) * 4) + 512)) = *(device float4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 1024));
    *(threadgroup float4*)(A_s + ((((int)threadIdx.x) * 4) + 1024)) = *(device float4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 2048));
    *(threadgroup float4*)(A_s + ((((int)threadIdx.x) * 4) + 1536)) = *(device float4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 3072));
    int cse_v13 = ((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4));
    *(threadgroup float4*)(B_s + (((int)threadIdx.x) * 4)) = *(device float4*)(B_ptr + ((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)));
    *(threadgroup float4*)(B_s + ((((int)threadIdx.x) * 4) + 512)) = *(device float4*)(B_ptr + (((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024));
    *(threadgroup float4*)(B_s + ((((int)threadIdx.x) * 4) + 1024)) = *(device float4*)(B_ptr + (((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048));
    *(threadgroup float4*)(B_s + ((((int)threadIdx.x) * 4) + 1536)) = *(device float4*)(B_ptr + (((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int v_2 = 0; v_2 < 16; ++v_2) {
      int cse_v3 = (v_2 >> 1);
      int cse_v9 = ((v_2 & 1) * 32);
      int cse_v10 = ((((int)threadIdx.x) >> 5) * 8);
      int cse_v11 = ((((v_2 >> 1) * 512) + ((v_2 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8));
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
  int cse_v14 = ((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4));
  *(device float4*)(C_ptr + ((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4))) = *(threadgroup float4*)(C_f + (((int)threadIdx.x) * 4));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 512));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 1024));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 1536));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 4096)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 2048));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 5120)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 2560));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 6144)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 3072));
  *(device float4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 7168)) = *(threadgroup float4*)(C_f + ((((int)threadIdx.x) * 4) + 3584));
}


