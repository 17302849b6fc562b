// The flash attention's host-side plan (flash_attention_plan.h), checked without a GPU: which
// shapes it takes, its buffer sizes, grids and shared-memory layout (the alignment ldmatrix and
// the vector copies need, conflict-free fragment loads, the opt-in limits of sm_80 and sm_90),
// and an emulation of the kernels' tile loops -- the same tile ranges, causal and padding masks,
// online softmax and score-gradient math, in float -- against the cpu reference attention. What
// only a GPU checks: the mma.sync fragments, the shared memory traffic and synchronisation
// (cuda_compute_gpu_test.cc, FlashAttention*).
#include "kernels/cuda/flash_attention_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/attention.h"

namespace rm::cuda {
namespace {

TEST(FlashAttentionPlan, TakesBf16WithWholeFragmentHeadsUpTo128) {
  for (int hs = 16; hs <= 128; hs += 16) {
    EXPECT_TRUE(flash_attention_supported(true, 12 * hs, 12)) << hs;
    EXPECT_FALSE(flash_attention_supported(false, 12 * hs, 12)) << "fp32 keeps the cuBLAS path";
  }
  EXPECT_TRUE(flash_attention_supported(true, 768, 12));  // GPT-2: hs 64
  for (int hs : {8, 24, 136, 256}) EXPECT_FALSE(flash_attention_supported(true, 4 * hs, 4)) << hs;
  EXPECT_FALSE(flash_attention_supported(true, 770, 12));  // H does not divide C
  EXPECT_FALSE(flash_attention_supported(true, 64, 0));
}

TEST(FlashAttentionPlan, BuffersArePerRowFloatsAndFitSmallerCalls) {
  const AttentionBuffers f = flash_attention_buffers(16, 1024, 12);
  EXPECT_EQ(f.saved, size_t{2} * 16 * 12 * 1024);  // float [B,H,T] in bf16 elements
  EXPECT_EQ(f.scratch, f.saved);
  const AttentionBuffers m = materialised_attention_buffers(16, 1024, 12);
  EXPECT_EQ(m.saved, size_t{16} * 12 * 1024 * 1024);
  EXPECT_EQ(m.saved / f.saved, 512u);  // T/2 times less
  // A call with fewer sequences or tokens needs no more than the planned buffers.
  for (int b = 1; b <= 3; ++b) {
    for (int t = 1; t <= 70; ++t) {
      EXPECT_LE(flash_attention_buffers(b, t, 4).saved, flash_attention_buffers(3, 70, 4).saved);
    }
  }
}

TEST(FlashAttentionPlan, GridCoversEveryTileOnce) {
  EXPECT_EQ(flash_grid(0, 64, 4).x, 0u);
  EXPECT_EQ(flash_grid(2, 0, 4).x, 0u);
  for (int Tn : {1, 63, 64, 65, 1000, 1024}) {
    const FlashGrid g = flash_grid(3, Tn, 5);
    EXPECT_EQ(g.x, 15u);
    EXPECT_EQ(static_cast<int>(g.y), (Tn + 63) / 64);
    EXPECT_GE(static_cast<int>(g.y) * kFlashTile, Tn);
    EXPECT_LT((static_cast<int>(g.y) - 1) * kFlashTile, Tn);
  }
  EXPECT_EQ(flash_forward_rows(64), 128);  // GPT-2's heads: two row fragments a warp
  EXPECT_EQ(flash_forward_rows(128), 64);
  EXPECT_EQ(flash_grid(3, 200, 5, kFlashForwardRows).y, 2u);  // the forward's 128-row blocks
  EXPECT_EQ(flash_grid(3, 256, 5, kFlashForwardRows).y, 2u);
  EXPECT_EQ(flash_grid(3, 257, 5, kFlashForwardRows).y, 3u);
  EXPECT_THROW(flash_grid(1, kFlashTile * kFlashGridYLimit + 1, 1), std::invalid_argument);
  EXPECT_THROW(flash_grid(1 << 20, 64, 1 << 12), std::invalid_argument);
  EXPECT_EQ(flash_rowsum_blocks(1), 1u);
  EXPECT_EQ(flash_rowsum_blocks(8), 1u);
  EXPECT_EQ(flash_rowsum_blocks(9), 2u);
  EXPECT_EQ(kFlashThreads, 32 * kFlashWarps);
  EXPECT_EQ(kFlashWarps * 16, kFlashTile);  // each warp owns 16 rows of a tile
}

// The backward kernels' per-warp decision, against every (key, query) pair: a skipped tile has
// no visible pair (key <= query < Tn), a whole one only visible pairs. Both kernels' shapes: a
// warp's 16 x fragments keys against a query tile (dK/dV), a warp's 16 x fragments queries
// against a key tile (dQ), over the tiles each walks.
TEST(FlashAttentionPlan, TileWorkSkipsOnlyInvisibleTilesAndMasksEveryPartlyVisibleOne) {
  EXPECT_EQ(flash_backward_rows(1), kFlashTile);
  EXPECT_EQ(flash_backward_rows(2), 2 * kFlashTile);
  EXPECT_EQ(flash_backward_max_fragments(64), 2);  // GPT-2's heads
  EXPECT_EQ(flash_backward_max_fragments(80), 1);
  EXPECT_EQ(flash_dkv_columns(1) * 1, flash_dkv_columns(2) * 2);  // the same score registers
  EXPECT_EQ(flash_dq_columns(1) * 1, flash_dq_columns(2) * 2);
  int skipped = 0, whole = 0;
  auto check = [&](int k_lo, int k_hi, int q_lo, int q_hi, int Tn) {
    const FlashTileWork work = flash_tile_work(k_lo, k_hi, q_lo, q_hi, Tn);
    bool any = false, all = true;
    for (int j = k_lo; j <= k_hi; ++j) {
      for (int i = q_lo; i <= q_hi; ++i) {
        const bool visible = j <= i && i < Tn;
        any = any || visible;
        all = all && visible;
      }
    }
    SCOPED_TRACE(testing::Message() << "Tn " << Tn << " keys " << k_lo << ".." << k_hi
                                    << " queries " << q_lo << ".." << q_hi);
    EXPECT_TRUE(work != FlashTileWork::kSkip || !any);
    EXPECT_TRUE(work != FlashTileWork::kWhole || all);
    skipped += work == FlashTileWork::kSkip;
    whole += work == FlashTileWork::kWhole;
  };
  for (int Tn : {1, 63, 64, 65, 127, 128, 129, 300}) {
    for (int fragments : {1, 2}) {
      const int rows = 16 * fragments, block = flash_backward_rows(fragments);
      const int nt = flash_tiles(Tn);
      for (int r0 = 0; r0 < flash_tiles(Tn, block) * block; r0 += rows) {
        const int first = r0 / block * fragments;  // the block's first tile
        for (int qt = first; qt < nt; ++qt) {      // dK/dV: keys r0.., query tiles on
          check(r0, r0 + rows - 1, qt * kFlashTile, (qt + 1) * kFlashTile - 1, Tn);
        }
        for (int kt = 0; kt < std::min(first + fragments, nt); ++kt) {  // dQ: queries r0..
          check(kt * kFlashTile, (kt + 1) * kFlashTile - 1, r0, r0 + rows - 1, Tn);
        }
      }
    }
  }
  EXPECT_GT(skipped, 0);  // both shortcuts are taken somewhere
  EXPECT_GT(whole, 0);
}

// The forward takes the maximum of a tile's raw scores and scales it once: that is the maximum
// of the scaled scores, bit for bit, for every scale the kernels use (so the running maximum and
// the lse kept for the backward are what scaling each score first gave). Its fused probability
// is 2^(x - m) to within rounding (the largest at most a rounding above 1), 0 where masked.
TEST(FlashAttentionPlan, ForwardProbabilityScalesTheRawMaximumExactly) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> score(-300.0f, 300.0f);
  for (int hs : {16, 32, 48, 64, 80, 96, 112, 128}) {
    const float sl2 = flash_scale_log2(hs);
    for (int trial = 0; trial < 2000; ++trial) {
      float raw_max = -INFINITY, scaled_max = -INFINITY;
      std::vector<float> s(kFlashTile);
      for (float& x : s) {
        x = score(gen);
        raw_max = std::max(raw_max, x);
        scaled_max = std::max(scaled_max, x * sl2);
      }
      ASSERT_EQ(raw_max * sl2, scaled_max) << "head size " << hs;
      for (float x : s) {
        const float p = flash_forward_prob(x, sl2, scaled_max);
        ASSERT_LE(p, 1.0f + 1e-5f);
        ASSERT_NEAR(p, std::exp2(static_cast<double>(x) * sl2 - scaled_max), 1e-6);
      }
    }
    EXPECT_EQ(flash_forward_prob(-INFINITY, sl2, 3.0f), 0.0f);
    EXPECT_EQ(flash_forward_prob(2.0f, sl2, 2.0f * sl2), 1.0f);
  }
}

// Every row the kernels address with a vector copy or ldmatrix is 16-byte aligned, the 32-bit
// fragment loads of a warp (rows g = 0..7, columns 2t, t = 0..3) fall in 32 different banks,
// the regions do not overlap, and the total fits the opt-in limits.
TEST(FlashAttentionPlan, SharedMemoryIsAlignedAndFits) {
  const size_t kSm80Limit = 166912;  // 163 KiB, cudaDevAttrMaxSharedMemoryPerBlockOptin
  for (bool backward : {false, true}) {
    for (int hs = 16; hs <= kFlashMaxHeadSize; hs += 16) {
      SCOPED_TRACE(testing::Message() << "hs " << hs << " backward " << backward);
      const FlashSmem s = flash_smem(hs, backward);
      EXPECT_EQ(s.ld_tile * 2 % 16, 0);
      EXPECT_GE(s.ld_tile, hs);
      // Regions in order, each after the previous one's end.
      const size_t q_rows = backward ? kFlashTile : flash_forward_rows(hs);
      std::vector<std::pair<size_t, size_t>> regions = {{s.q, q_rows * s.ld_tile * 2},
                                                        {s.k, size_t{kFlashTile} * s.ld_tile * 2},
                                                        {s.v, size_t{kFlashTile} * s.ld_tile * 2}};
      if (backward) {
        regions.push_back({s.dout, size_t{kFlashTile} * s.ld_tile * 2});
        regions.push_back({s.lse, kFlashTile * 4});
        regions.push_back({s.d, kFlashTile * 4});
      }
      for (size_t r = 0; r < regions.size(); ++r) {
        EXPECT_EQ(regions[r].first % 128, 0u) << r;
        if (r > 0) {
          EXPECT_GE(regions[r].first, regions[r - 1].first + regions[r - 1].second);
        }
      }
      // Stage 1 is stage 0 again, after it: the same alignment, no overlap.
      EXPECT_LE(regions.back().first + regions.back().second, s.stage);
      EXPECT_EQ(s.stage % 128, 0u);
      EXPECT_EQ(s.bytes, 2 * s.stage);
      EXPECT_LE(s.bytes, kSm80Limit);
      for (int row = 0; row < kFlashTile; ++row) {
        EXPECT_EQ((s.k + static_cast<size_t>(row) * s.ld_tile * 2) % 16, 0u);
      }
      std::set<size_t> banks;
      for (int g = 0; g < 8; ++g) {
        for (int t = 0; t < 4; ++t)
          banks.insert((static_cast<size_t>(g) * s.ld_tile * 2 + 4 * t) / 4 % 32);
      }
      EXPECT_EQ(banks.size(), 32u);
    }
  }
  EXPECT_LT(flash_smem(64, false).bytes, flash_smem(64, true).bytes);
}

// ---- Emulation of the kernels' loops ---------------------------------------------------------

struct Problem {
  int B, Tn, C, H;
  int hs() const { return C / H; }
  std::vector<float> qkv, dout;
};

Problem make_problem(int B, int Tn, int C, int H, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Problem p{B,
            Tn,
            C,
            H,
            std::vector<float>(size_t{3} * B * Tn * C),
            std::vector<float>(size_t{1} * B * Tn * C)};
  for (float& x : p.qkv) x = dist(gen);
  for (float& x : p.dout) x = dist(gen) / 2;
  return p;
}

// Row t (of qkv's part `part`: 0 q, 1 k, 2 v) of head h, or zeros past Tn (the kernels' padding).
std::vector<float> row(const Problem& p, int b, int h, int part, int t) {
  std::vector<float> r(p.hs(), 0.0f);
  if (t < p.Tn) {
    const float* src =
        p.qkv.data() + (static_cast<size_t>(b) * p.Tn + t) * 3 * p.C + part * p.C + h * p.hs();
    r.assign(src, src + p.hs());
  }
  return r;
}
std::vector<float> grad_row(const Problem& p, const std::vector<float>& x, int b, int h, int t) {
  std::vector<float> r(p.hs(), 0.0f);
  if (t < p.Tn) {
    const float* src = x.data() + (static_cast<size_t>(b) * p.Tn + t) * p.C + h * p.hs();
    r.assign(src, src + p.hs());
  }
  return r;
}
float dot(const std::vector<float>& a, const std::vector<float>& b) {
  float s = 0.0f;
  for (size_t c = 0; c < a.size(); ++c) s += a[c] * b[c];
  return s;
}

// The forward kernel's loop: per query tile (padded rows included), key tiles 0..qt.
void emulate_forward(const Problem& p, std::vector<float>* out, std::vector<float>* lse) {
  const int hs = p.hs(), nt = flash_tiles(p.Tn);
  const float sl2 = flash_scale_log2(hs);
  out->assign(size_t{1} * p.B * p.Tn * p.C, 0.0f);
  lse->assign(size_t{1} * p.B * p.H * p.Tn, 0.0f);
  for (int b = 0; b < p.B; ++b) {
    for (int h = 0; h < p.H; ++h) {
      for (int qt = 0; qt < nt; ++qt) {
        for (int i = qt * kFlashTile; i < (qt + 1) * kFlashTile; ++i) {
          const std::vector<float> q = row(p, b, h, 0, i);
          float m = -INFINITY, l = 0.0f;
          std::vector<float> o(hs, 0.0f);
          for (int kt = 0; kt <= qt; ++kt) {
            std::vector<float> s(kFlashTile);
            float tile_max = -INFINITY;
            for (int c = 0; c < kFlashTile; ++c) {
              const int j = kt * kFlashTile + c;
              s[c] = j <= i ? dot(q, row(p, b, h, 1, j)) : -INFINITY;  // raw, as the kernel's
              tile_max = std::max(tile_max, s[c]);
            }
            const float alpha = flash_rescale(&m, tile_max * sl2);
            ASSERT_TRUE(std::isfinite(m));
            l *= alpha;
            for (float& x : o) x *= alpha;
            for (int c = 0; c < kFlashTile; ++c) {
              const float pr = flash_forward_prob(s[c], sl2, m);
              l += pr;
              const std::vector<float> v = row(p, b, h, 2, kt * kFlashTile + c);
              for (int e = 0; e < hs; ++e) o[e] += pr * v[e];
            }
          }
          if (i >= p.Tn) continue;
          for (int e = 0; e < hs; ++e) {
            (*out)[(static_cast<size_t>(b) * p.Tn + i) * p.C + h * hs + e] = o[e] / l;
          }
          (*lse)[(static_cast<size_t>(b) * p.H + h) * p.Tn + i] = m + std::log2(l);
        }
      }
    }
  }
}

// The backward kernels' loops with their row fragments a warp: D per row; dK/dV per block of
// flash_backward_rows(fragments) keys, each warp's 16 x fragments keys over the query tiles from
// the block's first key tile on; dQ per block of as many queries, each warp's over the key tiles
// up to the block's last query tile; each tile skipped, masked or taken whole as
// flash_tile_work says (a wrong answer adds invisible pairs or drops visible ones).
std::vector<float> emulate_backward(const Problem& p, const std::vector<float>& out,
                                    const std::vector<float>& lse, int fragments) {
  const int hs = p.hs(), nt = flash_tiles(p.Tn);
  const float sl2 = flash_scale_log2(hs), scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float> dqkv(p.qkv.size(), 0.0f);
  auto at = [&](int b, int t, int part, int h) {
    return (static_cast<size_t>(b) * p.Tn + t) * 3 * p.C + part * p.C + h * hs;
  };
  for (int b = 0; b < p.B; ++b) {
    for (int h = 0; h < p.H; ++h) {
      const size_t bh = static_cast<size_t>(b) * p.H + h;
      auto lse_of = [&](int i) { return i < p.Tn ? lse[bh * p.Tn + i] : 0.0f; };
      auto d_of = [&](int i) {
        return i < p.Tn ? dot(grad_row(p, p.dout, b, h, i), grad_row(p, out, b, h, i)) : 0.0f;
      };
      auto prob = [&](int i, int j, bool masked = true) {
        return flash_prob(dot(row(p, b, h, 0, i), row(p, b, h, 1, j)), sl2, lse_of(i),
                          !masked || (j <= i && i < p.Tn));
      };
      auto dscore = [&](int i, int j, float pr) {
        const float dp = dot(grad_row(p, p.dout, b, h, i), row(p, b, h, 2, j));
        return flash_dscore(pr, dp, d_of(i));
      };
      const int block = flash_backward_rows(fragments), rows = 16 * fragments;
      for (int j = 0; j < flash_tiles(p.Tn, block) * block; ++j) {
        const int kt0 = j / block * fragments, key0 = j / rows * rows;
        std::vector<float> dk(hs, 0.0f), dv(hs, 0.0f);
        for (int qt = kt0; qt < nt; ++qt) {
          const int q0 = qt * kFlashTile;
          const FlashTileWork work =
              flash_tile_work(key0, key0 + rows - 1, q0, q0 + kFlashTile - 1, p.Tn);
          if (work == FlashTileWork::kSkip) continue;
          for (int i = qt * kFlashTile; i < (qt + 1) * kFlashTile; ++i) {
            const float pr = prob(i, j, work == FlashTileWork::kMasked), ds = dscore(i, j, pr);
            const std::vector<float> q = row(p, b, h, 0, i), g = grad_row(p, p.dout, b, h, i);
            for (int e = 0; e < hs; ++e) {
              dv[e] += pr * g[e];
              dk[e] += ds * q[e];
            }
          }
        }
        if (j >= p.Tn) continue;
        for (int e = 0; e < hs; ++e) {
          dqkv[at(b, j, 1, h) + e] = dk[e] * scale;
          dqkv[at(b, j, 2, h) + e] = dv[e];
        }
      }
      for (int i = 0; i < p.Tn; ++i) {
        const int qt0 = i / block * fragments, query0 = i / rows * rows;
        std::vector<float> dq(hs, 0.0f);
        for (int kt = 0; kt < std::min(qt0 + fragments, nt); ++kt) {
          const int k0 = kt * kFlashTile;
          const FlashTileWork work =
              flash_tile_work(k0, k0 + kFlashTile - 1, query0, query0 + rows - 1, p.Tn);
          if (work == FlashTileWork::kSkip) continue;
          for (int j = k0; j < k0 + kFlashTile; ++j) {
            const float ds = dscore(i, j, prob(i, j, work == FlashTileWork::kMasked));
            const std::vector<float> k = row(p, b, h, 1, j);
            for (int e = 0; e < hs; ++e) dq[e] += ds * k[e];
          }
        }
        for (int e = 0; e < hs; ++e) dqkv[at(b, i, 0, h) + e] = dq[e] * scale;
      }
    }
  }
  return dqkv;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (scale + std::fabs(want[i]))) << "at " << i;
  }
}

TEST(FlashAttentionPlan, TileLoopsMatchTheCpuAttention) {
  // Tn below, at and across tile edges (64 rows; the dK/dV kernel's 128-key blocks); hs 16, 32.
  for (int Tn : {1, 5, 64, 65, 130, 200}) {
    for (int H : {2, 1}) {
      SCOPED_TRACE(testing::Message() << "Tn " << Tn << " H " << H);
      const int C = 32;
      Problem p = make_problem(2, Tn, C, H, 7 + Tn);
      std::vector<float> out, lse;
      emulate_forward(p, &out, &lse);
      const size_t NC = p.dout.size();
      std::vector<float> want(NC), att(size_t{2} * H * Tn * Tn);
      cpu::attention_forward(want.data(), att.data(), p.qkv.data(), 2, Tn, C, H);
      expect_close(out, want, 1e-5);
      // lse: log2 of sum_j exp2(scaled score), from att's row: att[i,0] = exp2(s_0 - lse).
      for (int b = 0; b < 2; ++b) {
        for (int h = 0; h < H; ++h) {
          for (int i = 0; i < Tn; ++i) {
            const float s0 = dot(row(p, b, h, 0, i), row(p, b, h, 1, 0)) * flash_scale_log2(C / H);
            const size_t r = (static_cast<size_t>(b) * H + h) * Tn + i;
            EXPECT_NEAR(exp2f(s0 - lse[r]), att[r * Tn], 1e-5);
          }
        }
      }
      std::vector<float> dqkv(3 * NC), scratch(att.size());
      cpu::attention_backward(dqkv.data(), scratch.data(), p.dout.data(), p.qkv.data(), att.data(),
                              2, Tn, C, H);
      for (int fragments = 1; fragments <= flash_backward_max_fragments(C / H); ++fragments) {
        SCOPED_TRACE(testing::Message() << fragments << " row fragments a warp");
        expect_close(emulate_backward(p, out, lse, fragments), dqkv, 1e-4);
      }
    }
  }
}

}  // namespace
}  // namespace rm::cuda
