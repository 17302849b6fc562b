// Gradients of a whole model against central differences of its loss (test-only): the two
// largest-gradient entries of every tensor, so that each tensor's wiring is checked (wte, which
// gets the LM head's and the embedding's contributions, checks the tying too).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/model.h"

namespace rm {

// loss(), which reads p, against g = d loss / d p; p is changed and restored.
template <typename Loss>
inline void expect_gradients_match_finite_differences(const Model& model, std::vector<float>& p,
                                                      const std::vector<float>& g, Loss loss) {
  int checked = 0;
  for (const TensorSpec& t : model.layout().tensors()) {
    std::vector<size_t> idx(t.numel);
    std::iota(idx.begin(), idx.end(), t.offset);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(),
                      [&](size_t a, size_t b) { return std::abs(g[a]) > std::abs(g[b]); });
    for (int k = 0; k < 2; ++k) {
      const size_t i = idx[k];
      const float saved = p[i], h = 4e-3f;
      p[i] = saved + h;
      const double up = loss();
      p[i] = saved - h;
      const double down = loss();
      p[i] = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 0.03 * std::abs(numeric) + 2e-3)
          << t.name << " [" << i - t.offset << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(model.layout().tensors().size()));
}

}  // namespace rm
