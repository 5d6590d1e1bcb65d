// y = x W^T for a few rows x (1..16) with pre-packed fp32 weights: the target's verify pass.
//
// A pass over k tokens reads every weight once; MKL's small-M path reads them at ~9 GB/s and
// steps up at M = 4 (docs/fast-backend.md). Here the weights are packed once into panels of
// W output columns, [P, I, W], so each panel is one sequential stream, and every weight
// vector is multiplied into a chunk of rows while it is in a register. Accumulation over the
// input dimension runs in order, as in a plain dot product. GCC vector extensions keep it
// portable; the register tiling follows the vector width the build targets (-march=native):
//   AVX-512: W = 16 floats, 32 registers: all k rows at once, 4 panels for k <= 6, else 2;
//   AVX2 (and narrower): W = 8 floats, 16 registers: chunks of 6 rows x 2 panels and the
//   rows left over across 6 panels (`step`), a chunk re-reading the panels from cache.
// Each panel's stream is prefetched PREFETCH input indices ahead (the hardware prefetcher
// alone left a pass over 2-6 rows slower than one over a single row).
// Panel groups are split over torch's threads (at::parallel_for: OpenMP, so the build needs
// -fopenmp, else it runs on one thread).
// Panels may also hold bfloat16 weights (a draft's: half the bytes a matrix-vector product
// streams), widened to fp32 in registers; x, the accumulation and y stay fp32.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
constexpr int W = 16;
constexpr int MAX_CHUNK = 16;
#else
constexpr int W = 8;
constexpr int MAX_CHUNK = 6;
#endif

// how far ahead (in input indices) each panel's stream is prefetched: 4 KB at W = 8
constexpr int64_t PREFETCH = 128;

typedef float vec __attribute__((vector_size(W * 4), aligned(W * 4)));
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
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < W; ++j) y[(r0 + k) * O + col + p * W + j] = acc[p][k][j];
}

template <typename T>
using PanelFn = void (*)(const float*, int64_t, int64_t, const T*, float*, int64_t, int64_t);

template <typename T, int NP, int... R>
static PanelFn<T> pick(int64_t rows, std::integer_sequence<int, R...>) {
  static const PanelFn<T> fns[] = {panels<T, R + 1, NP>...};
  return fns[rows - 1];
}

// One step covers g panels; the P % g panels left over are taken one at a time.
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
  return np == 4 ? pick<T, 4>(rows, Rows{}) : np == 2 ? pick<T, 2>(rows, Rows{}) : pick<T, 1>(rows, Rows{});
}

static int group_size(int64_t K, int64_t P) { return (K <= 6 && P % 4 == 0) ? 4 : (P % 2 == 0 ? 2 : 1); }

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
    case 2: return pick<T, 2>(rows, Rows{});
    default: return pick<T, 1>(rows, Rows{});
  }
}

static int group_size(int64_t, int64_t) { return 6; }

constexpr int REST_PANELS[MAX_CHUNK] = {0, 6, 6, 2, 3, 2};  // panels per call for r rows left over

template <typename T>
static void step(const float* x, int64_t K, int64_t I, const T* w, float* y, int64_t O, int64_t first, int g) {
  if (g == 1) {  // a panel left over: chunks of up to 6 rows
    for (int64_t r0 = 0; r0 < K; r0 += MAX_CHUNK)
      choose<T>(std::min<int64_t>(MAX_CHUNK, K - r0), 1)(x, r0, I, w + first * I * W, y, O, first * W);
    return;
  }
  const int64_t full = K - K % MAX_CHUNK;
  for (int64_t r0 = 0; r0 < full; r0 += MAX_CHUNK)
    for (int64_t p = first; p < first + g; p += 2) choose<T>(MAX_CHUNK, 2)(x, r0, I, w + p * I * W, y, O, p * W);
  const int64_t rest = K - full;
  if (rest == 0) return;
  const int np = REST_PANELS[rest];
  for (int64_t p = first; p < first + g; p += np) choose<T>(rest, np)(x, full, I, w + p * I * W, y, O, p * W);
}
#endif

// W [O, I] -> panels [ceil(O / W), I, W], zero-padded to a multiple of W columns, in float32 or,
// with bf16, bfloat16 (rounded to nearest even).
torch::Tensor pack(torch::Tensor weight, bool bf16) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat32, "pack takes a float32 [O, I] weight");
  const int64_t O = weight.size(0), I = weight.size(1), P = (O + W - 1) / W;
  auto padded = torch::zeros({P * W, I}, weight.options());
  padded.narrow(0, 0, O).copy_(weight);
  auto panels = padded.view({P, W, I}).transpose(1, 2).contiguous();
  return bf16 ? panels.to(torch::kBFloat16) : panels;
}

template <typename T>
static void run_steps(const float* xp, int64_t K, int64_t I, const T* w, float* yp, int64_t P) {
  const int g = group_size(K, P);
  // steps 0..groups-1 take g panels each, the P % g panels after them one each
  const int64_t groups = P / g, steps = groups + P % g;
  at::parallel_for(0, steps, 1, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const bool whole = s < groups;
      step<T>(xp, K, I, w, yp, P * W, whole ? s * g : groups * g + (s - groups), whole ? g : 1);
    }
  });
}

// x [..., I] (1..16 rows in all), packed [P, I, W] -> y [..., out_features]: the shapes are
// handled here, not by two reshapes per call in Python (211 calls a pass)
torch::Tensor small_linear(torch::Tensor x, torch::Tensor packed, int64_t out_features) {
  TORCH_CHECK(x.dim() >= 1 && x.scalar_type() == torch::kFloat32, "small_linear takes float32 [..., I] rows");
  const int64_t I = x.size(-1), K = I > 0 ? x.numel() / I : 0, P = packed.size(0);
  TORCH_CHECK(K >= 1 && K <= 16, "small_linear takes 1..16 rows, got ", K);
  TORCH_CHECK(packed.size(1) == I && packed.size(2) == W, "packed weight does not match the input width");
  TORCH_CHECK(packed.scalar_type() == torch::kFloat32 || packed.scalar_type() == torch::kBFloat16,
              "packed weights are float32 or bfloat16");
  auto xc = x.reshape({K, I}).contiguous();
  auto y = torch::empty({K, P * W}, x.options());
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  if (packed.scalar_type() == torch::kBFloat16)
    run_steps(xp, K, I, reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>()), yp, P);
  else
    run_steps(xp, K, I, packed.data_ptr<float>(), yp, P);
  auto sizes = x.sizes().vec();
  sizes.back() = out_features;
  return (out_features == P * W ? y : y.narrow(1, 0, out_features).contiguous()).view(sizes);
}

int64_t lanes() { return W; }

// How many of torch's threads one at::parallel_for over n items ran on (1 if the build lost
// OpenMP, which it did once: tests/test_core_backend.py).
int64_t parallel_threads(int64_t n) {
  std::vector<char> used(at::get_num_threads(), 0);
  at::parallel_for(0, n, 1, [&](int64_t, int64_t) { used[at::get_thread_num()] = 1; });
  return std::count(used.begin(), used.end(), 1);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("pack", &pack, "pack a float32 [O, I] weight into [ceil(O/W), I, W] panels (float32 or bfloat16)",
        py::arg("weight"), py::arg("bf16") = false);
  m.def("small_linear", &small_linear, "x [..., I] (at most 16 rows) times a packed weight");
  m.def("lanes", &lanes, "W: the floats per vector register this build targets");
  m.def("parallel_threads", &parallel_threads, "threads one parallel_for over n items ran on");
}
