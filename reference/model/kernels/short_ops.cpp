// The rest of a verify pass over a few tokens, each op one call instead of several (docs/fast-backend.md):
//   short_attention: softmax(q k^T * scale + mask) v for 1..16 query rows per head over a KV cache, grouped-query
//     (each key/value head serves H / Hk query heads, k and v read in place: no repeated copy of the cache);
//   rms_norm: w * x / sqrt(mean(x^2) + eps), as Llama's RMSNorm computes it in float32.
// fp32 on the CPU; the Python side (fast_modules.py) sends anything else to PyTorch's own ops.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "vec.h"

namespace {

constexpr int KEYS = W;  // keys per block: one vector of scores per query row (a transposed block of k)
constexpr int ROWS = 8;  // query rows per pass over a block (8 independent FMA chains)

// One key/value head: `rows` query rows q [rows, D] (copied, contiguous) against L keys; scores [rows, Lp]
// (Lp = L rounded up to KEYS) arrive holding the additive mask and leave holding the probabilities;
// out [rows, D] (row r at out_row(r)).
template <int D, typename O>
void attend(int64_t rows, int64_t L, int64_t Lp, const float* q, const float* k, int64_t k_step, const float* v,
            int64_t v_step, float* scores, O out_row, float scale) {
  vec kt[D];  // a block of KEYS keys, transposed: kt[c][j] = k[j0 + j][c]
  for (int64_t j0 = 0; j0 < L; j0 += KEYS) {
    const int64_t nk = std::min<int64_t>(KEYS, L - j0);
    for (int c0 = 0; c0 < D; c0 += W) {
      vec block[KEYS];
      for (int64_t j = 0; j < KEYS; ++j) block[j] = j < nk ? loadu(k + (j0 + j) * k_step + c0) : vec{};
      transpose(block, kt + c0);
    }
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS) {
      const int64_t nr = std::min<int64_t>(ROWS, rows - r0);
      vec acc[ROWS] = {};
      for (int c = 0; c < D; ++c)
        for (int r = 0; r < ROWS; ++r) acc[r] += q[(r0 + std::min<int64_t>(r, nr - 1)) * D + c] * kt[c];
      for (int64_t r = 0; r < nr; ++r) {
        float* sr = scores + (r0 + r) * Lp + j0;
        storeu(sr, acc[r] * scale + loadu(sr));
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = scores + r * Lp;
    for (int64_t j = L; j < Lp; ++j) sr[j] = -std::numeric_limits<float>::infinity();
    vec top = splat(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < Lp; j += KEYS) { const vec x = loadu(sr + j); top = x > top ? x : top; }
    const float m = hmax(top);
    if (m == -std::numeric_limits<float>::infinity()) {  // nothing visible: zeros, not NaN
      std::fill(sr, sr + Lp, 0.0f);
      continue;
    }
    vec sum{};
    for (int64_t j = 0; j < Lp; j += KEYS) {  // a masked key (below e^-87 of the top) weighs exactly 0
      const vec d = loadu(sr + j) - m;
      const vec e = d < splat(-87.0f) ? vec{} : exp_vec(d);
      storeu(sr + j, e);
      sum += e;
    }
    const float total = hsum(sum);
    for (int64_t j = 0; j < Lp; ++j) sr[j] /= total;
  }
  // out = p v, PV rows at once: each value row is loaded once for them (PV x D / W independent FMA chains,
  // as many accumulators as registers allow)
  constexpr int PV = std::max(1, (W == 16 ? 256 : 64) / D);
  for (int64_t r0 = 0; r0 < rows; r0 += PV) {
    const int64_t nr = std::min<int64_t>(PV, rows - r0);
    vec acc[PV][D / W] = {};
    for (int64_t j = 0; j < L; ++j) {
      vec vj[D / W];
      for (int c = 0; c < D / W; ++c) vj[c] = loadu(v + j * v_step + W * c);
      for (int r = 0; r < PV; ++r) {
        const float p = scores[(r0 + std::min<int64_t>(r, nr - 1)) * Lp + j];
        for (int c = 0; c < D / W; ++c) acc[r][c] += p * vj[c];
      }
    }
    for (int64_t r = 0; r < nr; ++r)
      for (int c = 0; c < D / W; ++c) storeu(out_row(r0 + r) + W * c, acc[r][c]);
  }
}

}  // namespace

// q [B, H, n, d], k and v [B, Hk, L, d] (each row of d contiguous; d 64 or 128), mask: none, or bool (true:
// attend) or float32 (added), broadcastable to [B, H, n, L]. Returns [B, n, H, d], contiguous (what an
// attention interface returns).
torch::Tensor short_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, c10::optional<torch::Tensor> mask,
                              double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "short_attention takes [B, H, n, d] tensors");
  TORCH_CHECK(q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
              v.scalar_type() == torch::kFloat32, "short_attention runs float32");
  if (k.stride(3) != 1) k = k.contiguous();
  if (v.stride(3) != 1) v = v.contiguous();
  const int64_t B = q.size(0), H = q.size(1), n = q.size(2), d = q.size(3), Hk = k.size(1), L = k.size(2);
  TORCH_CHECK(d == 64 || d == 128, "short_attention takes heads of 64 or 128");
  TORCH_CHECK(H % Hk == 0 && k.size(0) == B && v.sizes() == k.sizes() && k.size(3) == d, "q, k, v shapes disagree");
  const int64_t rep = H / Hk, rows = rep * n, Lp = (L + KEYS - 1) / KEYS * KEYS;
  torch::Tensor m;
  if (mask.has_value() && mask->defined()) {
    TORCH_CHECK(mask->scalar_type() == torch::kBool || mask->scalar_type() == torch::kFloat32,
                "the mask is bool or float32");
    m = mask->expand({B, H, n, L});
  }
  auto out = torch::empty({B, n, H, d}, q.options());
  float* op = out.data_ptr<float>();
  const float s = static_cast<float>(scale);
  // one task per (batch row, key/value head); threads only where the work pays for waking them
  const int64_t grain = B * H * n * L * d < (int64_t(1) << 18) ? B * Hk : 1;
  at::parallel_for(0, B * Hk, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> qs(rows * d), scores(rows * Lp);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / Hk, hk = t % Hk, h0 = hk * rep;
      for (int64_t r = 0; r < rows; ++r) {  // row r: head h0 + r / n, query r % n; its mask row into its scores
        const int64_t h = h0 + r / n, i = r % n;
        const float* qr = q.data_ptr<float>() + b * q.stride(0) + h * q.stride(1) + i * q.stride(2);
        for (int64_t c = 0; c < d; ++c) qs[r * d + c] = qr[c * q.stride(3)];
        float* sr = scores.data() + r * Lp;
        if (!m.defined()) {
          std::fill(sr, sr + L, 0.0f);
        } else if (m.scalar_type() == torch::kBool) {
          const bool* mr = m.data_ptr<bool>() + b * m.stride(0) + h * m.stride(1) + i * m.stride(2);
          for (int64_t j = 0; j < L; ++j) sr[j] = mr[j * m.stride(3)] ? 0.0f : -std::numeric_limits<float>::infinity();
        } else {
          const float* mr = m.data_ptr<float>() + b * m.stride(0) + h * m.stride(1) + i * m.stride(2);
          for (int64_t j = 0; j < L; ++j) sr[j] = mr[j * m.stride(3)];
        }
      }
      const float* kb = k.data_ptr<float>() + b * k.stride(0) + hk * k.stride(1);
      const float* vb = v.data_ptr<float>() + b * v.stride(0) + hk * v.stride(1);
      auto out_row = [&](int64_t r) { return op + ((b * n + r % n) * H + h0 + r / n) * d; };
      if (d == 64)
        attend<64>(rows, L, Lp, qs.data(), kb, k.stride(2), vb, v.stride(2), scores.data(), out_row, s);
      else
        attend<128>(rows, L, Lp, qs.data(), kb, k.stride(2), vb, v.stride(2), scores.data(), out_row, s);
    }
  });
  return out;
}

// x [..., d] float32, weight [d]: weight * (x * rsqrt(mean(x^2) + eps)), row by row.
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor weight, double eps) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32, "rms_norm runs float32");
  const int64_t d = x.size(-1);
  TORCH_CHECK(weight.numel() == d, "rms_norm: the weight does not match the width");
  auto xc = x.contiguous();
  auto wc = weight.contiguous();
  auto y = torch::empty_like(xc);
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t rows = d > 0 ? xc.numel() / d : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * d;
    float sq = 0.0f;
    for (int64_t c = 0; c < d; ++c) sq += xr[c] * xr[c];
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(d) + static_cast<float>(eps));
    for (int64_t c = 0; c < d; ++c) yp[r * d + c] = wp[c] * (xr[c] * inv);
  }
  return y;
}
