// Function: main_kernel
#include <metal_stdlib>
using namespace metal;

union __TVMArgUnion {
 int v_int[2];
};

kernel void main_kernel(  device float* X_ptr [[ buffer(0) ]],
  device float* Y_ptr [[ buffer(1) ]],
  uint blockIdx [[threadgroup_position_in_grid]],
  uint threadIdx [[thread_position_in_threadgroup]]
) {
  thread float x[32];
  thread float v[4];
  thread float v_1[2];
  threadgroup float reduce_scratch[16];
  thread float v_2[4];
  thread float v_3[2];
  int cse_v2 = ((((int)blockIdx) * 4096) + (((int)threadIdx) * 4));
  *(thread float4*)(x + 0) = *(device float4*)(X_ptr + ((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)));
  int cse_v10 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 512);
  *(thread float4*)(x + 4) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 512));
  int cse_v11 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 1024);
  *(thread float4*)(x + 8) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 1024));
  int cse_v12 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 1536);
  *(thread float4*)(x + 12) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 1536));
  int cse_v13 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 2048);
  *(thread float4*)(x + 16) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 2048));
  int cse_v14 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 2560);
  *(thread float4*)(x + 20) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 2560));
  int cse_v15 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 3072);
  *(thread float4*)(x + 24) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 3072));
  int cse_v16 = (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 3584);
  *(thread float4*)(x + 28) = *(device float4*)(X_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 3584));
  v[0] = -INFINITY;
  v[1] = -INFINITY;
  v[2] = -INFINITY;
  v[3] = -INFINITY;
  float condval;
  if ((x[0] != x[0]) || (x[1] != x[1])) {
    condval = (x[0] + x[1]);
  } else {
    condval = max(x[0], x[1]);
  }
  v_1[0] = condval;
  float condval_1;
  if ((x[2] != x[2]) || (x[3] != x[3])) {
    condval_1 = (x[2] + x[3]);
  } else {
    condval_1 = max(x[2], x[3]);
  }
  v_1[1] = condval_1;
  float condval_2;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_2 = (v_1[0] + v_1[1]);
  } else {
    condval_2 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_2;
  float condval_3;
  if ((v[0] != v[0]) || (v_1[0] != v_1[0])) {
    condval_3 = (v[0] + v_1[0]);
  } else {
    condval_3 = max(v[0], v_1[0]);
  }
  v[0] = condval_3;
  float condval_4;
  if ((x[4] != x[4]) || (x[5] != x[5])) {
    condval_4 = (x[4] + x[5]);
  } else {
    condval_4 = max(x[4], x[5]);
  }
  v_1[0] = condval_4;
  float condval_5;
  if ((x[6] != x[6]) || (x[7] != x[7])) {
    condval_5 = (x[6] + x[7]);
  } else {
    condval_5 = max(x[6], x[7]);
  }
  v_1[1] = condval_5;
  float condval_6;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_6 = (v_1[0] + v_1[1]);
  } else {
    condval_6 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_6;
  float condval_7;
  if ((v[1] != v[1]) || (v_1[0] != v_1[0])) {
    condval_7 = (v[1] + v_1[0]);
  } else {
    condval_7 = max(v[1], v_1[0]);
  }
  v[1] = condval_7;
  float condval_8;
  if ((x[8] != x[8]) || (x[9] != x[9])) {
    condval_8 = (x[8] + x[9]);
  } else {
    condval_8 = max(x[8], x[9]);
  }
  v_1[0] = condval_8;
  float condval_9;
  if ((x[10] != x[10]) || (x[11] != x[11])) {
    condval_9 = (x[10] + x[11]);
  } else {
    condval_9 = max(x[10], x[11]);
  }
  v_1[1] = condval_9;
  float condval_10;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_10 = (v_1[0] + v_1[1]);
  } else {
    condval_10 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_10;
  float condval_11;
  if ((v[2] != v[2]) || (v_1[0] != v_1[0])) {
    condval_11 = (v[2] + v_1[0]);
  } else {
    condval_11 = max(v[2], v_1[0]);
  }
  v[2] = condval_11;
  float condval_12;
  if ((x[12] != x[12]) || (x[13] != x[13])) {
    condval_12 = (x[12] + x[13]);
  } else {
    condval_12 = max(x[12], x[13]);
  }
  v_1[0] = condval_12;
  float condval_13;
  if ((x[14] != x[14]) || (x[15] != x[15])) {
    condval_13 = (x[14] + x[15]);
  } else {
    condval_13 = max(x[14], x[15]);
  }
  v_1[1] = condval_13;
  float condval_14;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_14 = (v_1[0] + v_1[1]);
  } else {
    condval_14 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_14;
  float condval_15;
  if ((v[3] != v[3]) || (v_1[0] != v_1[0])) {
    condval_15 = (v[3] + v_1[0]);
  } else {
    condval_15 = max(v[3], v_1[0]);
  }
  v[3] = condval_15;
  float condval_16;
  if ((x[16] != x[16]) || (x[17] != x[17])) {
    condval_16 = (x[16] + x[17]);
  } else {
    condval_16 = max(x[16], x[17]);
  }
  v_1[0] = condval_16;
  float condval_17;
  if ((x[18] != x[18]) || (x[19] != x[19])) {
    condval_17 = (x[18] + x[19]);
  } else {
    condval_17 = max(x[18], x[19]);
  }
  v_1[1] = condval_17;
  float condval_18;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_18 = (v_1[0] + v_1[1]);
  } else {
    condval_18 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_18;
  float condval_19;
  if ((v[4] != v[4]) || (v_1[0] != v_1[0])) {
    condval_19 = (v[4] + v_1[0]);
  } else {
    condval_19 = max(v[4], v_1[0]);
  }
  v[4] = condval_19;
  float condval_20;
  if ((x[20] != x[20]) || (x[21] != x[21])) {
    condval_20 = (x[20] + x[21]);
  } else {
    condval_20 = max(x[20], x[21]);
  }
  v_1[0] = condval_20;
  float condval_21;
  if ((x[22] != x[22]) || (x[23] != x[23])) {
    condval_21 = (x[22] + x[23]);
  } else {
    condval_21 = max(x[22], x[23]);
  }
  v_1[1] = condval_21;
  float condval_22;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_22 = (v_1[0] + v_1[1]);
  } else {
    condval_22 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_22;
  float condval_23;
  if ((v[5] != v[5]) || (v_1[0] != v_1[0])) {
    condval_23 = (v[5] + v_1[0]);
  } else {
    condval_23 = max(v[5], v_1[0]);
  }
  v[5] = condval_23;
  float condval_24;
  if ((x[24] != x[24]) || (x[25] != x[25])) {
    condval_24 = (x[24] + x[25]);
  } else {
    condval_24 = max(x[24], x[25]);
  }
  v_1[0] = condval_24;
  float condval_25;
  if ((x[26] != x[26]) || (x[27] != x[27])) {
    condval_25 = (x[26] + x[27]);
  } else {
    condval_25 = max(x[26], x[27]);
  }
  v_1[1] = condval_25;
  float condval_26;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_26 = (v_1[0] + v_1[1]);
  } else {
    condval_26 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_26;
  float condval_27;
  if ((v[6] != v[6]) || (v_1[0] != v_1[0])) {
    condval_27 = (v[6] + v_1[0]);
  } else {
    condval_27 = max(v[6], v_1[0]);
  }
  v[6] = condval_27;
  float condval_28;
  if ((x[28] != x[28]) || (x[29] != x[29])) {
    condval_28 = (x[28] + x[29]);
  } else {
    condval_28 = max(x[28], x[29]);
  }
  v_1[0] = condval_28;
  float condval_29;
  if ((x[30] != x[30]) || (x[31] != x[31])) {
    condval_29 = (x[30] + x[31]);
  } else {
    condval_29 = max(x[30], x[31]);
  }
  v_1[1] = condval_29;
  float condval_30;
  if ((v_1[0] != v_1[0]) || (v_1[1] != v_1[1])) {
    condval_30 = (v_1[0] + v_1[1]);
  } else {
    condval_30 = max(v_1[0], v_1[1]);
  }
  v_1[0] = condval_30;
  float condval_31;
  if ((v[7] != v[7]) || (v_1[0] != v_1[0])) {
    condval_31 = (v[7] + v_1[0]);
  } else {
    condval_31 = max(v[7], v_1[0]);
  }
  v[7] = condval_31;
  int cse_v1 = (((int)threadIdx) & 31);
  int cse_v3 = ((((int)threadIdx) & 31) ^ 16);
  float v_4 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 16));
  float condval_32;
  if ((v[0] != v[0]) || (v_4 != v_4)) {
    condval_32 = (v[0] + v_4);
  } else {
    condval_32 = max(v[0], v_4);
  }
  v[0] = condval_32;
  int cse_v4 = ((((int)threadIdx) & 31) ^ 8);
  float v_5 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 8));
  float condval_33;
  if ((v[0] != v[0]) || (v_5 != v_5)) {
    condval_33 = (v[0] + v_5);
  } else {
    condval_33 = max(v[0], v_5);
  }
  v[0] = condval_33;
  int cse_v5 = ((((int)threadIdx) & 31) ^ 4);
  float v_6 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 4));
  float condval_34;
  if ((v[0] != v[0]) || (v_6 != v_6)) {
    condval_34 = (v[0] + v_6);
  } else {
    condval_34 = max(v[0], v_6);
  }
  v[0] = condval_34;
  int cse_v6 = ((((int)threadIdx) & 31) ^ 2);
  float v_7 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 2));
  float condval_35;
  if ((v[0] != v[0]) || (v_7 != v_7)) {
    condval_35 = (v[0] + v_7);
  } else {
    condval_35 = max(v[0], v_7);
  }
  v[0] = condval_35;
  int cse_v7 = ((((int)threadIdx) & 31) ^ 1);
  float v_8 = simd_shuffle(v[0], ((((int)threadIdx) & 31) ^ 1));
  float condval_36;
  if ((v[0] != v[0]) || (v_8 != v_8)) {
    condval_36 = (v[0] + v_8);
  } else {
    condval_36 = max(v[0], v_8);
  }
  v[0] = condval_36;
  float v_9 = simd_shuffle(v[1], ((((int)threadIdx) & 31) ^ 16));
  float condval_37;
  if ((v[1] != v[1]) || (v_9 != v_9)) {
    condval_37 = (v[1] + v_9);
  } else {
    condval_37 = max(v[1], v_9);
  }
  v[1] = condval_37;
  float v_10 = simd_shuffle(v[1], ((((int)threadIdx) & 31) ^ 8));
  float condval_38;
  if ((v[1] != v[1]) || (v_10 != v_10)) {
    condval_38 = (v[1] + v_10);
  } else {
    condval_38 = max(v[1], v_10);
  }
  v[1] = condval_38;
  float v_11 = simd_shuffle(v[1], ((((int)threadIdx) & 31) ^ 4));
  float condval_39;
  if ((v[1] != v[1]) || (v_11 != v_11)) {
    condval_39 = (v[1] + v_11);
  } else {
    condval_39 = max(v[1], v_11);
  }
  v[1] = condval_39;
  float v_12 = simd_shuffle(v[1], ((((int)threadIdx) & 31) ^ 2));
  float condval_40;
  if ((v[1] != v[1]) || (v_12 != v_12)) {
    condval_40 = (v[1] + v_12);
  } else {
    condval_40 = max(v[1], v_12);
  }
  v[1] = condval_40;
  float v_13 = simd_shuffle(v[1], ((((int)threadIdx) & 31) ^ 1));
  float condval_41;
  if ((v[1] != v[1]) || (v_13 != v_13)) {
    condval_41 = (v[1] + v_13);
  } else {
    condval_41 = max(v[1], v_13);
  }
  v[1] = condval_41;
  float v_14 = simd_shuffle(v[2], ((((int)threadIdx) & 31) ^ 16));
  float condval_42;
  if ((v[2] != v[2]) || (v_14 != v_14)) {
    condval_42 = (v[2] + v_14);
  } else {
    condval_42 = max(v[2], v_14);
  }
  v[2] = condval_42;
  float v_15 = simd_shuffle(v[2], ((((int)threadIdx) & 31) ^ 8));
  float condval_43;
  if ((v[2] != v[2]) || (v_15 != v_15)) {
    condval_43 = (v[2] + v_15);
  } else {
    condval_43 = max(v[2], v_15);
  }
  v[2] = condval_43;
  float v_16 = simd_shuffle(v[2], ((((int)threadIdx) & 31) ^ 4));
  float condval_44;
  if ((v[2] != v[2]) || (v_16 != v_16)) {
    condval_44 = (v[2] + v_16);
  } else {
    condval_44 = max(v[2], v_16);
  }
  v[2] = condval_44;
  float v_17 = simd_shuffle(v[2], ((((int)threadIdx) & 31) ^ 2));
  float condval_45;
  if ((v[2] != v[2]) || (v_17 != v_17)) {
    condval_45 = (v[2] + v_17);
  } else {
    condval_45 = max(v[2], v_17);
  }
  v[2] = condval_45;
  float v_18 = simd_shuffle(v[2], ((((int)threadIdx) & 31) ^ 1));
  float condval_46;
  if ((v[2] != v[2]) || (v_18 != v_18)) {
    condval_46 = (v[2] + v_18);
  } else {
    condval_46 = max(v[2], v_18);
  }
  v[2] = condval_46;
  float v_19 = simd_shuffle(v[3], ((((int)threadIdx) & 31) ^ 16));
  float condval_47;
  if ((v[3] != v[3]) || (v_19 != v_19)) {
    condval_47 = (v[3] + v_19);
  } else {
    condval_47 = max(v[3], v_19);
  }
  v[3] = condval_47;
  float v_20 = simd_shuffle(v[3], ((((int)threadIdx) & 31) ^ 8));
  float condval_48;
  if ((v[3] != v[3]) || (v_20 != v_20)) {
    condval_48 = (v[3] + v_20);
  } else {
    condval_48 = max(v[3], v_20);
  }
  v[3] = condval_48;
  float v_21 = simd_shuffle(v[3], ((((int)threadIdx) & 31) ^ 4));
  float condval_49;
  if ((v[3] != v[3]) || (v_21 != v_21)) {
    condval_49 = (v[3] + v_21);
  } else {
    condval_49 = max(v[3], v_21);
  }
  v[3] = condval_49;
  float v_22 = simd_shuffle(v[3], ((((int)threadIdx) & 31) ^ 2));
  float condval_50;
  if ((v[3] != v[3]) || (v_22 != v_22)) {
    condval_50 = (v[3] + v_22);
  } else {
    condval_50 = max(v[3], v_22);
  }
  v[3] = condval_50;
  float v_23 = simd_shuffle(v[3], ((((int)threadIdx) & 31) ^ 1));
  float condval_51;
  if ((v[3] != v[3]) || (v_23 != v_23)) {
    condval_51 = (v[3] + v_23);
  } else {
    condval_51 = max(v[3], v_23);
  }
  v[3] = condval_51;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v8 = ((((int)threadIdx) >> 5) * 4);
  int cse_v17 = (((((int)threadIdx) >> 5) * 4) + 1);
  int cse_v18 = (((((int)threadIdx) >> 5) * 4) + 2);
  int cse_v19 = (((((int)threadIdx) >> 5) * 4) + 3);
  if ((((int)threadIdx) % 32) == 0) {
    reduce_scratch[((((int)threadIdx) >> 5) * 4)] = v[0];
    reduce_scratch[(((((int)threadIdx) >> 5) * 4) + 1)] = v[1];
    reduce_scratch[(((((int)threadIdx) >> 5) * 4) + 2)] = v[2];
    reduce_scratch[(((((int)threadIdx) >> 5) * 4) + 3)] = v[3];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int cse_v9 = ((((int)threadIdx) >> 6) * 8);
  v[0] = reduce_scratch[((((int)threadIdx) >> 6) * 8)];
  int cse_v20 = (((((int)threadIdx) >> 6) * 8) + 4);
  float condval_52;
  if ((v[0] != v[0]) || (reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 4)] != reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 4)])) {
    condval_52 = (v[0] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 4)]);
  } else {
    condval_52 = max(v[0], reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 4)]);
  }
  v[0] = condval_52;
  int cse_v21 = (((((int)threadIdx) >> 6) * 8) + 1);
  v[1] = reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 1)];
  int cse_v22 = (((((int)threadIdx) >> 6) * 8) + 5);
  float condval_53;
  if ((v[1] != v[1]) || (reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 5)] != reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 5)])) {
    condval_53 = (v[1] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 5)]);
  } else {
    condval_53 = max(v[1], reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 5)]);
  }
  v[1] = condval_53;
  int cse_v23 = (((((int)threadIdx) >> 6) * 8) + 2);
  v[2] = reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 2)];
  int cse_v24 = (((((int)threadIdx) >> 6) * 8) + 6);
  float condval_54;
  if ((v[2] != v[2]) || (reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 6)] != reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 6)])) {
    condval_54 = (v[2] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 6)]);
  } else {
    condval_54 = max(v[2], reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 6)]);
  }
  v[2] = condval_54;
  int cse_v25 = (((((int)threadIdx) >> 6) * 8) + 3);
  v[3] = reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 3)];
  int cse_v26 = (((((int)threadIdx) >> 6) * 8) + 7);
  float condval_55;
  if ((v[3] != v[3]) || (reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 7)] != reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 7)])) {
    condval_55 = (v[3] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 7)]);
  } else {
    condval_55 = max(v[3], reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 7)]);
  }
  v[3] = condval_55;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  v[0] = v[0];
  v[1] = v[1];
  v[2] = v[2];
  v[3] = v[3];
  x[0] = exp2(((x[0] - v[0]) * 1.442695e+00f));
  x[1] = exp2(((x[1] - v[0]) * 1.442695e+00f));
  x[2] = exp2(((x[2] - v[0]) * 1.442695e+00f));
  x[3] = exp2(((x[3] - v[0]) * 1.442695e+00f));
  x[4] = exp2(((x[4] - v[1]) * 1.442695e+00f));
  x[5] = exp2(((x[5] - v[1]) * 1.442695e+00f));
  x[6] = exp2(((x[6] - v[1]) * 1.442695e+00f));
  x[7] = exp2(((x[7] - v[1]) * 1.442695e+00f));
  x[8] = exp2(((x[8] - v[2]) * 1.442695e+00f));
  x[9] = exp2(((x[9] - v[2]) * 1.442695e+00f));
  x[10] = exp2(((x[10] - v[2]) * 1.442695e+00f));
  x[11] = exp2(((x[11] - v[2]) * 1.442695e+00f));
  x[12] = exp2(((x[12] - v[3]) * 1.442695e+00f));
  x[13] = exp2(((x[13] - v[3]) * 1.442695e+00f));
  x[14] = exp2(((x[14] - v[3]) * 1.442695e+00f));
  x[15] = exp2(((x[15] - v[3]) * 1.442695e+00f));
  x[16] = exp2(((x[16] - v[4]) * 1.442695e+00f));
  x[17] = exp2(((x[17] - v[4]) * 1.442695e+00f));
  x[18] = exp2(((x[18] - v[4]) * 1.442695e+00f));
  x[19] = exp2(((x[19] - v[4]) * 1.442695e+00f));
  x[20] = exp2(((x[20] - v[5]) * 1.442695e+00f));
  x[21] = exp2(((x[21] - v[5]) * 1.442695e+00f));
  x[22] = exp2(((x[22] - v[5]) * 1.442695e+00f));
  x[23] = exp2(((x[23] - v[5]) * 1.442695e+00f));
  x[24] = exp2(((x[24] - v[6]) * 1.442695e+00f));
  x[25] = exp2(((x[25] - v[6]) * 1.442695e+00f));
  x[26] = exp2(((x[26] - v[6]) * 1.442695e+00f));
  x[27] = exp2(((x[27] - v[6]) * 1.442695e+00f));
  x[28] = exp2(((x[28] - v[7]) * 1.442695e+00f));
  x[29] = exp2(((x[29] - v[7]) * 1.442695e+00f));
  x[30] = exp2(((x[30] - v[7]) * 1.442695e+00f));
  x[31] = exp2(((x[31] - v[7]) * 1.442695e+00f));
  v_2[0] = 0.000000e+00f;
  v_2[1] = 0.000000e+00f;
  v_2[2] = 0.000000e+00f;
  v_2[3] = 0.000000e+00f;
  v_3[0] = (x[0] + x[1]);
  v_3[1] = (x[2] + x[3]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[0] = (v_2[0] + v_3[0]);
  v_3[0] = (x[4] + x[5]);
  v_3[1] = (x[6] + x[7]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[1] = (v_2[1] + v_3[0]);
  v_3[0] = (x[8] + x[9]);
  v_3[1] = (x[10] + x[11]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[2] = (v_2[2] + v_3[0]);
  v_3[0] = (x[12] + x[13]);
  v_3[1] = (x[14] + x[15]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[3] = (v_2[3] + v_3[0]);
  v_3[0] = (x[16] + x[17]);
  v_3[1] = (x[18] + x[19]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[4] = (v_2[4] + v_3[0]);
  v_3[0] = (x[20] + x[21]);
  v_3[1] = (x[22] + x[23]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[5] = (v_2[5] + v_3[0]);
  v_3[0] = (x[24] + x[25]);
  v_3[1] = (x[26] + x[27]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[6] = (v_2[6] + v_3[0]);
  v_3[0] = (x[28] + x[29]);
  v_3[1] = (x[30] + x[31]);
  v_3[0] = (v_3[0] + v_3[1]);
  v_2[7] = (v_2[7] + v_3[0]);
  float v_24 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 16));
  v_2[0] = (v_2[0] + v_24);
  float v_25 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 8));
  v_2[0] = (v_2[0] + v_25);
  float v_26 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 4));
  v_2[0] = (v_2[0] + v_26);
  float v_27 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 2));
  v_2[0] = (v_2[0] + v_27);
  float v_28 = simd_shuffle(v_2[0], ((((int)threadIdx) & 31) ^ 1));
  v_2[0] = (v_2[0] + v_28);
  float v_29 = simd_shuffle(v_2[1], ((((int)threadIdx) & 31) ^ 16));
  v_2[1] = (v_2[1] + v_29);
  float v_30 = simd_shuffle(v_2[1], ((((int)threadIdx) & 31) ^ 8));
  v_2[1] = (v_2[1] + v_30);
  float v_31 = simd_shuffle(v_2[1], ((((int)threadIdx) & 31) ^ 4));
  v_2[1] = (v_2[1] + v_31);
  float v_32 = simd_shuffle(v_2[1], ((((int)threadIdx) & 31) ^ 2));
  v_2[1] = (v_2[1] + v_32);
  float v_33 = simd_shuffle(v_2[1], ((((int)threadIdx) & 31) ^ 1));
  v_2[1] = (v_2[1] + v_33);
  float v_34 = simd_shuffle(v_2[2], ((((int)threadIdx) & 31) ^ 16));
  v_2[2] = (v_2[2] + v_34);
  float v_35 = simd_shuffle(v_2[2], ((((int)threadIdx) & 31) ^ 8));
  v_2[2] = (v_2[2] + v_35);
  float v_36 = simd_shuffle(v_2[2], ((((int)threadIdx) & 31) ^ 4));
  v_2[2] = (v_2[2] + v_36);
  float v_37 = simd_shuffle(v_2[2], ((((int)threadIdx) & 31) ^ 2));
  v_2[2] = (v_2[2] + v_37);
  float v_38 = simd_shuffle(v_2[2], ((((int)threadIdx) & 31) ^ 1));
  v_2[2] = (v_2[2] + v_38);
  float v_39 = simd_shuffle(v_2[3], ((((int)threadIdx) & 31) ^ 16));
  v_2[3] = (v_2[3] + v_39);
  float v_40 = simd_shuffle(v_2[3], ((((int)threadIdx) & 31) ^ 8));
  v_2[3] = (v_2[3] + v_40);
  float v_41 = simd_shuffle(v_2[3], ((((int)threadIdx) & 31) ^ 4));
  v_2[3] = (v_2[3] + v_41);
  float v_42 = simd_shuffle(v_2[3], ((((int)threadIdx) & 31) ^ 2));
  v_2[3] = (v_2[3] + v_42);
  float v_43 = simd_shuffle(v_2[3], ((((int)threadIdx) & 31) ^ 1));
  v_2[3] = (v_2[3] + v_43);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if ((((int)threadIdx) % 32) == 0) {
    reduce_scratch[((((int)threadIdx) >> 5) * 4)] = v_2[0];
    reduce_scratch[(((((int)threadIdx) >> 5) * 4) + 1)] = v_2[1];
    reduce_scratch[(((((int)threadIdx) >> 5) * 4) + 2)] = v_2[2];
    reduce_scratch[(((((int)threadIdx) >> 5) * 4) + 3)] = v_2[3];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  v_2[0] = reduce_scratch[((((int)threadIdx) >> 6) * 8)];
  v_2[0] = (v_2[0] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 4)]);
  v_2[1] = reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 1)];
  v_2[1] = (v_2[1] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 5)]);
  v_2[2] = reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 2)];
  v_2[2] = (v_2[2] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 6)]);
  v_2[3] = reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 3)];
  v_2[3] = (v_2[3] + reduce_scratch[(((((int)threadIdx) >> 6) * 8) + 7)]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  v_2[0] = v_2[0];
  v_2[1] = v_2[1];
  v_2[2] = v_2[2];
  v_2[3] = v_2[3];
  x[0] = (x[0] / v_2[0]);
  x[1] = (x[1] / v_2[0]);
  x[2] = (x[2] / v_2[0]);
  x[3] = (x[3] / v_2[0]);
  x[4] = (x[4] / v_2[1]);
  x[5] = (x[5] / v_2[1]);
  x[6] = (x[6] / v_2[1]);
  x[7] = (x[7] / v_2[1]);
  x[8] = (x[8] / v_2[2]);
  x[9] = (x[9] / v_2[2]);
  x[10] = (x[10] / v_2[2]);
  x[11] = (x[11] / v_2[2]);
  x[12] = (x[12] / v_2[3]);
  x[13] = (x[13] / v_2[3]);
  x[14] = (x[14] / v_2[3]);
  x[15] = (x[15] / v_2[3]);
  x[16] = (x[16] / v_2[4]);
  x[17] = (x[17] / v_2[4]);
  x[18] = (x[18] / v_2[4]);
  x[19] = (x[19] / v_2[4]);
  x[20] = (x[20] / v_2[5]);
  x[21] = (x[21] / v_2[5]);
  x[22] = (x[22] / v_2[5]);
  x[23] = (x[23] / v_2[5]);
  x[24] = (x[24] / v_2[6]);
  x[25] = (x[25] / v_2[6]);
  x[26] = (x[26] / v_2[6]);
  x[27] = (x[27] / v_2[6]);
  x[28] = (x[28] / v_2[7]);
  x[29] = (x[29] / v_2[7]);
  x[30] = (x[30] / v_2[7]);
  x[31] = (x[31] / v_2[7]);
  *(device float4*)(Y_ptr + ((((int)blockIdx) * 4096) + (((int)threadIdx) * 4))) = *(thread float4*)(x + 0);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 512)) = *(thread float4*)(x + 4);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 1024)) = *(thread float4*)(x + 8);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 1536)) = *(thread float4*)(x + 12);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 2048)) = *(thread float4*)(x + 16);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 2560)) = *(thread float4*)(x + 20);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 3072)) = *(thread float4*)(x + 24);
  *(device float4*)(Y_ptr + (((((int)blockIdx) * 4096) + (((int)threadIdx) * 4)) + 3584)) = *(thread float4*)(x + 28);
}


