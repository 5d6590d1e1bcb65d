// y = x W^T for a few rows x (1..16) with pre-packed fp32 weights: the target's verify pass.
//
// A pass over k tokens reads every weight once; MKL's small-M path reads them at ~9 GB/s and
// steps up at M = 4 (docs/fast-backend.md). Here the weights are packed once into panels of
// 16 output columns, [P, I, 16], so each panel is one sequential stream, and every weight
// vector is multiplied into all k rows while it is in a register. Accumulation over the
// input dimension runs in order, as in a plain dot product. GCC vector extensions keep it
// portable: 16-float vectors become AVX-512 registers where the CPU has them.
#include <torch/extension.h>
#include <ATen/Parallel.h>

typedef float v16 __attribute__((vector_size(64), aligned(64)));

// xt: x transposed [I, K]; w: NP panels [NP][I][16] (NP * I * 16 floats apart); y: [K, O]
template <int K, int NP>
static void panels(const float* xt, int64_t I, const float* w, float* y, int64_t O, int64_t col) {
  v16 acc[NP][K];
  for (int p = 0; p < NP; ++p)
    for (int k = 0; k < K; ++k) acc[p][k] = v16{};
  const int64_t stride = I * 16;
  for (int64_t i = 0; i < I; ++i) {
    v16 wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = *reinterpret_cast<const v16*>(w + p * stride + i * 16);
    const float* xi = xt + i * K;
    for (int k = 0; k < K; ++k) {
      const float b = xi[k];
      for (int p = 0; p < NP; ++p) acc[p][k] += b * wv[p];
    }
  }
  for (int p = 0; p < NP; ++p)
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < 16; ++j) y[k * O + col + p * 16 + j] = acc[p][k][j];
}

using PanelFn = void (*)(const float*, int64_t, const float*, float*, int64_t, int64_t);

template <int NP>
static PanelFn pick(int64_t k) {
  static const PanelFn fns[16] = {
      panels<1, NP>,  panels<2, NP>,  panels<3, NP>,  panels<4, NP>,  panels<5, NP>,  panels<6, NP>,
      panels<7, NP>,  panels<8, NP>,  panels<9, NP>,  panels<10, NP>, panels<11, NP>, panels<12, NP>,
      panels<13, NP>, panels<14, NP>, panels<15, NP>, panels<16, NP>};
  return fns[k - 1];
}

// W [O, I] -> panels [ceil(O / 16), I, 16], zero-padded to a multiple of 16 columns.
torch::Tensor pack(torch::Tensor weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat32, "pack takes a float32 [O, I] weight");
  const int64_t O = weight.size(0), I = weight.size(1), P = (O + 15) / 16;
  auto padded = torch::zeros({P * 16, I}, weight.options());
  padded.narrow(0, 0, O).copy_(weight);
  return padded.view({P, 16, I}).transpose(1, 2).contiguous();
}

// x [K, I] (K = 1..16), packed [P, I, 16] -> y [K, out_features]
torch::Tensor small_linear(torch::Tensor x, torch::Tensor packed, int64_t out_features) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "small_linear takes float32 [K, I] rows");
  const int64_t K = x.size(0), I = x.size(1), P = packed.size(0);
  TORCH_CHECK(K >= 1 && K <= 16, "small_linear takes 1..16 rows, got ", K);
  TORCH_CHECK(packed.size(1) == I && packed.size(2) == 16, "packed weight does not match the input width");
  auto xt = x.t().contiguous();
  auto y = torch::empty({K, P * 16}, x.options());
  const float* xp = xt.data_ptr<float>();
  const float* w = packed.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // several panels per step share each broadcast of x: four for few rows, two for many
  // (4 x K accumulators must fit the 32 vector registers); measured in docs/fast-backend.md
  const int64_t np = (K <= 6 && P % 4 == 0) ? 4 : (P % 2 == 0 ? 2 : 1);
  const PanelFn f = np == 4 ? pick<4>(K) : np == 2 ? pick<2>(K) : pick<1>(K);
  at::parallel_for(0, P / np, 4, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) f(xp, I, w + s * np * I * 16, yp, P * 16, s * np * 16);
  });
  return out_features == P * 16 ? y : y.narrow(1, 0, out_features).contiguous();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("pack", &pack, "pack a float32 [O, I] weight into [ceil(O/16), I, 16] panels");
  m.def("small_linear", &small_linear, "x [K <= 16, I] times a packed weight");
}
