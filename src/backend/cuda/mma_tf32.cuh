// f32 products on tensor cores at about f32 accuracy, for the kernels whose operands are f32 values that must
// not be rounded to bf16 (gated_delta_rule_chunks_tc.cu: the delta rule's f32 state and its WY factors). An
// operand is split into tf32 pieces (10 fraction bits each) whose sum is it, and a · b is taken as the sum
// of the piece products down to a chosen size: with two pieces ("3xTF32": hi·hi + hi·lo + lo·hi) each
// product keeps ~21 bits where one tf32 product keeps 11; with three, all of f32's 24. The tensor core sums a
// step's products and its accumulator by truncating rather than rounding, so a caller that wants f32's
// round-to-nearest across steps starts each step from zero and adds it in f32
// (gated_delta_rule_chunks_tc.cu).
//
// Fragment layouts of mma.m16n8k8 .tf32 (PTX ISA), g = lane / 4, t = lane % 4:
//   A 16x8 row-major: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
//   B 8x8 "col":      b0 (k t, n g), b1 (k t+4, n g)
//   C 16x8 f32:       c0 c1 (g, 2t..2t+1), c2 c3 (g+8, 2t..2t+1)
// As with mma.cuh's bf16 instruction, element (i, j) of one instruction's result comes from row i of A,
// column j of B and C(i, j) only: a chain of these over k in a fixed order gives an element's bits
// whatever tile or launch shape computed it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace tf::cuda::mma {

// x as P tf32 pieces, largest first: piece i = tf32(x - pieces before it) (round to nearest, ties away),
// each subtraction exact in f32. P = 2: hi + lo to ~22 bits; P = 3: all of x's 24 bits.
template <int P>
__device__ __forceinline__ void split_tf32(float x, uint32_t (&out)[P]) {
#pragma unroll
  for (int i = 0; i < P; ++i) {
    uint32_t h;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(h) : "f"(x));
    h &= 0xffffe000u;  // the tf32 value as an f32 bit pattern
    out[i] = h;
    x -= __uint_as_float(h);
  }
}

// d += a · b (tf32 inputs, f32 accumulators), m16n8k8.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// An f32 A fragment (a0..a3 above) split once into P pieces for the several B fragments it meets.
template <int P>
struct F32A {
  uint32_t v[P][4];
  __device__ __forceinline__ explicit F32A(const float (&a)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t p[P];
      split_tf32<P>(a[i], p);
#pragma unroll
      for (int j = 0; j < P; ++j) v[j][i] = p[j];
    }
  }
};

// d += a · b at about f32 accuracy; b = (b0, b1) as f32. The piece products a_i · b_j with i + j < P (P = 2:
// 3 products, ~2^-21 relative; P = 3: 6 products, ~2^-32), the smallest first.
template <int P>
__device__ __forceinline__ void mma_f32(float (&d)[4], const F32A<P>& a, float b0, float b1) {
  uint32_t p0[P], p1[P];
  split_tf32<P>(b0, p0);
  split_tf32<P>(b1, p1);
#pragma unroll
  for (int s = P - 1; s >= 0; --s)
#pragma unroll
    for (int i = 0; i <= s; ++i) mma_tf32(d, a.v[i], p0[s - i], p1[s - i]);
}

}  // namespace tf::cuda::mma
