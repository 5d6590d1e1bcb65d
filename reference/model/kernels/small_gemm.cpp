// y = x W^T for a few rows x (1..16) with pre-packed weights: the target's verify pass.
//
// A pass over k tokens reads every weight once; MKL's small-M path reads them at ~9 GB/s and
// steps up at M = 4 (docs/fast-backend.md). Here the weights are packed once into panels of
// W output columns, [P, I, W], so each panel is one sequential stream, and every weight
// vector is multiplied into a chunk of rows while it is in a register. Accumulation over the
// input dimension runs in order, as in a plain dot product. GCC vector extensions keep it
// portable (vec.h); the register tiling follows the vector width the build targets (-march=native):
//   AVX-512: W = 16 floats, 32 registers: all k rows at once, 4 panels for k <= 6, else 2;
//   AVX2 (and narrower): W = 8 floats, 16 registers: chunks of 6 rows x 2 panels and the
//   rows left over across 6 panels (`step`), a chunk re-reading the panels from cache.
// P is padded to whole units of U panels (4 with AVX-512, 6 with AVX2), what one step covers at
// most. Each panel's stream is prefetched PREFETCH input indices ahead (the hardware prefetcher
// alone left a pass over 2-6 rows slower than one over a single row).
// Panel groups are split over torch's threads (at::parallel_for: OpenMP, so the build needs
// -fopenmp, else it runs on one thread).
// Panels may also hold bfloat16 weights (a draft's: half the bytes a matrix-vector product
// streams), widened to fp32 in registers; x, the accumulation and y stay fp32.
// `small_glu` runs a gate and an up projection packed together (each unit: U / 2 panels of gate
// columns, then the same columns of up) and writes silu(gate) * up: Llama's MLP up to its down
// projection, in one call.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vec.h"

#if defined(__AVX512F__)
constexpr int MAX_CHUNK = 16;
constexpr int U = 4;
#else
constexpr int MAX_CHUNK = 6;
constexpr int U = 6;
#endif

// how far ahead (in input indices) each panel's stream is prefetched: 4 KB at W = 8
constexpr int64_t PREFETCH = 128;

typedef uint16_t half_vec __attribute__((vector_size(W * 2)));
typedef uint32_t word_vec __attribute__((vector_size(W * 4)));

// W weights of a panel row as fp32: float panels are read as they are, bfloat16 ones (the upper
// 16 bits of a float) widened exactly
static inline vec load(const float* p) { return *reinterpret_cast<const vec*>(p); }
static inline vec load(const uint16_t* p) {
  half_vec h;
  std::memcpy(&h, p, sizeof h);
  const word_vec u = __builtin_convertvector(h, word_vec) << 16;
  vec f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// rows r0..r0+K-1 of x [rows, I] (row-major); w: NP panels [NP][I][W] (I * W floats apart); y: [KT, O];
// col: the first output column of the panels.
template <typename T, int K, int NP>
static void panels(const float* x, int64_t r0, int64_t I, const T* w, float* y, int64_t O, int64_t col) {
  vec acc[NP][K];
  for (int p = 0; p < NP; ++p)
    for (int k = 0; k < K; ++k) acc[p][k] = vec{};
  const int64_t stride = I * W;
  const float* xr = x + r0 * I;
  for (int64_t i = 0; i < I; ++i) {
    vec wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = load(w + p * stride + i * W);
    if ((i * W * int64_t(sizeof(T))) % 64 == 0)  // once per 64-byte line of each panel
      for (int p = 0; p < NP; ++p) __builtin_prefetch(w + p * stride + (i + PREFETCH) * W);
    for (int k = 0; k < K; ++k) {
      const float b = xr[k * I + i];
      for (int p = 0; p < NP; ++p) acc[p][k] += b * wv[p];
    }
  }
  for (int p = 0; p < NP; ++p)
    for (int k = 0; k < K; ++k) storeu(y + (r0 + k) * O + col + p * W, acc[p][k]);
}

template <typename T>
using PanelFn = void (*)(const float*, int64_t, int64_t, const T*, float*, int64_t, int64_t);

template <typename T, int NP, int... R>
static PanelFn<T> pick(int64_t rows, std::integer_sequence<int, R...>) {
  static const PanelFn<T> fns[] = {panels<T, R + 1, NP>...};
  return fns[rows - 1];
}

// One step covers g panels (P is a multiple of every g: units of U panels).
//   AVX-512: g = NP = 4 for k <= 6, else 2: one call over all k rows.
//   AVX2: g = 6: each full chunk of 6 rows as three calls of 2 panels (12 accumulators + 2
//   weight vectors + a broadcast: as many FMAs in flight as two pipes with a latency of about
//   6 cycles need), and the r = k % 6 rows left over with the panels per call that ran them
//   fastest (single-thread, rows x panels, ns per input index and panel: 1 x 6 0.50, 2 x 6
//   0.55 (the weights read from cache as FMA operands), 3 x 2 0.92, 4 x 3 1.00 against 4 x 2
//   1.15, 5 x 2 1.11; a chunk of 2 panels with fewer than 6 rows waits on its FMAs' latency,
//   so k = 7 as 6 + 1 rows of 2 panels cost twice k = 6).
#if defined(__AVX512F__)
template <typename T>
static PanelFn<T> choose(int64_t rows, int np) {
  using Rows = std::make_integer_sequence<int, MAX_CHUNK>;
  return np == 4 ? pick<T, 4>(rows, Rows{}) : pick<T, 2>(rows, Rows{});
}

static int group_size(int64_t K) { return K <= 6 ? 4 : 2; }

template <typename T>
static void step(const float* x, int64_t K, int64_t I, const T* w, float* y, int64_t O, int64_t first, int g) {
  choose<T>(K, g)(x, 0, I, w + first * I * W, y, O, first * W);
}
#else
template <typename T>
static PanelFn<T> choose(int64_t rows, int np) {
  using Rows = std::make_integer_sequence<int, MAX_CHUNK>;
  switch (np) {
    case 6: return pick<T, 6>(rows, std::make_integer_sequence<int, 2>{});
    case 3: return pick<T, 3>(rows, std::make_integer_sequence<int, 4>{});
    default: return pick<T, 2>(rows, Rows{});
  }
}

static int group_size(int64_t) { return 6; }

constexpr int REST_PANELS[MAX_CHUNK] = {0, 6, 6, 2, 3, 2};  // panels per call for r rows left over

template <typename T>
static void step(const float* x, int64_t K, int64_t I, const T* w, float* y, int64_t O, int64_t first, int g) {
  const int64_t full = K - K % MAX_CHUNK;
  for (int64_t r0 = 0; r0 < full; r0 += MAX_CHUNK)
    for (int64_t p = first; p < first + g; p += 2) choose<T>(MAX_CHUNK, 2)(x, r0, I, w + p * I * W, y, O, p * W);
  const int64_t rest = K - full;
  if (rest == 0) return;
  const int np = REST_PANELS[rest];
  for (int64_t p = first; p < first + g; p += np) choose<T>(rest, np)(x, full, I, w + p * I * W, y, O, p * W);
}
#endif

// W [O, I] -> panels [P, I, W], P = ceil(O / W) rounded up to whole units of U panels (zero columns), in
// float32 or, with bf16, bfloat16 (rounded to nearest even).
torch::Tensor pack(torch::Tensor weight, bool bf16) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat32, "pack takes a float32 [O, I] weight");
  const int64_t O = weight.size(0), I = weight.size(1), P = (O + U * W - 1) / (U * W) * U;
  auto padded = torch::zeros({P * W, I}, weight.options());
  padded.narrow(0, 0, O).copy_(weight);
  auto panels = padded.view({P, W, I}).transpose(1, 2).contiguous();
  return bf16 ? panels.to(torch::kBFloat16) : panels;
}

// gate, up [O, I] -> one packed weight whose every unit of U panels holds U / 2 panels of gate columns, then
// the same columns of up (O zero-padded to a multiple of U W / 2): what small_glu reads.
torch::Tensor pack_glu(torch::Tensor gate, torch::Tensor up, bool bf16) {
  TORCH_CHECK(gate.dim() == 2 && gate.sizes() == up.sizes(), "pack_glu takes two float32 [O, I] weights of one shape");
  const int64_t O = gate.size(0), I = gate.size(1), half = U * W / 2, units = (O + half - 1) / half;
  auto g = torch::zeros({units * half, I}, gate.options()), u = torch::zeros({units * half, I}, up.options());
  g.narrow(0, 0, O).copy_(gate);
  u.narrow(0, 0, O).copy_(up);
  return pack(torch::stack({g.view({units, half, I}), u.view({units, half, I})}, 1).view({units * U * W, I}), bf16);
}

static void check(const torch::Tensor& x, const torch::Tensor& packed, int64_t& K, int64_t& I) {
  TORCH_CHECK(x.dim() >= 1 && x.scalar_type() == torch::kFloat32, "the kernel takes float32 [..., I] rows");
  I = x.size(-1);
  K = I > 0 ? x.numel() / I : 0;
  TORCH_CHECK(K >= 1 && K <= 16, "the kernel takes 1..16 rows, got ", K);
  TORCH_CHECK(packed.dim() == 3 && packed.size(1) == I && packed.size(2) == W && packed.size(0) % U == 0,
              "packed weight does not match the input width");
  TORCH_CHECK(packed.scalar_type() == torch::kFloat32 || packed.scalar_type() == torch::kBFloat16,
              "packed weights are float32 or bfloat16");
}

// f(first panel, the packed weights) over pieces of `per` panels, split over torch's threads.
template <typename F>
static void over_panels(const torch::Tensor& packed, int64_t per, F f) {
  at::parallel_for(0, packed.size(0) / per, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      if (packed.scalar_type() == torch::kBFloat16)
        f(s * per, reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>()));
      else
        f(s * per, packed.data_ptr<float>());
    }
  });
}

// x [..., I] (1..16 rows in all), packed [P, I, W] -> y [..., out_features]: the shapes are
// handled here, not by two reshapes per call in Python (211 calls a pass)
torch::Tensor small_linear(torch::Tensor x, torch::Tensor packed, int64_t out_features) {
  int64_t K, I;
  check(x, packed, K, I);
  auto xc = x.reshape({K, I}).contiguous();
  const int64_t cols = packed.size(0) * W;
  auto y = torch::empty({K, cols}, x.options());
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int g = group_size(K);
  over_panels(packed, g, [&](int64_t first, auto w) { step(xp, K, I, w, yp, cols, first, g); });
  auto sizes = x.sizes().vec();
  sizes.back() = out_features;
  return (out_features == cols ? y : y.narrow(1, 0, out_features).contiguous()).view(sizes);
}

// x [..., I] (1..16 rows), packed = pack_glu(gate, up) -> silu(x gate^T) * (x up^T) [..., out_features]
torch::Tensor small_glu(torch::Tensor x, torch::Tensor packed, int64_t out_features) {
  int64_t K, I;
  check(x, packed, K, I);
  auto xc = x.reshape({K, I}).contiguous();
  constexpr int64_t half = U * W / 2;
  const int64_t cols = packed.size(0) / U * half;
  auto y = torch::empty({K, cols}, x.options());
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int g = group_size(K);
  over_panels(packed, U, [&](int64_t first, auto w) {
    float both[16 * U * W];  // this unit's gate and up columns for every row
    for (int64_t p = 0; p < U; p += g) step(xp, K, I, w + first * I * W, both, U * W, p, g);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < half; j += W) {
        const vec gate = loadu(both + k * U * W + j), up = loadu(both + k * U * W + half + j);
        storeu(yp + k * cols + first / U * half + j, gate / (1.0f + exp_vec(-gate)) * up);
      }
  });
  auto sizes = x.sizes().vec();
  sizes.back() = out_features;
  return (out_features == cols ? y : y.narrow(1, 0, out_features).contiguous()).view(sizes);
}

int64_t lanes() { return W; }

// How many of torch's threads one at::parallel_for over n items ran on (1 if the build lost
// OpenMP, which it did once: tests/test_core_backend.py).
int64_t parallel_threads(int64_t n) {
  std::vector<char> used(at::get_num_threads(), 0);
  at::parallel_for(0, n, 1, [&](int64_t, int64_t) { used[at::get_thread_num()] = 1; });
  return std::count(used.begin(), used.end(), 1);
}

// short_ops.cpp
torch::Tensor short_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, c10::optional<torch::Tensor> mask,
                              double scale);
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("pack", &pack, "pack a float32 [O, I] weight into [P, I, W] panels (float32 or bfloat16)",
        py::arg("weight"), py::arg("bf16") = false);
  m.def("pack_glu", &pack_glu, "pack a gate and an up weight together for small_glu", py::arg("gate"), py::arg("up"),
        py::arg("bf16") = false);
  m.def("small_linear", &small_linear, "x [..., I] (at most 16 rows) times a packed weight");
  m.def("small_glu", &small_glu, "silu(x gate^T) * (x up^T) for at most 16 rows, gate and up packed by pack_glu");
  m.def("short_attention", &short_attention, "softmax(q k^T scale + mask) v for a few query rows, grouped-query",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("scale"));
  m.def("rms_norm", &rms_norm, "weight * x / sqrt(mean(x^2) + eps) over the last dimension");
  m.def("lanes", &lanes, "W: the floats per vector register this build targets");
  m.def("parallel_threads", &parallel_threads, "threads one parallel_for over n items ran on");
}
