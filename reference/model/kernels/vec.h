// The vector type the kernels compute with, sized by the instruction set the build targets
// (-march=native): W = 16 floats with AVX-512, 8 otherwise (AVX2), and the few vector routines
// both kernel sources need (GCC vector extensions: portable, no intrinsics).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
constexpr int W = 16;
#else
constexpr int W = 8;
#endif

typedef float vec __attribute__((vector_size(W * 4), aligned(W * 4)));
typedef int32_t ivec __attribute__((vector_size(W * 4)));

inline vec splat(float a) { return vec{} + a; }
inline vec loadu(const float* p) { vec v; std::memcpy(&v, p, sizeof v); return v; }
inline void storeu(float* p, vec v) { std::memcpy(p, &v, sizeof v); }

inline float hmax(vec v) {
  float m = v[0];
  for (int j = 1; j < W; ++j) m = v[j] > m ? v[j] : m;
  return m;
}

inline float hsum(vec v) {
  float s = 0.0f;
  for (int j = 0; j < W; ++j) s += v[j];
  return s;
}

// e^x, lane by lane (Cephes' expf: 2^n times a degree-6 polynomial of the remainder, ~1 ulp) for x in
// [-87, 88]; x is clamped to that range first (below: under 1e-37, for masked scores).
inline vec exp_vec(vec x) {
  x = x < splat(-87.0f) ? splat(-87.0f) : x;
  x = x > splat(88.0f) ? splat(88.0f) : x;
  const vec n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // x / ln 2 rounded to nearest
  const vec r = x - n * 0.693359375f + n * 2.12194440e-4f;
  vec p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const ivec bits = (__builtin_convertvector(n, ivec) + 127) << 23;  // 2^n
  vec scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// m[W] rows of W floats -> t[c][j] = m[j][c]: log2(W) rounds of two-source shuffles, each pairing
// the rows b apart and interleaving their b-lane blocks (b = 1, 2, 4, ...)
inline void transpose(const vec* m, vec* t) {
  vec a[W], b[W];
  for (int j = 0; j < W; ++j) a[j] = m[j];
#if defined(__AVX512F__)
  for (int j = 0; j < W; j += 2) {
    b[j] = __builtin_shufflevector(a[j], a[j + 1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
    b[j + 1] = __builtin_shufflevector(a[j], a[j + 1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  }
  for (int j = 0; j < W; j += 4)
    for (int u = 0; u < 2; ++u) {
      a[j + u] = __builtin_shufflevector(b[j + u], b[j + u + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      a[j + u + 2] = __builtin_shufflevector(b[j + u], b[j + u + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
  for (int j = 0; j < W; j += 8)
    for (int u = 0; u < 4; ++u) {
      b[j + u] = __builtin_shufflevector(a[j + u], a[j + u + 4], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
      b[j + u + 4] = __builtin_shufflevector(a[j + u], a[j + u + 4], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    }
  for (int u = 0; u < 8; ++u) {
    t[u] = __builtin_shufflevector(b[u], b[u + 8], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    t[u + 8] = __builtin_shufflevector(b[u], b[u + 8], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
#else
  for (int j = 0; j < W; j += 2) {
    b[j] = __builtin_shufflevector(a[j], a[j + 1], 0, 8, 2, 10, 4, 12, 6, 14);
    b[j + 1] = __builtin_shufflevector(a[j], a[j + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  }
  for (int j = 0; j < W; j += 4)
    for (int u = 0; u < 2; ++u) {
      a[j + u] = __builtin_shufflevector(b[j + u], b[j + u + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      a[j + u + 2] = __builtin_shufflevector(b[j + u], b[j + u + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int u = 0; u < 4; ++u) {
    t[u] = __builtin_shufflevector(a[u], a[u + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    t[u + 4] = __builtin_shufflevector(a[u], a[u + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
#endif
}
