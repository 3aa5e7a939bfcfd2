// Function: main_kernel
#include <metal_stdlib>
using namespace metal;

union __TVMArgUnion {
 int v_int[2];
};

kernel void main_kernel(  device char* A_ptr [[ buffer(0) ]],
  device char* B_ptr [[ buffer(1) ]],
  device int* C_ptr [[ buffer(2) ]],
  uint2 blockIdx [[threadgroup_position_in_grid]],
  uint2 threadIdx [[thread_position_in_threadgroup]]
) {
  thread int C_f[32];
  threadgroup char A_s[2048];
  threadgroup char4 B_s[512];
  thread int v[1];
  C_f[0] = 0;
  C_f[1] = 0;
  C_f[2] = 0;
  C_f[3] = 0;
  C_f[4] = 0;
  C_f[5] = 0;
  C_f[6] = 0;
  C_f[7] = 0;
  C_f[8] = 0;
  C_f[9] = 0;
  C_f[10] = 0;
  C_f[11] = 0;
  C_f[12] = 0;
  C_f[13] = 0;
  C_f[14] = 0;
  C_f[15] = 0;
  C_f[16] = 0;
  C_f[17] = 0;
  C_f[18] = 0;
  C_f[19] = 0;
  C_f[20] = 0;
  C_f[21] = 0;
  C_f[22] = 0;
  C_f[23] = 0;
  C_f[24] = 0;
  C_f[25] = 0;
  C_f[26] = 0;
  C_f[27] = 0;
  C_f[28] = 0;
  C_f[29] = 0;
  C_f[30] = 0;
  C_f[31] = 0;
  int cse_v2 = (((int)threadIdx.x) >> 4);
  int cse_v3 = (((int)blockIdx.x) * 64);
  int cse_v7 = ((((int)threadIdx.x) >> 4) * 128);
  int cse_v8 = ((((int)threadIdx.x) & 15) * 4);
  for (int v_1 = 0; v_1 < 2; ++v_1) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v1 = (((int)threadIdx.x) * 4);
    int cse_v10 = ((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4));
    *(threadgroup char4*)(A_s + (((int)threadIdx.x) * 4)) = *(device char4*)(A_ptr + ((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)));
    int cse_v4 = ((((int)threadIdx.x) * 4) + 512);
    *(threadgroup char4*)(A_s + ((((int)threadIdx.x) * 4) + 512)) = *(device char4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 1024));
    int cse_v5 = ((((int)threadIdx.x) * 4) + 1024);
    *(threadgroup char4*)(A_s + ((((int)threadIdx.x) * 4) + 1024)) = *(device char4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 2048));
    int cse_v6 = ((((int)threadIdx.x) * 4) + 1536);
    *(threadgroup char4*)(A_s + ((((int)threadIdx.x) * 4) + 1536)) = *(device char4*)(A_ptr + (((((((int)blockIdx.y) * 4096) + ((((int)threadIdx.x) >> 3) * 64)) + (v_1 * 32)) + ((((int)threadIdx.x) & 7) * 4)) + 3072));
    int cse_v11 = ((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4));
    B_s[((((int)threadIdx.x) * 4) / 4)] = *(device char4*)(B_ptr + ((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)));
    B_s[(((((int)threadIdx.x) * 4) + 512) / 4)] = *(device char4*)(B_ptr + (((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024));
    B_s[(((((int)threadIdx.x) * 4) + 1024) / 4)] = *(device char4*)(B_ptr + (((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048));
    B_s[(((((int)threadIdx.x) * 4) + 1536) / 4)] = *(device char4*)(B_ptr + (((((v_1 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v[0] = C_f[0];
    int cse_v9 = ((((int)threadIdx.x) >> 4) * 32);
    for (int v_2 = 0; v_2 < 32; ++v_2) {
      v[0] = (v[0] + (((int)A_s[(((((int)threadIdx.x) >> 4) * 32) + v_2)]) * ((int)(B_s[(((v_2 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[0] = v[0];
    v[0] = C_f[1];
    for (int v_3 = 0; v_3 < 32; ++v_3) {
      v[0] = (v[0] + (((int)A_s[(((((int)threadIdx.x) >> 4) * 32) + v_3)]) * ((int)(B_s[((((v_3 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[1] = v[0];
    v[0] = C_f[2];
    for (int v_4 = 0; v_4 < 32; ++v_4) {
      v[0] = (v[0] + (((int)A_s[(((((int)threadIdx.x) >> 4) * 32) + v_4)]) * ((int)(B_s[((((v_4 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[2] = v[0];
    v[0] = C_f[3];
    for (int v_5 = 0; v_5 < 32; ++v_5) {
      v[0] = (v[0] + (((int)A_s[(((((int)threadIdx.x) >> 4) * 32) + v_5)]) * ((int)(B_s[((((v_5 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[3] = v[0];
    v[0] = C_f[4];
    for (int v_6 = 0; v_6 < 32; ++v_6) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_6) + 256)]) * ((int)(B_s[(((v_6 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[4] = v[0];
    v[0] = C_f[5];
    for (int v_7 = 0; v_7 < 32; ++v_7) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_7) + 256)]) * ((int)(B_s[((((v_7 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[5] = v[0];
    v[0] = C_f[6];
    for (int v_8 = 0; v_8 < 32; ++v_8) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_8) + 256)]) * ((int)(B_s[((((v_8 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[6] = v[0];
    v[0] = C_f[7];
    for (int v_9 = 0; v_9 < 32; ++v_9) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_9) + 256)]) * ((int)(B_s[((((v_9 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[7] = v[0];
    v[0] = C_f[8];
    for (int v_10 = 0; v_10 < 32; ++v_10) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_10) + 512)]) * ((int)(B_s[(((v_10 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[8] = v[0];
    v[0] = C_f[9];
    for (int v_11 = 0; v_11 < 32; ++v_11) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_11) + 512)]) * ((int)(B_s[((((v_11 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[9] = v[0];
    v[0] = C_f[10];
    for (int v_12 = 0; v_12 < 32; ++v_12) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_12) + 512)]) * ((int)(B_s[((((v_12 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[10] = v[0];
    v[0] = C_f[11];
    for (int v_13 = 0; v_13 < 32; ++v_13) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_13) + 512)]) * ((int)(B_s[((((v_13 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[11] = v[0];
    v[0] = C_f[12];
    for (int v_14 = 0; v_14 < 32; ++v_14) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_14) + 768)]) * ((int)(B_s[(((v_14 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[12] = v[0];
    v[0] = C_f[13];
    for (int v_15 = 0; v_15 < 32; ++v_15) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_15) + 768)]) * ((int)(B_s[((((v_15 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[13] = v[0];
    v[0] = C_f[14];
    for (int v_16 = 0; v_16 < 32; ++v_16) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_16) + 768)]) * ((int)(B_s[((((v_16 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[14] = v[0];
    v[0] = C_f[15];
    for (int v_17 = 0; v_17 < 32; ++v_17) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_17) + 768)]) * ((int)(B_s[((((v_17 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[15] = v[0];
    v[0] = C_f[16];
    for (int v_18 = 0; v_18 < 32; ++v_18) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_18) + 1024)]) * ((int)(B_s[(((v_18 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[16] = v[0];
    v[0] = C_f[17];
    for (int v_19 = 0; v_19 < 32; ++v_19) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_19) + 1024)]) * ((int)(B_s[((((v_19 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[17] = v[0];
    v[0] = C_f[18];
    for (int v_20 = 0; v_20 < 32; ++v_20) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_20) + 1024)]) * ((int)(B_s[((((v_20 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[18] = v[0];
    v[0] = C_f[19];
    for (int v_21 = 0; v_21 < 32; ++v_21) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_21) + 1024)]) * ((int)(B_s[((((v_21 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[19] = v[0];
    v[0] = C_f[20];
    for (int v_22 = 0; v_22 < 32; ++v_22) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_22) + 1280)]) * ((int)(B_s[(((v_22 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[20] = v[0];
    v[0] = C_f[21];
    for (int v_23 = 0; v_23 < 32; ++v_23) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_23) + 1280)]) * ((int)(B_s[((((v_23 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[21] = v[0];
    v[0] = C_f[22];
    for (int v_24 = 0; v_24 < 32; ++v_24) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_24) + 1280)]) * ((int)(B_s[((((v_24 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[22] = v[0];
    v[0] = C_f[23];
    for (int v_25 = 0; v_25 < 32; ++v_25) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_25) + 1280)]) * ((int)(B_s[((((v_25 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[23] = v[0];
    v[0] = C_f[24];
    for (int v_26 = 0; v_26 < 32; ++v_26) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_26) + 1536)]) * ((int)(B_s[(((v_26 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[24] = v[0];
    v[0] = C_f[25];
    for (int v_27 = 0; v_27 < 32; ++v_27) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_27) + 1536)]) * ((int)(B_s[((((v_27 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[25] = v[0];
    v[0] = C_f[26];
    for (int v_28 = 0; v_28 < 32; ++v_28) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_28) + 1536)]) * ((int)(B_s[((((v_28 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[26] = v[0];
    v[0] = C_f[27];
    for (int v_29 = 0; v_29 < 32; ++v_29) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_29) + 1536)]) * ((int)(B_s[((((v_29 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[27] = v[0];
    v[0] = C_f[28];
    for (int v_30 = 0; v_30 < 32; ++v_30) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_30) + 1792)]) * ((int)(B_s[(((v_30 * 64) + ((((int)threadIdx.x) & 15) * 4)) / 4)])[0])));
    }
    C_f[28] = v[0];
    v[0] = C_f[29];
    for (int v_31 = 0; v_31 < 32; ++v_31) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_31) + 1792)]) * ((int)(B_s[((((v_31 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 1) / 4)])[1])));
    }
    C_f[29] = v[0];
    v[0] = C_f[30];
    for (int v_32 = 0; v_32 < 32; ++v_32) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_32) + 1792)]) * ((int)(B_s[((((v_32 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 2) / 4)])[2])));
    }
    C_f[30] = v[0];
    v[0] = C_f[31];
    for (int v_33 = 0; v_33 < 32; ++v_33) {
      v[0] = (v[0] + (((int)A_s[((((((int)threadIdx.x) >> 4) * 32) + v_33) + 1792)]) * ((int)(B_s[((((v_33 * 64) + ((((int)threadIdx.x) & 15) * 4)) + 3) / 4)])[3])));
    }
    C_f[31] = v[0];
  }
  int cse_v12 = ((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4));
  *(device int4*)(C_ptr + ((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4))) = *(thread int4*)(C_f + 0);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024)) = *(thread int4*)(C_f + 4);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048)) = *(thread int4*)(C_f + 8);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072)) = *(thread int4*)(C_f + 12);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 4096)) = *(thread int4*)(C_f + 16);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 5120)) = *(thread int4*)(C_f + 20);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 6144)) = *(thread int4*)(C_f + 24);
  *(device int4*)(C_ptr + (((((((int)blockIdx.y) * 8192) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.x) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 7168)) = *(thread int4*)(C_f + 28);
}


