#include "kernels/cuda/lt_gemm.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cuda_check.h"

namespace rm::cuda {
namespace {

cublasLtEpilogue_t lt_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kGeluAuxBias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::kDGelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case LtEpilogue::kBGradB:
      return CUBLASLT_EPILOGUE_BGRADB;
  }
  throw std::logic_error("rm::cuda: unknown epilogue");
}
bool has_vector(LtEpilogue e) {
  return e == LtEpilogue::kBias || e == LtEpilogue::kGeluAuxBias || e == LtEpilogue::kBGradB;
}
bool has_aux(LtEpilogue e) {
  return e == LtEpilogue::kGeluAuxBias || e == LtEpilogue::kDGelu;
}

template <typename V>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  RM_CUBLAS_CHECK(cublas().lt_matmul_desc_set_attribute(d, attribute, &value, sizeof(value)),
                  kThrow);
}
template <typename V>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attribute,
         const V& value) {
  RM_CUBLAS_CHECK(cublas().lt_matmul_preference_set_attribute(p, attribute, &value, sizeof(value)),
                  kThrow);
}

}  // namespace

// The descriptors of one distinct call and the algorithm picked for it (ok = false: none).
struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;

  ~Plan() {
    // Destruction failures cannot be acted on; the handle outlives its plans.
    if (d != nullptr) cublas().lt_matrix_layout_destroy(d);
    if (b != nullptr) cublas().lt_matrix_layout_destroy(b);
    if (a != nullptr) cublas().lt_matrix_layout_destroy(a);
    if (desc != nullptr) cublas().lt_matmul_desc_destroy(desc);
  }
};

LtGemm::LtGemm(cudaStream_t stream) : stream_(stream) {
  RM_CUBLAS_CHECK(cublas().lt_create(&handle_), kThrow);
  const cudaError_t rc = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (rc != cudaSuccess) {
    cublas().lt_destroy(handle_);
    throw std::runtime_error(std::string("rm::cuda: the cuBLASLt workspace (cudaMalloc of ") +
                             std::to_string(kWorkspaceBytes >> 20) +
                             " MiB) failed: " + cudaGetErrorString(rc));
  }
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (workspace_ != nullptr) {
    // The stream may still use the workspace: wait for it first.
    cudaStreamSynchronize(stream_);
    cudaFree(workspace_);
  }
  if (handle_ != nullptr) cublas().lt_destroy(handle_);
}

void LtGemm::make_plan(Plan& p, const LtGemmArgs& a, GemmType out, const void* vec, const void* aux,
                       Alignments align) {
  const CublasGemmArgs& g = a.gemm;
  // Vectors and aux must be 16-byte aligned and aux's leading dimension a multiple of 8
  // (cublasLt.h); short of that, no plan.
  if (!lt_epilogue_shape_ok(a) || (has_vector(a.epilogue) && alignment_of(vec) < 16) ||
      (has_aux(a.epilogue) && alignment_of(aux) < 16)) {
    return;
  }
  RM_CUBLAS_CHECK(cublas().lt_matmul_desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), kThrow);
  set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(cublas_operation(g.op_a)));
  set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(cublas_operation(g.op_b)));
  set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(lt_epilogue(a.epilogue)));
  // The heuristic reads the pointers' values for their alignment, so they are set before it.
  if (has_vector(a.epilogue)) set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vec);
  if (has_aux(a.epilogue)) {
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, a.aux_ld);
  }
  const LtLayouts l = lt_layouts(g);
  RM_CUBLAS_CHECK(cublas().lt_matrix_layout_create(&p.a, CUDA_R_16BF, l.a.rows, l.a.cols, l.a.ld),
                  kThrow);
  RM_CUBLAS_CHECK(cublas().lt_matrix_layout_create(&p.b, CUDA_R_16BF, l.b.rows, l.b.cols, l.b.ld),
                  kThrow);
  RM_CUBLAS_CHECK(
      cublas().lt_matrix_layout_create(&p.d, cuda_data_type(out), l.d.rows, l.d.cols, l.d.ld),
      kThrow);

  cublasLtMatmulPreference_t pref = nullptr;
  RM_CUBLAS_CHECK(cublas().lt_matmul_preference_create(&pref), kThrow);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
  try {
    set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(align.a));
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(align.b));
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(align.d));
    set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(align.d));
    rc = cublas().lt_matmul_algo_get_heuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1,
                                               &result, &found);
  } catch (...) {
    cublas().lt_matmul_preference_destroy(pref);
    throw;
  }
  cublas().lt_matmul_preference_destroy(pref);
  if (rc == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.ok = true;
  }
}

bool LtGemm::run(const LtGemmArgs& a, GemmType out, const void* first, const void* second, void* D,
                 void* vec, void* aux) {
  const CublasGemmArgs& g = a.gemm;
  if (g.empty()) return true;
  const Alignments align{alignment_of(first), alignment_of(second), alignment_of(D)};
  const Key key{static_cast<int>(a.epilogue),
                static_cast<int>(g.op_a),
                static_cast<int>(g.op_b),
                g.m,
                g.n,
                g.k,
                g.lda,
                g.ldb,
                g.ldc,
                g.beta != 0.0f,
                static_cast<int>(out),
                align.a,
                align.b,
                align.d,
                has_vector(a.epilogue) ? alignment_of(vec) : 0,
                has_aux(a.epilogue) ? alignment_of(aux) : 0,
                a.aux_ld,
                a.vector_length};
  const auto [it, created] = plans_.try_emplace(key);
  if (created) {
    // A plan whose making throws is not kept: kept as "no matmul", every later GEMM of the
    // shape would take the unfused path silently.
    try {
      it->second = std::make_unique<Plan>();
      make_plan(*it->second, a, out, vec, aux, align);
    } catch (...) {
      plans_.erase(it);
      throw;
    }
  }
  Plan& p = *it->second;
  if (!p.ok) {
    ++fallbacks_;
    if (created) {
      std::fprintf(stderr,
                   "rm::cuda: cuBLASLt has no matmul for epilogue %s at m=%d n=%d k=%d (aligned "
                   "%d/%d/%d bytes); that GEMM takes the unfused path\n",
                   epilogue_name(a.epilogue), g.m, g.n, g.k, align.a, align.b, align.d);
    }
    return false;
  }
  if (has_vector(a.epilogue)) set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vec);
  if (has_aux(a.epilogue)) set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  const cublasStatus_t rc =
      cublas().lt_matmul(handle_, p.desc, &g.alpha, first, p.a, second, p.b, &g.beta, D, p.d, D,
                         p.d, &p.algo, workspace_, kWorkspaceBytes, stream_);
  if (rc != CUBLAS_STATUS_SUCCESS) {
    // Which of a step's many GEMMs failed is what the message must say.
    char shape[160];
    std::snprintf(shape, sizeof shape, "epilogue %s at m=%d n=%d k=%d (aligned %d/%d/%d bytes)",
                  epilogue_name(a.epilogue), g.m, g.n, g.k, align.a, align.b, align.d);
    throw std::runtime_error(std::string("rm::cuda: cublasLtMatmul failed, ") + shape + ": " +
                             cublas().status_string(rc));
  }
  return true;
}

}  // namespace rm::cuda
