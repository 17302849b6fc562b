// Dropout's masks: which elements a dropout call keeps, as one pure function that every backend
// calls (host and device), so that a mask depends on its key only -- never on the backend, the
// rank, the thread, or how many draws came before.
//
// A call covers B sequences of `row` elements each ([B, Tn, C]: row = Tn * C). Element e of
// sequence b is decided by 16 bits of one counter-based draw (kernels/counter_rng.h):
//   draw = rng_u64(seed, kDropout, first_sample + b, site << 40 | e / 4), bits 16 * (e % 4) up,
// four elements a draw. It is dropped when those 16 bits are below `threshold`, else
// multiplied by `scale`. Keying by the sequence's global sample index (the data order's,
// worker/data/sample_order.h) makes a mask the same on any number of ranks and micro-batches,
// and the same again when the forward is recomputed or a run resumes; `site` tells the
// network's dropouts apart (gpt: model/gpt_model.h).
//
// The probability is quantised to 1/65536: threshold = round(p * 65536) (p = 0.1 drops with
// probability 6554/65536 = 0.100006), and scale = 65536 / (65536 - threshold), so that a kept
// element's expected value is its input's exactly, as in inverted dropout (PyTorch's).
#pragma once

#include <math.h>
#include <stdint.h>

#include "kernels/counter_rng.h"
#include "kernels/host_device.h"

namespace rm {

constexpr int kDropoutElemsPerDraw = 4;     // 16 bits an element
constexpr uint32_t kDropoutSiteShift = 40;  // rows of up to 2^42 elements

struct DropoutKey {
  uint64_t seed = 0;
  uint64_t first_sample = 0;  // the global sample index of the call's first sequence
  uint32_t site = 0;          // which dropout of the network; < 2^24
  uint32_t threshold = 0;     // an element is dropped when its 16 bits are below this
  float scale = 1.0f;         // what a kept element is multiplied by
};

// The threshold and scale of probability p in [0, 1); seed, first_sample and site are the
// caller's. p = 0 keeps everything (threshold 0, scale 1).
inline DropoutKey dropout_key(double p) {
  DropoutKey k;
  const double t = nearbyint(p * 65536.0);
  k.threshold = t <= 0 ? 0u : t >= 65535 ? 65535u : static_cast<uint32_t>(t);
  k.scale = static_cast<float>(65536.0 / (65536.0 - k.threshold));
  return k;
}

// The draw that decides elements 4w .. 4w+3 of sequence b. `prefix` is dropout_prefix(key, b).
RM_HOST_DEVICE inline uint64_t dropout_prefix(const DropoutKey& key, uint64_t b) {
  return rng_prefix(key.seed, RngPurpose::kDropout, key.first_sample + b);
}
RM_HOST_DEVICE inline uint64_t dropout_draw(const DropoutKey& key, uint64_t prefix, uint64_t w) {
  return rng_continue(prefix, (static_cast<uint64_t>(key.site) << kDropoutSiteShift) | w);
}

// Element j's (0..3) 16 bits of a draw, and what they make of x: x * scale if kept, else x * 0
// (a signed zero; NaN from an infinite or NaN x, as PyTorch's multiply by the mask gives). A
// multiply by one of two factors, not a branch: the cpu loop vectorises, and the dropped
// elements, a random fifth or so, cost no mispredicted branches.
RM_HOST_DEVICE inline uint32_t dropout_bits(uint64_t draw, int j) {
  return static_cast<uint32_t>(draw >> (16 * j)) & 0xffffu;
}
RM_HOST_DEVICE inline float dropout_value(float scale, uint32_t threshold, uint32_t bits, float x) {
  return x * (bits >= threshold ? scale : 0.0f);
}

}  // namespace rm
