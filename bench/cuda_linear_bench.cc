// cuda_linear_bench: the Linear layer's GPU calls at GPT-2 124M's shapes (16 sequences of 1024
// tokens, width 768, bf16), each way the backend can run them, timed in one process beside the
// raw cuBLAS GEMM of the same shape: the fused cuBLASLt epilogues (bias, GELU, GELU's derivative,
// bias gradient; kernels/cuda/gemm.h) against the unfused path (a GEMM, then the bias, GELU and
// column-sum kernels), and the classifier's GEMMs over the padded vocabulary. What it prints
// decides which epilogues the backend takes; it needs a GPU and exits 2 without one.
//
//   cuda_linear_bench [rows=16384]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda/bias_gradient.h"
#include "kernels/cuda/classifier_plan.h"
#include "kernels/cuda/cuda_compute.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_args.h"

namespace {

using rm::bf16;
using namespace rm::cuda;

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "cuda_linear_bench: %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

template <typename T>
T* device_array(size_t n, float value) {
  std::vector<T> host(n, rm::store<T>(value));
  // A little variety, so that no epilogue meets only one value.
  for (size_t i = 0; i < n; i += 7) host[i] = rm::store<T>(-value);
  void* p = nullptr;
  check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
  check(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return static_cast<T*>(p);
}

// Median over 5 batches of the mean time of `reps` calls, in ms.
double time_ms(cudaStream_t stream, const std::function<void()>& call, int reps = 10) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> ms;
  for (int batch = 0; batch < 5; ++batch) {
    check(cudaEventRecord(a, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) call();
    check(cudaEventRecord(b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void row(const std::string& layer, const std::string& what, double gflop, double ms,
         double baseline_ms) {
  std::printf("%-8s %-44s %9.3f %8.1f %7.2fx\n", layer.c_str(), what.c_str(), ms, gflop / ms,
              baseline_ms > 0 ? ms / baseline_ms : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (visible_device_count(&why) == 0) {
    std::fprintf(stderr, "cuda_linear_bench: no GPU: %s\n", why.c_str());
    return 2;
  }
  const int N = argc > 1 ? std::atoi(argv[1]) : 16384;
  CudaContext ctx(0, /*allow_tf32=*/false);
  const cudaStream_t s = ctx.stream();
  const Blas& blas = ctx.blas();
  LtGemm* lt = &ctx.lt();
  const int widest = 3072;
  bf16* x = device_array<bf16>(static_cast<size_t>(N) * widest, 0.01f);
  bf16* y = device_array<bf16>(static_cast<size_t>(N) * widest, 0.0f);
  bf16* pre = device_array<bf16>(static_cast<size_t>(N) * widest, 0.5f);
  bf16* dout = device_array<bf16>(static_cast<size_t>(N) * widest, 0.02f);
  bf16* w = device_array<bf16>(static_cast<size_t>(widest) * 768, 0.01f);
  bf16* bias = device_array<bf16>(widest, 0.1f);
  float* dw = device_array<float>(static_cast<size_t>(widest) * 768, 0.0f);
  float* db = device_array<float>(widest, 0.0f);
  float* scratch = ctx.column_scratch(linear_scratch_floats(N, widest));

  std::printf(
      "# cuda_linear_bench: %d rows, bf16, ms per call (median of 5 batches of 10), "
      "TFLOP/s, time / the raw cuBLAS GEMM of the same shape\n",
      N);
  std::printf("%-8s %-44s %9s %8s %8s\n", "layer", "call", "ms", "TFLOP/s", "vs GEMM");
  struct Layer {
    const char* name;
    int C, OC;
    bool gelu_in, gelu_out;  // fc: GELU after; fcproj: its input is the GELU's output
  };
  for (const Layer& L :
       {Layer{"qkv", 768, 2304, false, false}, Layer{"proj", 768, 768, false, false},
        Layer{"fc", 768, 3072, false, true}, Layer{"fcproj", 3072, 768, true, false}}) {
    const int C = L.C, OC = L.OC;
    const double gflop = 2.0 * N * C * OC / 1e9;
    const double fwd =
        time_ms(s, [&] { gemm(blas, linear_forward_gemm(N, C, OC, false), x, w, y); });
    row(L.name, "forward: cuBLAS GEMM alone", gflop, fwd, fwd);
    row(L.name, "forward: bias rows + GEMM (unfused)", gflop,
        time_ms(s, [&] { linear_forward(blas, nullptr, y, x, w, bias, N, C, OC, s); }), fwd);
    row(L.name, "forward: cuBLASLt BIAS", gflop,
        time_ms(s, [&] { linear_forward(blas, lt, y, x, w, bias, N, C, OC, s); }), fwd);
    if (L.gelu_out) {
      row(L.name, "forward+GELU: unfused", gflop,
          time_ms(s, [&] { linear_gelu_forward(blas, nullptr, y, pre, x, w, bias, N, C, OC, s); }),
          fwd);
      row(L.name, "forward+GELU: cuBLASLt BIAS, GELU kernel", gflop,
          time_ms(s,
                  [&] {
                    linear_forward(blas, lt, pre, x, w, bias, N, C, OC, s);
                    gelu_forward(y, pre, static_cast<size_t>(N) * OC, s);
                  }),
          fwd);
      row(L.name, "forward+GELU: cuBLASLt GELU_AUX_BIAS", gflop,
          time_ms(s, [&] { linear_gelu_forward(blas, lt, y, pre, x, w, bias, N, C, OC, s); }), fwd);
    }
    const double di = time_ms(s, [&] { gemm(blas, linear_dinp_gemm(N, C, OC), dout, w, y); });
    row(L.name, "dinp: cuBLAS GEMM alone", gflop, di, di);
    if (L.gelu_in) {
      row(L.name, "dinp+dGELU: GEMM, GELU backward kernel", gflop,
          time_ms(s,
                  [&] {
                    gemm(blas, linear_dinp_gemm(N, C, OC), dout, w, y);
                    gelu_backward(y, pre, y, static_cast<size_t>(N) * C, s);
                  }),
          di);
      row(L.name, "dinp+dGELU: cuBLASLt DGELU", gflop,
          time_ms(s,
                  [&] {
                    lt->run(lt_linear_dinp(N, C, OC, true), GemmType::kBF16, w, dout, y, nullptr,
                            pre);
                  }),
          di);
    }
    const double dwb = time_ms(
        s, [&] { gemm(blas, linear_dweight_gemm(N, C, OC), dout, x, reinterpret_cast<bf16*>(y)); });
    row(L.name, "dW: cuBLAS GEMM alone, bf16 out, beta 1", gflop, dwb, dwb);
    const double dwf = time_ms(s, [&] { gemm(blas, linear_dweight_gemm(N, C, OC), dout, x, dw); });
    row(L.name, "dW: cuBLAS GEMM, fp32 out, beta 1", gflop, dwf, dwb);
    row(L.name, "dW: cuBLASLt, fp32 out, beta 1", gflop,
        time_ms(s,
                [&] {
                  lt->run(lt_linear_dweight(N, C, OC, false), GemmType::kF32, x, dout, dw, nullptr,
                          nullptr);
                }),
        dwb);
    row(L.name, "dW+dbias: GEMM, column sums (unfused)", gflop,
        time_ms(s,
                [&] {
                  linear_backward(blas, nullptr, static_cast<bf16*>(nullptr), dw, db, dout, x, w, N,
                                  C, OC, scratch, s);
                }),
        dwb);
    row(L.name, "dW+dbias: cuBLASLt GEMM, 16-byte bias kernel", gflop,
        time_ms(s,
                [&] {
                  lt->run(lt_linear_dweight(N, C, OC, false), GemmType::kF32, x, dout, dw, nullptr,
                          nullptr);
                  bias_gradient(db, dout, N, OC, scratch, s);
                }),
        dwb);
    row(L.name, "dbias alone: 16-byte bias kernel", gflop,
        time_ms(s, [&] { bias_gradient(db, dout, N, OC, scratch, s); }), dwb);
    row(L.name, "dW+dbias: cuBLASLt BGRADB, add", gflop,
        time_ms(s,
                [&] {
                  linear_backward(blas, lt, static_cast<bf16*>(nullptr), dw, db, dout, x, w, N, C,
                                  OC, scratch, s);
                }),
        dwb);
  }

  // The classifier's GEMMs over the padded vocabulary (classifier_plan.h), as
  // queue_classifier_forward_backward runs them; its cross-entropy is not timed here.
  const int V = 50257, Vp = padded_vocab(V), C = 768;
  bf16* logits = device_array<bf16>(static_cast<size_t>(N) * Vp, 0.01f);
  bf16* wte = device_array<bf16>(static_cast<size_t>(Vp) * C, 0.01f);
  float* dwte = device_array<float>(static_cast<size_t>(V) * C, 0.0f);
  const double cg = 2.0 * N * C * Vp / 1e9;
  const double cf = time_ms(
      s, [&] { gemm(blas, linear_forward_gemm(N, C, Vp, false), x, wte, logits); }, 3);
  row("lm_head", "forward: cuBLAS GEMM, bf16 logits", cg, cf, cf);
  row("lm_head", "forward: cuBLASLt, bf16 logits", cg,
      time_ms(
          s,
          [&] {
            lt->run(lt_linear_forward(N, C, Vp, false, false), GemmType::kBF16, wte, x, logits,
                    nullptr, nullptr);
          },
          3),
      cf);
  row("lm_head", "dinp: cuBLAS GEMM", cg,
      time_ms(
          s, [&] { gemm(blas, linear_dinp_gemm(N, C, Vp), logits, wte, y); }, 3),
      cf);
  row("lm_head", "dW: cuBLAS GEMM, fp32 out, beta 1 (first V rows)", cg,
      time_ms(
          s, [&] { gemm(blas, classifier_dweight_gemm(N, C, V, Vp), logits, x, dwte); }, 3),
      cf);
  LtGemmArgs dwte_lt;
  dwte_lt.gemm = to_cublas(classifier_dweight_gemm(N, C, V, Vp));
  row("lm_head", "dW: cuBLASLt, fp32 out, beta 1 (first V rows)", cg,
      time_ms(
          s, [&] { lt->run(dwte_lt, GemmType::kF32, x, logits, dwte, nullptr, nullptr); }, 3),
      cf);
  const SplitGemm two = classifier_dweight_gemms(N, C, V, Vp);
  row("lm_head", "dW: cuBLAS GEMMs, fp32 out, beta 1, rows split at 128s", cg,
      time_ms(
          s,
          [&] {
            gemm(blas, two.head, logits, x, dwte);
            gemm(blas, two.tail, logits + two.split, x, dwte + static_cast<size_t>(two.split) * C);
          },
          3),
      cf);
  // All Vp rows into a padded fp32 buffer, beta 0 (the first V rows would then be added to dwte).
  float* dwte_p = device_array<float>(static_cast<size_t>(Vp) * C, 0.0f);
  RowMajorGemm padded = classifier_dweight_gemm(N, C, Vp, Vp);
  padded.beta = 0.0f;
  row("lm_head", "dW: cuBLAS GEMM, fp32 out, beta 0, all Vp rows", cg,
      time_ms(
          s, [&] { gemm(blas, padded, logits, x, dwte_p); }, 3),
      cf);
  row("lm_head", "dW: cuBLAS GEMM, bf16 out, beta 0, all Vp rows", cg,
      time_ms(
          s, [&] { gemm(blas, padded, logits, x, wte); }, 3),
      cf);
  std::printf("# lt plans %zu, fallbacks %lld\n", lt->plans(),
              static_cast<long long>(lt->fallbacks()));
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return 0;
}
