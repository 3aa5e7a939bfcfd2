// Function: main_kernel
#include <metal_stdlib>
using namespace metal;

union __TVMArgUnion {
 int v_int[2];
};

kernel void main_kernel(  device half* K_ptr [[ buffer(0) ]],
  device half* Output_ptr [[ buffer(1) ]],
  device half* Q_ptr [[ buffer(2) ]],
  device half* V_ptr [[ buffer(3) ]],
  uint3 blockIdx [[threadgroup_position_in_grid]],
  uint3 threadIdx [[thread_position_in_threadgroup]]
) {
  threadgroup half Q_shared[2048];
  threadgroup float acc_o[2048];
  threadgroup float logsum[32];
  threadgroup float scores_max[32];
  threadgroup half K_shared[2048];
  threadgroup float acc_s[1024];
  threadgroup half V_shared[2048];
  thread float scores_max_prev[1];
  threadgroup float scores_scale[32];
  threadgroup half acc_s_cast[1024];
  threadgroup float scores_sum[32];
  simdgroup_float8x8 mat_c[1];
  simdgroup_half8x8 mat_a[1];
  simdgroup_half8x8 mat_b[1];
  thread float v[1];
  simdgroup_float8x8 mat_c_1[1];
  simdgroup_half8x8 mat_a_1[1];
  simdgroup_half8x8 mat_b_1[1];
  thread float v_1[1];
  int cse_v1 = (((int)blockIdx.y) * 64);
  int cse_v2 = (((int)blockIdx.x) * 4096);
  int cse_v3 = (((int)threadIdx.x) * 4);
  int cse_v27 = ((((int)threadIdx.x) >> 4) * 128);
  int cse_v28 = ((((int)threadIdx.x) & 15) * 4);
  int cse_v55 = ((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4));
  int cse_v59 = ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 28672) - (((int)blockIdx.x) * 4096));
  *(threadgroup half4*)(Q_shared + (((int)threadIdx.x) * 4)) = *(device half4*)(Q_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 28672) - (((int)blockIdx.x) * 4096)));
  int cse_v29 = ((((int)threadIdx.x) * 4) + 512);
  int cse_v60 = ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 29696) - (((int)blockIdx.x) * 4096));
  *(threadgroup half4*)(Q_shared + ((((int)threadIdx.x) * 4) + 512)) = *(device half4*)(Q_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 29696) - (((int)blockIdx.x) * 4096)));
  int cse_v30 = ((((int)threadIdx.x) * 4) + 1024);
  int cse_v61 = ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 30720) - (((int)blockIdx.x) * 4096));
  *(threadgroup half4*)(Q_shared + ((((int)threadIdx.x) * 4) + 1024)) = *(device half4*)(Q_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 30720) - (((int)blockIdx.x) * 4096)));
  int cse_v31 = ((((int)threadIdx.x) * 4) + 1536);
  int cse_v62 = ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 31744) - (((int)blockIdx.x) * 4096));
  *(threadgroup half4*)(Q_shared + ((((int)threadIdx.x) * 4) + 1536)) = *(device half4*)(Q_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 31744) - (((int)blockIdx.x) * 4096)));
  acc_o[((int)threadIdx.x)] = 0.000000e+00f;
  int cse_v4 = (((int)threadIdx.x) + 128);
  acc_o[(((int)threadIdx.x) + 128)] = 0.000000e+00f;
  int cse_v5 = (((int)threadIdx.x) + 256);
  acc_o[(((int)threadIdx.x) + 256)] = 0.000000e+00f;
  int cse_v6 = (((int)threadIdx.x) + 384);
  acc_o[(((int)threadIdx.x) + 384)] = 0.000000e+00f;
  int cse_v7 = (((int)threadIdx.x) + 512);
  acc_o[(((int)threadIdx.x) + 512)] = 0.000000e+00f;
  int cse_v8 = (((int)threadIdx.x) + 640);
  acc_o[(((int)threadIdx.x) + 640)] = 0.000000e+00f;
  int cse_v9 = (((int)threadIdx.x) + 768);
  acc_o[(((int)threadIdx.x) + 768)] = 0.000000e+00f;
  int cse_v10 = (((int)threadIdx.x) + 896);
  acc_o[(((int)threadIdx.x) + 896)] = 0.000000e+00f;
  int cse_v11 = (((int)threadIdx.x) + 1024);
  acc_o[(((int)threadIdx.x) + 1024)] = 0.000000e+00f;
  int cse_v12 = (((int)threadIdx.x) + 1152);
  acc_o[(((int)threadIdx.x) + 1152)] = 0.000000e+00f;
  int cse_v13 = (((int)threadIdx.x) + 1280);
  acc_o[(((int)threadIdx.x) + 1280)] = 0.000000e+00f;
  int cse_v14 = (((int)threadIdx.x) + 1408);
  acc_o[(((int)threadIdx.x) + 1408)] = 0.000000e+00f;
  int cse_v15 = (((int)threadIdx.x) + 1536);
  acc_o[(((int)threadIdx.x) + 1536)] = 0.000000e+00f;
  int cse_v16 = (((int)threadIdx.x) + 1664);
  acc_o[(((int)threadIdx.x) + 1664)] = 0.000000e+00f;
  int cse_v17 = (((int)threadIdx.x) + 1792);
  acc_o[(((int)threadIdx.x) + 1792)] = 0.000000e+00f;
  int cse_v18 = (((int)threadIdx.x) + 1920);
  acc_o[(((int)threadIdx.x) + 1920)] = 0.000000e+00f;
  if (((int)threadIdx.x) < 32) {
    logsum[((int)threadIdx.x)] = 0.000000e+00f;
  }
  if (((int)threadIdx.x) < 32) {
    scores_max[((int)threadIdx.x)] = -INFINITY;
  }
  int cse_v19 = (((int)blockIdx.x) * 32);
  int cse_v32 = (287 - (((int)blockIdx.x) * 32));
  int v_2 = (8 - ((int)blockIdx.x));
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v25 = (((int)threadIdx.x) >> 6);
  int cse_v38 = ((((int)threadIdx.x) >> 6) + 2);
  int cse_v39 = ((((int)threadIdx.x) >> 6) + 4);
  int cse_v40 = ((((int)threadIdx.x) >> 6) + 6);
  int cse_v41 = ((((int)threadIdx.x) >> 6) + 8);
  int cse_v42 = ((((int)threadIdx.x) >> 6) + 10);
  int cse_v43 = ((((int)threadIdx.x) >> 6) + 12);
  int cse_v44 = ((((int)threadIdx.x) >> 6) + 14);
  int cse_v45 = ((((int)threadIdx.x) >> 6) + 16);
  int cse_v46 = ((((int)threadIdx.x) >> 6) + 18);
  int cse_v47 = ((((int)threadIdx.x) >> 6) + 20);
  int cse_v48 = ((((int)threadIdx.x) >> 6) + 22);
  int cse_v49 = ((((int)threadIdx.x) >> 6) + 24);
  int cse_v50 = ((((int)threadIdx.x) >> 6) + 26);
  int cse_v51 = ((((int)threadIdx.x) >> 6) + 28);
  int cse_v52 = ((((int)threadIdx.x) >> 6) + 30);
  for (int v_3 = 0; v_3 < (8 - ((int)blockIdx.x)); ++v_3) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v58 = ((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4));
    *(threadgroup half4*)(K_shared + (((int)threadIdx.x) * 4)) = *(device half4*)(K_ptr + ((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)));
    int cse_v63 = (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024);
    *(threadgroup half4*)(K_shared + ((((int)threadIdx.x) * 4) + 512)) = *(device half4*)(K_ptr + (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024));
    int cse_v64 = (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048);
    *(threadgroup half4*)(K_shared + ((((int)threadIdx.x) * 4) + 1024)) = *(device half4*)(K_ptr + (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048));
    int cse_v65 = (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072);
    *(threadgroup half4*)(K_shared + ((((int)threadIdx.x) * 4) + 1536)) = *(device half4*)(K_ptr + (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072));
    int cse_v20 = (((int)threadIdx.x) & 31);
    int cse_v21 = (((int)threadIdx.x) >> 5);
    int cse_v33 = ((v_3 * 32) + (((int)threadIdx.x) & 31));
    acc_s[((int)threadIdx.x)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 224) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 128)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 228) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 256)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 232) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 384)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 236) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 512)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 240) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 640)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 244) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 768)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 248) - (((int)blockIdx.x) * 32))));
    acc_s[(((int)threadIdx.x) + 896)] = select(-INFINITY, 0.000000e+00f, (((v_3 * 32) + (((int)threadIdx.x) & 31)) <= (((((int)threadIdx.x) >> 5) + 252) - (((int)blockIdx.x) * 32))));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    int cse_v34 = ((((int)threadIdx.x) >> 5) * 8);
    for (int v_4 = 0; v_4 < 4; ++v_4) {
      int cse_v54 = ((v_4 * 256) + ((((int)threadIdx.x) >> 5) * 8));
      simdgroup_load(mat_c[0], (&(acc_s[((v_4 * 256) + ((((int)threadIdx.x) >> 5) * 8))])), 32, 0, (bool)0);
      for (int v_5 = 0; v_5 < 8; ++v_5) {
        int cse_v22 = (v_5 * 8);
        simdgroup_load(mat_a[0], (&(Q_shared[((v_4 * 512) + (v_5 * 8))])), 64, 0, (bool)0);
        simdgroup_load(mat_b[0], (&(K_shared[(((((int)threadIdx.x) >> 5) * 512) + (v_5 * 8))])), 64, 0, (bool)1);
        simdgroup_multiply_accumulate(mat_c[0], mat_a[0], mat_b[0], mat_c[0]);
      }
      simdgroup_store(mat_c[0], (&(acc_s[((v_4 * 256) + ((((int)threadIdx.x) >> 5) * 8))])), 32, 0, (bool)0);
    }
    *(threadgroup half4*)(V_shared + (((int)threadIdx.x) * 4)) = *(device half4*)(V_ptr + ((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)));
    *(threadgroup half4*)(V_shared + ((((int)threadIdx.x) * 4) + 512)) = *(device half4*)(V_ptr + (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 1024));
    *(threadgroup half4*)(V_shared + ((((int)threadIdx.x) * 4) + 1024)) = *(device half4*)(V_ptr + (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 2048));
    *(threadgroup half4*)(V_shared + ((((int)threadIdx.x) * 4) + 1536)) = *(device half4*)(V_ptr + (((((v_3 * 4096) + ((((int)threadIdx.x) >> 4) * 128)) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 3072));
    int cse_v23 = (((int)threadIdx.x) >> 2);
    scores_max_prev[0] = scores_max[(((int)threadIdx.x) >> 2)];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v[0] = -INFINITY;
    int cse_v24 = (((int)threadIdx.x) & 3);
    int cse_v35 = ((((int)threadIdx.x) >> 2) * 32);
    for (int v_6 = 0; v_6 < 8; ++v_6) {
      int cse_v56 = ((((((int)threadIdx.x) >> 2) * 32) + (v_6 * 4)) + (((int)threadIdx.x) & 3));
      float condval;
      if ((v[0] != v[0]) || (acc_s[((((((int)threadIdx.x) >> 2) * 32) + (v_6 * 4)) + (((int)threadIdx.x) & 3))] != acc_s[((((((int)threadIdx.x) >> 2) * 32) + (v_6 * 4)) + (((int)threadIdx.x) & 3))])) {
        condval = (v[0] + acc_s[((((((int)threadIdx.x) >> 2) * 32) + (v_6 * 4)) + (((int)threadIdx.x) & 3))]);
      } else {
        condval = max(v[0], acc_s[((((((int)threadIdx.x) >> 2) * 32) + (v_6 * 4)) + (((int)threadIdx.x) & 3))]);
      }
      v[0] = condval;
    }
    int cse_v36 = ((((int)threadIdx.x) & 31) ^ 2);
    float v_7 = simd_shuffle(v[0], ((((int)threadIdx.x) & 31) ^ 2));
    float condval_1;
    if ((v[0] != v[0]) || (v_7 != v_7)) {
      condval_1 = (v[0] + v_7);
    } else {
      condval_1 = max(v[0], v_7);
    }
    v[0] = condval_1;
    int cse_v37 = ((((int)threadIdx.x) & 31) ^ 1);
    float v_8 = simd_shuffle(v[0], ((((int)threadIdx.x) & 31) ^ 1));
    float condval_2;
    if ((v[0] != v[0]) || (v_8 != v_8)) {
      condval_2 = (v[0] + v_8);
    } else {
      condval_2 = max(v[0], v_8);
    }
    v[0] = condval_2;
    if ((((int)threadIdx.x) % 4) == 0) {
      float condval_3;
      if ((scores_max[(((int)threadIdx.x) >> 2)] != scores_max[(((int)threadIdx.x) >> 2)]) || (v[0] != v[0])) {
        condval_3 = (scores_max[(((int)threadIdx.x) >> 2)] + v[0]);
      } else {
        condval_3 = max(scores_max[(((int)threadIdx.x) >> 2)], v[0]);
      }
      scores_max[(((int)threadIdx.x) >> 2)] = condval_3;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((((int)threadIdx.x) % 4) == 0) {
      float condval_4;
      if ((scores_max[(((int)threadIdx.x) >> 2)] != scores_max[(((int)threadIdx.x) >> 2)]) || (scores_max_prev[0] != scores_max_prev[0])) {
        condval_4 = (scores_max[(((int)threadIdx.x) >> 2)] + scores_max_prev[0]);
      } else {
        condval_4 = max(scores_max[(((int)threadIdx.x) >> 2)], scores_max_prev[0]);
      }
      scores_max[(((int)threadIdx.x) >> 2)] = condval_4;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if ((((int)threadIdx.x) % 4) == 0) {
      scores_scale[(((int)threadIdx.x) >> 2)] = exp2(((scores_max_prev[0] * 1.803369e-01f) - (scores_max[(((int)threadIdx.x) >> 2)] * 1.803369e-01f)));
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    acc_o[((int)threadIdx.x)] = (acc_o[((int)threadIdx.x)] * scores_scale[(((int)threadIdx.x) >> 6)]);
    acc_o[(((int)threadIdx.x) + 128)] = (acc_o[(((int)threadIdx.x) + 128)] * scores_scale[((((int)threadIdx.x) >> 6) + 2)]);
    acc_o[(((int)threadIdx.x) + 256)] = (acc_o[(((int)threadIdx.x) + 256)] * scores_scale[((((int)threadIdx.x) >> 6) + 4)]);
    acc_o[(((int)threadIdx.x) + 384)] = (acc_o[(((int)threadIdx.x) + 384)] * scores_scale[((((int)threadIdx.x) >> 6) + 6)]);
    acc_o[(((int)threadIdx.x) + 512)] = (acc_o[(((int)threadIdx.x) + 512)] * scores_scale[((((int)threadIdx.x) >> 6) + 8)]);
    acc_o[(((int)threadIdx.x) + 640)] = (acc_o[(((int)threadIdx.x) + 640)] * scores_scale[((((int)threadIdx.x) >> 6) + 10)]);
    acc_o[(((int)threadIdx.x) + 768)] = (acc_o[(((int)threadIdx.x) + 768)] * scores_scale[((((int)threadIdx.x) >> 6) + 12)]);
    acc_o[(((int)threadIdx.x) + 896)] = (acc_o[(((int)threadIdx.x) + 896)] * scores_scale[((((int)threadIdx.x) >> 6) + 14)]);
    acc_o[(((int)threadIdx.x) + 1024)] = (acc_o[(((int)threadIdx.x) + 1024)] * scores_scale[((((int)threadIdx.x) >> 6) + 16)]);
    acc_o[(((int)threadIdx.x) + 1152)] = (acc_o[(((int)threadIdx.x) + 1152)] * scores_scale[((((int)threadIdx.x) >> 6) + 18)]);
    acc_o[(((int)threadIdx.x) + 1280)] = (acc_o[(((int)threadIdx.x) + 1280)] * scores_scale[((((int)threadIdx.x) >> 6) + 20)]);
    acc_o[(((int)threadIdx.x) + 1408)] = (acc_o[(((int)threadIdx.x) + 1408)] * scores_scale[((((int)threadIdx.x) >> 6) + 22)]);
    acc_o[(((int)threadIdx.x) + 1536)] = (acc_o[(((int)threadIdx.x) + 1536)] * scores_scale[((((int)threadIdx.x) >> 6) + 24)]);
    acc_o[(((int)threadIdx.x) + 1664)] = (acc_o[(((int)threadIdx.x) + 1664)] * scores_scale[((((int)threadIdx.x) >> 6) + 26)]);
    acc_o[(((int)threadIdx.x) + 1792)] = (acc_o[(((int)threadIdx.x) + 1792)] * scores_scale[((((int)threadIdx.x) >> 6) + 28)]);
    acc_o[(((int)threadIdx.x) + 1920)] = (acc_o[(((int)threadIdx.x) + 1920)] * scores_scale[((((int)threadIdx.x) >> 6) + 30)]);
    acc_s[((int)threadIdx.x)] = exp2(((acc_s[((int)threadIdx.x)] * 1.803369e-01f) - (scores_max[(((int)threadIdx.x) >> 5)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 128)] = exp2(((acc_s[(((int)threadIdx.x) + 128)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 4)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 256)] = exp2(((acc_s[(((int)threadIdx.x) + 256)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 8)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 384)] = exp2(((acc_s[(((int)threadIdx.x) + 384)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 12)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 512)] = exp2(((acc_s[(((int)threadIdx.x) + 512)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 16)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 640)] = exp2(((acc_s[(((int)threadIdx.x) + 640)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 20)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 768)] = exp2(((acc_s[(((int)threadIdx.x) + 768)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 24)] * 1.803369e-01f)));
    acc_s[(((int)threadIdx.x) + 896)] = exp2(((acc_s[(((int)threadIdx.x) + 896)] * 1.803369e-01f) - (scores_max[((((int)threadIdx.x) >> 5) + 28)] * 1.803369e-01f)));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    acc_s_cast[((int)threadIdx.x)] = ((half)acc_s[((int)threadIdx.x)]);
    acc_s_cast[(((int)threadIdx.x) + 128)] = ((half)acc_s[(((int)threadIdx.x) + 128)]);
    acc_s_cast[(((int)threadIdx.x) + 256)] = ((half)acc_s[(((int)threadIdx.x) + 256)]);
    acc_s_cast[(((int)threadIdx.x) + 384)] = ((half)acc_s[(((int)threadIdx.x) + 384)]);
    acc_s_cast[(((int)threadIdx.x) + 512)] = ((half)acc_s[(((int)threadIdx.x) + 512)]);
    acc_s_cast[(((int)threadIdx.x) + 640)] = ((half)acc_s[(((int)threadIdx.x) + 640)]);
    acc_s_cast[(((int)threadIdx.x) + 768)] = ((half)acc_s[(((int)threadIdx.x) + 768)]);
    acc_s_cast[(((int)threadIdx.x) + 896)] = ((half)acc_s[(((int)threadIdx.x) + 896)]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int v_9 = 0; v_9 < 8; ++v_9) {
      int cse_v26 = (v_9 >> 1);
      int cse_v53 = ((v_9 & 1) * 32);
      int cse_v57 = ((((v_9 >> 1) * 512) + ((v_9 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8));
      simdgroup_load(mat_c_1[0], (&(acc_o[((((v_9 >> 1) * 512) + ((v_9 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8))])), 64, 0, (bool)0);
      for (int v_10 = 0; v_10 < 4; ++v_10) {
        simdgroup_load(mat_a_1[0], (&(acc_s_cast[(((v_9 >> 1) * 256) + (v_10 * 8))])), 32, 0, (bool)0);
        simdgroup_load(mat_b_1[0], (&(V_shared[(((v_10 * 512) + ((v_9 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8))])), 64, 0, (bool)0);
        simdgroup_multiply_accumulate(mat_c_1[0], mat_a_1[0], mat_b_1[0], mat_c_1[0]);
      }
      simdgroup_store(mat_c_1[0], (&(acc_o[((((v_9 >> 1) * 512) + ((v_9 & 1) * 32)) + ((((int)threadIdx.x) >> 5) * 8))])), 64, 0, (bool)0);
    }
    v_1[0] = 0.000000e+00f;
    for (int v_11 = 0; v_11 < 8; ++v_11) {
      v_1[0] = (v_1[0] + acc_s[((((((int)threadIdx.x) >> 2) * 32) + (v_11 * 4)) + (((int)threadIdx.x) & 3))]);
    }
    float v_12 = simd_shuffle(v_1[0], ((((int)threadIdx.x) & 31) ^ 2));
    v_1[0] = (v_1[0] + v_12);
    float v_13 = simd_shuffle(v_1[0], ((((int)threadIdx.x) & 31) ^ 1));
    v_1[0] = (v_1[0] + v_13);
    if ((((int)threadIdx.x) % 4) == 0) {
      scores_sum[(((int)threadIdx.x) >> 2)] = v_1[0];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (((int)threadIdx.x) < 32) {
      logsum[((int)threadIdx.x)] = ((logsum[((int)threadIdx.x)] * scores_scale[((int)threadIdx.x)]) + scores_sum[((int)threadIdx.x)]);
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  acc_o[((int)threadIdx.x)] = (acc_o[((int)threadIdx.x)] / logsum[(((int)threadIdx.x) >> 6)]);
  acc_o[(((int)threadIdx.x) + 128)] = (acc_o[(((int)threadIdx.x) + 128)] / logsum[((((int)threadIdx.x) >> 6) + 2)]);
  acc_o[(((int)threadIdx.x) + 256)] = (acc_o[(((int)threadIdx.x) + 256)] / logsum[((((int)threadIdx.x) >> 6) + 4)]);
  acc_o[(((int)threadIdx.x) + 384)] = (acc_o[(((int)threadIdx.x) + 384)] / logsum[((((int)threadIdx.x) >> 6) + 6)]);
  acc_o[(((int)threadIdx.x) + 512)] = (acc_o[(((int)threadIdx.x) + 512)] / logsum[((((int)threadIdx.x) >> 6) + 8)]);
  acc_o[(((int)threadIdx.x) + 640)] = (acc_o[(((int)threadIdx.x) + 640)] / logsum[((((int)threadIdx.x) >> 6) + 10)]);
  acc_o[(((int)threadIdx.x) + 768)] = (acc_o[(((int)threadIdx.x) + 768)] / logsum[((((int)threadIdx.x) >> 6) + 12)]);
  acc_o[(((int)threadIdx.x) + 896)] = (acc_o[(((int)threadIdx.x) + 896)] / logsum[((((int)threadIdx.x) >> 6) + 14)]);
  acc_o[(((int)threadIdx.x) + 1024)] = (acc_o[(((int)threadIdx.x) + 1024)] / logsum[((((int)threadIdx.x) >> 6) + 16)]);
  acc_o[(((int)threadIdx.x) + 1152)] = (acc_o[(((int)threadIdx.x) + 1152)] / logsum[((((int)threadIdx.x) >> 6) + 18)]);
  acc_o[(((int)threadIdx.x) + 1280)] = (acc_o[(((int)threadIdx.x) + 1280)] / logsum[((((int)threadIdx.x) >> 6) + 20)]);
  acc_o[(((int)threadIdx.x) + 1408)] = (acc_o[(((int)threadIdx.x) + 1408)] / logsum[((((int)threadIdx.x) >> 6) + 22)]);
  acc_o[(((int)threadIdx.x) + 1536)] = (acc_o[(((int)threadIdx.x) + 1536)] / logsum[((((int)threadIdx.x) >> 6) + 24)]);
  acc_o[(((int)threadIdx.x) + 1664)] = (acc_o[(((int)threadIdx.x) + 1664)] / logsum[((((int)threadIdx.x) >> 6) + 26)]);
  acc_o[(((int)threadIdx.x) + 1792)] = (acc_o[(((int)threadIdx.x) + 1792)] / logsum[((((int)threadIdx.x) >> 6) + 28)]);
  acc_o[(((int)threadIdx.x) + 1920)] = (acc_o[(((int)threadIdx.x) + 1920)] / logsum[((((int)threadIdx.x) >> 6) + 30)]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  K_shared[((int)threadIdx.x)] = ((half)acc_o[((int)threadIdx.x)]);
  K_shared[(((int)threadIdx.x) + 128)] = ((half)acc_o[(((int)threadIdx.x) + 128)]);
  K_shared[(((int)threadIdx.x) + 256)] = ((half)acc_o[(((int)threadIdx.x) + 256)]);
  K_shared[(((int)threadIdx.x) + 384)] = ((half)acc_o[(((int)threadIdx.x) + 384)]);
  K_shared[(((int)threadIdx.x) + 512)] = ((half)acc_o[(((int)threadIdx.x) + 512)]);
  K_shared[(((int)threadIdx.x) + 640)] = ((half)acc_o[(((int)threadIdx.x) + 640)]);
  K_shared[(((int)threadIdx.x) + 768)] = ((half)acc_o[(((int)threadIdx.x) + 768)]);
  K_shared[(((int)threadIdx.x) + 896)] = ((half)acc_o[(((int)threadIdx.x) + 896)]);
  K_shared[(((int)threadIdx.x) + 1024)] = ((half)acc_o[(((int)threadIdx.x) + 1024)]);
  K_shared[(((int)threadIdx.x) + 1152)] = ((half)acc_o[(((int)threadIdx.x) + 1152)]);
  K_shared[(((int)threadIdx.x) + 1280)] = ((half)acc_o[(((int)threadIdx.x) + 1280)]);
  K_shared[(((int)threadIdx.x) + 1408)] = ((half)acc_o[(((int)threadIdx.x) + 1408)]);
  K_shared[(((int)threadIdx.x) + 1536)] = ((half)acc_o[(((int)threadIdx.x) + 1536)]);
  K_shared[(((int)threadIdx.x) + 1664)] = ((half)acc_o[(((int)threadIdx.x) + 1664)]);
  K_shared[(((int)threadIdx.x) + 1792)] = ((half)acc_o[(((int)threadIdx.x) + 1792)]);
  K_shared[(((int)threadIdx.x) + 1920)] = ((half)acc_o[(((int)threadIdx.x) + 1920)]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  *(device half4*)(Output_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 28672) - (((int)blockIdx.x) * 4096))) = *(threadgroup half4*)(K_shared + (((int)threadIdx.x) * 4));
  *(device half4*)(Output_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 29696) - (((int)blockIdx.x) * 4096))) = *(threadgroup half4*)(K_shared + ((((int)threadIdx.x) * 4) + 512));
  *(device half4*)(Output_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 30720) - (((int)blockIdx.x) * 4096))) = *(threadgroup half4*)(K_shared + ((((int)threadIdx.x) * 4) + 1024));
  *(device half4*)(Output_ptr + ((((((((int)threadIdx.x) >> 4) * 128) + (((int)blockIdx.y) * 64)) + ((((int)threadIdx.x) & 15) * 4)) + 31744) - (((int)blockIdx.x) * 4096))) = *(threadgroup half4*)(K_shared + ((((int)threadIdx.x) * 4) + 1536));
}


