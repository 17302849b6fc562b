// ResidentParams (resident_params.h) on the cpu backend: an fp32 model reads the uploaded values
// as they are; a bf16 model reads their bf16 rounding, unit by unit at each unit's offset; and
// its forward over them gives the loss of a forward over a FlatParamAccess of those bf16 values.
#include "model/resident_params.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/counter_rng.h"

namespace rm {
namespace {

ModelConfig small_gpt() {
  ModelConfig c;
  c.type = ModelType::kGpt;
  c.vocab_size = 17;
  c.seq_len = 8;
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  return c;
}

TEST(ResidentParams, ReadTheModelsPrecisionAtEachUnitsOffset) {
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(choice_name(p));
    const auto model = make_model(small_gpt(), 2, nullptr, p);
    std::vector<float> host(model->layout().size());
    model->init_params(host.data(), 5);
    ResidentParams params(*model, host);
    model->compute().synchronize();
    const std::vector<ParamUnit>& units = model->units();
    ASSERT_GT(units.size(), 2u);
    for (size_t u = 0; u < units.size(); ++u) {
      const void* got = params.acquire_params(static_cast<int>(u));
      for (size_t i = units[u].begin; i < units[u].end; ++i) {
        const size_t k = i - units[u].begin;
        const float want = p == Precision::kBf16 ? to_float(to_bf16(host[i])) : host[i];
        const float read = p == Precision::kBf16 ? to_float(static_cast<const bf16*>(got)[k])
                                                 : static_cast<const float*>(got)[k];
        ASSERT_EQ(read, want) << "unit " << u << " element " << k;
      }
    }
    if (p == Precision::kFp32) {
      EXPECT_EQ(params.acquire_params(1), host.data() + units[1].begin) << "copied on the cpu";
    }
    EXPECT_THROW(params.acquire_grads(0), std::logic_error);
  }
}

TEST(ResidentParams, ABf16ForwardReadsTheRoundedWeights) {
  const auto model = make_model(small_gpt(), 2, nullptr, Precision::kBf16);
  std::vector<float> host(model->layout().size());
  model->init_params(host.data(), 9);
  std::vector<int> in(2 * 8), tg(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<int>(rng_u64(3, RngPurpose::kSample, 0, i) % 17);
    tg[i] = static_cast<int>(rng_u64(3, RngPurpose::kSample, 1, i) % 17);
  }
  ResidentParams params(*model, host);
  std::vector<bf16> rounded(host.size());
  for (size_t i = 0; i < host.size(); ++i) rounded[i] = to_bf16(host[i]);
  // The rounded values in host memory (the cpu backend's), unit by unit.
  struct Bf16View final : ParamAccess {
    const std::vector<ParamUnit>& units;
    const bf16* data;
    Bf16View(const std::vector<ParamUnit>& u, const bf16* d) : units(u), data(d) {}
    const void* acquire_params(int u) override { return data + units[u].begin; }
    void release_params(int) override {}
    float* acquire_grads(int) override { return nullptr; }
    void release_grads(int) override {}
  } view(model->units(), rounded.data());
  const double resident = model->forward_loss(params, in.data(), tg.data(), 2);
  const double direct = model->forward_loss(view, in.data(), tg.data(), 2);
  EXPECT_EQ(resident, direct);
  EXPECT_GT(resident, 0.0);
}

TEST(ResidentParams, RefusesParametersOfAnotherSize) {
  const auto model = make_model(small_gpt(), 1);
  EXPECT_THROW(ResidentParams(*model, std::vector<float>(model->layout().size() + 1)),
               std::invalid_argument);
}

}  // namespace
}  // namespace rm
