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
  simdgroup_float8x8 C_f[16];
  threadgroup float A_s[2048];
  threadgroup float B_s[2048];
  simdgroup_float8x8 mat_a[4];
  simdgroup_float8x8 mat_b[4];
  C_f[0] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[1] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[2] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[3] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[4] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[5] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[6] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[7] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[8] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[9] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[10] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[11] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[12] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[13] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[14] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  C_f[15] = make_filled_simdgroup_matrix<float, 8, 8>(0.000000e+00f);
  int cse_v2 = (((int)blockIdx.x) * 64);
  int cse_v3 = (((int)threadIdx.x) >> 6);
  int cse_v11 = (((((int)threadIdx.x) & 63) >> 5) * 32);
  for (int v = 0; v < 2; ++v) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v1 = (((int)threadIdx.x) * 4);
    int cse_v13 = ((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v * 32)) + ((((int)threadIdx.x) & 7) * 4));
    *(threadgroup float4*)(A_s + (((int)threadIdx.x) * 4)) = *(device float4*)(A_ptr + ((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v * 32)) + ((((int)threadIdx.x) & 7) * 4)));
    int cse_v5 = ((((int)threadIdx.x) * 4) + 512);
    *(threadgroup float4*)(A_s + ((((int)threadIdx.x) * 4) + 512)) = *(device float4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 1024));
    int cse_v6 = ((((int)threadIdx.x) * 4) + 1024);
    *(threadgroup float4*)(A_s + ((((int)threadIdx.x) * 4) + 1024)) = *(device float4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 2048));
    int cse_v7 = ((((int)threadIdx.x) * 4) + 1536);
    *(threadgroup float4*)(A_s + ((((int)threadIdx.x) * 4) + 1536)) = *(device float4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 3072));
    int cse_v14 = ((((v * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4));
    *(threadgroup float4*)(B_s + (((int)threadIdx.x) * 4)) = *(device float4*)(B_ptr + ((((v * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)));
    *(threadgroup float4*)(B_s + ((((int)threadIdx.x) * 4) + 512)) = *(device float4*)(B_ptr + (((((v * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024));
    *(threadgroup float4*)(B_s + ((((int)threadIdx.x) * 4) + 1024)) = *(device float4*)(B_ptr + (((((v * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048));
    *(threadgroup float4*)(B_s + ((((int)threadIdx.x) * 4) + 1536)) = *(device float4*)(B_ptr + (((((v * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int v_1 = 0; v_1 < 4; ++v_1) {
      int cse_v10 = (((((int)threadIdx.x) >> 6) * 1024) + (v_1 * 8));
      simdgroup_load(mat_a[0], (&(A_s[(((((int)threadIdx.x) >> 6) * 1024) + (v_1 * 8))])), 32, 0, (bool)0);
      simdgroup_load(mat_a[1], (&(A_s[((((((int)threadIdx.x) >> 6) * 1024) + (v_1 * 8)) + 256)])), 32, 0, (bool)0);
      simdgroup_load(mat_a[2], (&(A_s[((((((int)threadIdx.x) >> 6) * 1024) + (v_1 * 8)) + 512)])), 32, 0, (bool)0);
      simdgroup_load(mat_a[3], (&(A_s[((((((int)threadIdx.x) >> 6) * 1024) + (v_1 * 8)) + 768)])), 32, 0, (bool)0);
      int cse_v12 = ((v_1 * 512) + (((((int)threadIdx.x) & 63) >> 5) * 32));
      simdgroup_load(mat_b[0], (&(B_s[((v_1 * 512) + (((((int)threadIdx.x) & 63) >> 5) * 32))])), 64, 0, (bool)0);
      simdgroup_load(mat_b[1], (&(B_s[(((v_1 * 512) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + 8)])), 64, 0, (bool)0);
      simdgroup_load(mat_b[2], (&(B_s[(((v_1 * 512) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + 16)])), 64, 0, (bool)0);
      simdgroup_load(mat_b[3], (&(B_s[(((v_1 * 512) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + 24)])), 64, 0, (bool)0);
      simdgroup_multiply_accumulate(C_f[0], mat_a[0], mat_b[0], C_f[0]);
      simdgroup_multiply_accumulate(C_f[1], mat_a[0], mat_b[1], C_f[1]);
      simdgroup_multiply_accumulate(C_f[2], mat_a[0], mat_b[2], C_f[2]);
      simdgroup_multiply_accumulate(C_f[3], mat_a[0], mat_b[3], C_f[3]);
      simdgroup_multiply_accumulate(C_f[4], mat_a[1], mat_b[0], C_f[4]);
      simdgroup_multiply_accumulate(C_f[5], mat_a[1], mat_b[1], C_f[5]);
      simdgroup_multiply_accumulate(C_f[6], mat_a[1], mat_b[2], C_f[6]);
      simdgroup_multiply_accumulate(C_f[7], mat_a[1], mat_b[3], C_f[7]);
      simdgroup_multiply_accumulate(C_f[8], mat_a[2], mat_b[0], C_f[8]);
      simdgroup_multiply_accumulate(C_f[9], mat_a[2], mat_b[1], C_f[9]);
      simdgroup_multiply_accumulate(C_f[10], mat_a[2], mat_b[2], C_f[10]);
      simdgroup_multiply_accumulate(C_f[11], mat_a[2], mat_b[3], C_f[11]);
      simdgroup_multiply_accumulate(C_f[12], mat_a[3], mat_b[0], C_f[12]);
      simdgroup_multiply_accumulate(C_f[13], mat_a[3], mat_b[1], C_f[13]);
      simdgroup_multiply_accumulate(C_f[14], mat_a[3], mat_b[2], C_f[14]);
      simdgroup_multiply_accumulate(C_f[15], mat_a[3], mat_b[3], C_f[15]);
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v8 = ((((int)threadIdx.x) >> 5) * 64);
  simdgroup_store(C_f[0], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v4 = (((int)threadIdx.x) * 2);
  int cse_v15 = ((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2));
  C_ptr[((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2))] = A_s[(((int)threadIdx.x) * 2)];
  int cse_v9 = ((((int)threadIdx.x) * 2) + 1);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[1], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 8)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 9)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[2], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 16)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 17)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[3], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 24)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 25)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[4], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1024)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1025)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[5], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1032)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1033)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[6], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1040)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1041)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[7], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1048)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 1049)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[8], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2048)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2049)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[9], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2056)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2057)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[10], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2064)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2065)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[11], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2072)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 2073)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[12], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3072)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3073)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[13], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3080)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3081)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[14], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3088)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3089)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_store(C_f[15], (&(A_s[((((int)threadIdx.x) >> 5) * 64)])), 8, 0, (bool)0);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3096)] = A_s[(((int)threadIdx.x) * 2)];
  C_ptr[(((((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 6) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 128)) + (((int)blockIdx.x) * 64)) + (((((int)threadIdx.x) & 63) >> 5) * 32)) + ((((int)threadIdx.x) & 3) * 2)) + 3097)] = A_s[((((int)threadIdx.x) * 2) + 1)];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}


