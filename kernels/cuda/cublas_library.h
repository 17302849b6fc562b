// cuBLAS and cuBLASLt, opened with dlopen on first use instead of linked into every program.
//
// Why: loading libcublasLt costs a process 0.4 s of start-up (1.1 s when the file is not in the
// page cache) and 210 MB of resident memory before main() runs. Linked, every process of a CUDA
// build paid it: CPU jobs, each rank of them, `ringmaster --help`, each test of the CLI suites
// (a 28-trial power-cut test took 64 s against 8 s in a build without CUDA). Opened here, only
// a process that makes a CudaContext pays it, once.
//
// cublas() opens both libraries on its first call (thread-safe) and returns their entry points.
// The sonames carry the major version of the headers we compiled against (CUBLAS_VER_MAJOR), so
// a library of another major version is never taken; the search is dlopen's (LD_LIBRARY_PATH,
// the program's RUNPATH, the system's paths), then the toolkit's library folder found at build
// time. A library that is missing, lacks an entry point or reports another major version than
// the headers' makes every call throw std::runtime_error naming the library and the reason.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <string>

namespace rm::cuda {

struct CublasLibrary {
  // libcublas. GemmEx and GemmStridedBatchedEx have C++ overloads in cublas_api.h (taking a
  // cudaDataType compute type), so their pointer types are spelled out; cublas_library.cc
  // checks that the headers declare exactly these.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  using GemmStridedBatchedEx = cublasStatus_t (*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long int, const void*, cudaDataType, int, long long int, const void*,
      void*, cudaDataType, int, long long int, int, cublasComputeType_t, cublasGemmAlgo_t);

  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&::cublasGetStatusString) status_string = nullptr;
  decltype(&::cublasGetProperty) get_property = nullptr;
  GemmEx gemm_ex = nullptr;
  GemmStridedBatchedEx gemm_strided_batched_ex = nullptr;

  // libcublasLt
  decltype(&::cublasLtCreate) lt_create = nullptr;
  decltype(&::cublasLtDestroy) lt_destroy = nullptr;
  decltype(&::cublasLtGetVersion) lt_get_version = nullptr;
  decltype(&::cublasLtMatmul) lt_matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) lt_matmul_algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) lt_matmul_desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) lt_matmul_desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) lt_matmul_desc_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) lt_matmul_preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) lt_matmul_preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) lt_matmul_preference_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) lt_matrix_layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) lt_matrix_layout_destroy = nullptr;

  std::string cublas_path;  // the files opened, as dlinfo reports them (for messages)
  std::string cublas_lt_path;
};

// Opens the libraries on the first call; every entry point is non-null on return.
const CublasLibrary& cublas();

// dlopen(soname) with cublas()'s search (the toolkit's folder last); the handle stays open.
// Throws std::runtime_error naming the soname and each attempt's dlerror().
void* open_cuda_library(const std::string& soname);

// The file a handle of open_cuda_library() was opened from, as dlinfo reports it (soname if not).
std::string cuda_library_path(void* handle, const std::string& soname);

// dlsym(handle, name); std::runtime_error "<path> has no <name> (<hint>)" when missing.
void* cuda_library_symbol(void* handle, const std::string& path, const char* name,
                          const std::string& hint);

}  // namespace rm::cuda
