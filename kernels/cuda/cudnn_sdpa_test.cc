// cuDNN's attention graphs as cuDNN descriptors, without a GPU: every tensor and operation
// descriptor and the operation graph of sdpa_graph.h's forward and both backwards finalize with
// the cuDNN library of the toolkit (cuDNN checks each attribute's type and count, each
// operation's operand shapes and the graph's connectivity there). Engine heuristics and plans
// need a GPU: FlashAttentionTest.CudnnAttentionMatchesTheFlashKernels in
// cuda_compute_gpu_test.cc.
#include "kernels/cuda/cudnn_sdpa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cuda/cudnn_library.h"
#include "testing/scoped_env.h"

namespace rm::cuda {
namespace {

TEST(CudnnSdpa, EveryDescriptorOfTheAttentionGraphsFinalizesWithoutAGpu) {
  EXPECT_EQ(cudnn().get_version() / 10000, static_cast<size_t>(CUDNN_MAJOR)) << cudnn().path;
  for (const auto& [B, Tn, C, H] : {std::tuple{16, 1024, 768, 12}, std::tuple{3, 7, 48, 3}}) {
    SCOPED_TRACE("B=" + std::to_string(B) + " Tn=" + std::to_string(Tn));
    const CudnnGraph fwd(sdpa::sdpa_forward_graph(B, Tn, C, H));
    EXPECT_EQ(fwd.graph().ops.size(), 14u);
    EXPECT_FALSE(fwd.planned());
    const CudnnGraph det(sdpa::sdpa_backward_graph(B, Tn, C, H, true));
    EXPECT_EQ(det.graph().ops.size(), 21u);
    const CudnnGraph acc(sdpa::sdpa_backward_graph(B, Tn, C, H, false));
    EXPECT_EQ(acc.graph().ops.size(), 22u);
  }
}

// The check above can fail: a product whose operands do not fit is refused when its descriptor
// is finalized, with a message naming the operation.
TEST(CudnnSdpa, AnOperationCudnnRefusesIsNamed) {
  sdpa::Graph g = sdpa::sdpa_forward_graph(2, 8, 32, 2);
  for (sdpa::Op& op : g.ops) {
    if (op.name == "bmm2") op.inputs[1] = g.bound(sdpa::Role::kK).uid;  // P x K^T: 8x8 by 16x8
  }
  try {
    CudnnGraph broken(std::move(g));
    FAIL() << "cuDNN took a product of mismatched operands";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bmm2"), std::string::npos) << e.what();
  }
}

TEST(CudnnSdpa, TheSwitchIsOneByDefaultTakesZeroOneOrTwoAndNamesItselfOtherwise) {
  const auto mode_with = [](const char* value) {
    const testutil::ScopedEnv env("RM_CUDNN_ATTENTION", value);
    return cudnn_attention_mode();
  };
  EXPECT_EQ(mode_with(nullptr), 1) << "the default: cuDNN, deterministic backward";
  EXPECT_EQ(mode_with(""), 1);
  EXPECT_EQ(mode_with("0"), 0);
  EXPECT_EQ(mode_with("1"), 1);
  EXPECT_EQ(mode_with("2"), 2);
  try {
    mode_with("yes");
    FAIL() << "RM_CUDNN_ATTENTION=yes accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RM_CUDNN_ATTENTION=yes"), std::string::npos);
  }
}

}  // namespace
}  // namespace rm::cuda
