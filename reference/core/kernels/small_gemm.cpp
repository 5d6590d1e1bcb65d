// y = x W^T for a few rows x (1..16) with pre-packed fp32 weights: the target's verify pass.
//
// A pass over k tokens reads every weight once; MKL's small-M path reads them at ~9 GB/s and
// steps up at M = 4 (docs/fast-backend.md). Here the weights are packed once into panels of
// W output columns, [P, I, W], so each panel is one sequential stream, and every weight
// vector is multiplied into a chunk of rows while it is in a register. Accumulation over the
// input dimension runs in order, as in a plain dot product. GCC vector extensions keep it
// portable; the register tiling follows the vector width the build targets (-march=native):
//   AVX-512: W = 16 floats, 32 registers: all k rows at once, 4 panels for k <= 6, else 2;
//   AVX2 (and narrower): W = 8 floats, 16 registers: chunks of at most 6 rows and 2 panels
//   (2 x 6 accumulators + 2 weight vectors = 14 registers), the next chunk re-reading the
//   panels from cache, not memory.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#if defined(__AVX512F__)
constexpr int W = 16;
constexpr int64_t MAX_CHUNK = 16;
#else
constexpr int W = 8;
constexpr int64_t MAX_CHUNK = 6;
#endif

typedef float vec __attribute__((vector_size(W * 4), aligned(W * 4)));

// rows r0..r0+K-1 of x (xt: x transposed [I, KT]); w: NP panels [NP][I][W] (NP * I * W floats
// apart); y: [KT, O]; col: the first output column of the panels.
template <int K, int NP>
static void panels(const float* xt, int64_t KT, int64_t r0, int64_t I, const float* w, float* y, int64_t O,
                   int64_t col) {
  vec acc[NP][K];
  for (int p = 0; p < NP; ++p)
    for (int k = 0; k < K; ++k) acc[p][k] = vec{};
  const int64_t stride = I * W;
  for (int64_t i = 0; i < I; ++i) {
    vec wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = *reinterpret_cast<const vec*>(w + p * stride + i * W);
    const float* xi = xt + i * KT + r0;
    for (int k = 0; k < K; ++k) {
      const float b = xi[k];
      for (int p = 0; p < NP; ++p) acc[p][k] += b * wv[p];
    }
  }
  for (int p = 0; p < NP; ++p)
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < W; ++j) y[(r0 + k) * O + col + p * W + j] = acc[p][k][j];
}

using PanelFn = void (*)(const float*, int64_t, int64_t, int64_t, const float*, float*, int64_t, int64_t);

template <int NP>
static PanelFn pick(int64_t k) {
  static const PanelFn fns[16] = {
      panels<1, NP>,  panels<2, NP>,  panels<3, NP>,  panels<4, NP>,  panels<5, NP>,  panels<6, NP>,
      panels<7, NP>,  panels<8, NP>,  panels<9, NP>,  panels<10, NP>, panels<11, NP>, panels<12, NP>,
      panels<13, NP>, panels<14, NP>, panels<15, NP>, panels<16, NP>};
  return fns[k - 1];
}

static PanelFn choose(int64_t k, int np) {
  return np == 4 ? pick<4>(k) : np == 2 ? pick<2>(k) : pick<1>(k);
}

// W [O, I] -> panels [ceil(O / W), I, W], zero-padded to a multiple of W columns.
torch::Tensor pack(torch::Tensor weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat32, "pack takes a float32 [O, I] weight");
  const int64_t O = weight.size(0), I = weight.size(1), P = (O + W - 1) / W;
  auto padded = torch::zeros({P * W, I}, weight.options());
  padded.narrow(0, 0, O).copy_(weight);
  return padded.view({P, W, I}).transpose(1, 2).contiguous();
}

// x [K, I] (K = 1..16), packed [P, I, W] -> y [K, out_features]
torch::Tensor small_linear(torch::Tensor x, torch::Tensor packed, int64_t out_features) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "small_linear takes float32 [K, I] rows");
  const int64_t K = x.size(0), I = x.size(1), P = packed.size(0);
  TORCH_CHECK(K >= 1 && K <= 16, "small_linear takes 1..16 rows, got ", K);
  TORCH_CHECK(packed.size(1) == I && packed.size(2) == W, "packed weight does not match the input width");
  auto xt = x.t().contiguous();
  auto y = torch::empty({K, P * W}, x.options());
  const float* xp = xt.data_ptr<float>();
  const float* w = packed.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // panels per step sharing each broadcast of x, and rows per chunk: the accumulators of one
  // step (np x chunk) and its weight vectors must fit the vector registers (see the top)
  const int64_t chunk = std::min(K, MAX_CHUNK);
  const int np = (W == 16 && K <= 6 && P % 4 == 0) ? 4 : (P % 2 == 0 ? 2 : 1);
  at::parallel_for(0, P / np, 4, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s)
      for (int64_t r0 = 0; r0 < K; r0 += chunk) {
        const int64_t rows = std::min(chunk, K - r0);
        choose(rows, np)(xp, K, r0, I, w + s * np * I * W, yp, P * W, s * np * W);
      }
  });
  return out_features == P * W ? y : y.narrow(1, 0, out_features).contiguous();
}

int64_t lanes() { return W; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("pack", &pack, "pack a float32 [O, I] weight into [ceil(O/W), I, W] panels");
  m.def("small_linear", &small_linear, "x [K <= 16, I] times a packed weight");
  m.def("lanes", &lanes, "W: the floats per vector register this build targets");
}
