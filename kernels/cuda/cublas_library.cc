#include "kernels/cuda/cublas_library.h"

#include <dlfcn.h>
#include <link.h>

#include <stdexcept>
#include <type_traits>

// The toolkit's library folder CMake found (kernels/cuda/CMakeLists.txt): dlopen's last resort.
#ifndef RM_CUDA_LIBRARY_DIR
#define RM_CUDA_LIBRARY_DIR ""
#endif

namespace rm::cuda {
namespace {

// The headers declare the overloads the spelled-out types name (unevaluated: nothing is linked).
static_assert(std::is_same_v<decltype(static_cast<CublasLibrary::GemmEx>(&::cublasGemmEx)),
                             CublasLibrary::GemmEx>);
static_assert(std::is_same_v<decltype(static_cast<CublasLibrary::GemmStridedBatchedEx>(
                                 &::cublasGemmStridedBatchedEx)),
                             CublasLibrary::GemmStridedBatchedEx>);

template <typename F>
void resolve(void* handle, const std::string& path, const char* name, F* out) {
  *out = reinterpret_cast<F>(cuda_library_symbol(
      handle, path, name,
      "a cuBLAS too old for headers of major version " + std::to_string(CUBLAS_VER_MAJOR) + "?"));
}

CublasLibrary load() {
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  CublasLibrary lib;
  // cuBLASLt first: libcublas needs it and then finds this copy by its soname.
  const std::string lt_name = "libcublasLt.so." + major;
  void* lt = open_cuda_library(lt_name);
  lib.cublas_lt_path = cuda_library_path(lt, lt_name);
  const std::string& ltp = lib.cublas_lt_path;
  resolve(lt, ltp, "cublasLtCreate", &lib.lt_create);
  resolve(lt, ltp, "cublasLtDestroy", &lib.lt_destroy);
  resolve(lt, ltp, "cublasLtGetVersion", &lib.lt_get_version);
  resolve(lt, ltp, "cublasLtMatmul", &lib.lt_matmul);
  resolve(lt, ltp, "cublasLtMatmulAlgoGetHeuristic", &lib.lt_matmul_algo_get_heuristic);
  resolve(lt, ltp, "cublasLtMatmulDescCreate", &lib.lt_matmul_desc_create);
  resolve(lt, ltp, "cublasLtMatmulDescDestroy", &lib.lt_matmul_desc_destroy);
  resolve(lt, ltp, "cublasLtMatmulDescSetAttribute", &lib.lt_matmul_desc_set_attribute);
  resolve(lt, ltp, "cublasLtMatmulPreferenceCreate", &lib.lt_matmul_preference_create);
  resolve(lt, ltp, "cublasLtMatmulPreferenceDestroy", &lib.lt_matmul_preference_destroy);
  resolve(lt, ltp, "cublasLtMatmulPreferenceSetAttribute", &lib.lt_matmul_preference_set_attribute);
  resolve(lt, ltp, "cublasLtMatrixLayoutCreate", &lib.lt_matrix_layout_create);
  resolve(lt, ltp, "cublasLtMatrixLayoutDestroy", &lib.lt_matrix_layout_destroy);

  const std::string blas_name = "libcublas.so." + major;
  void* blas = open_cuda_library(blas_name);
  lib.cublas_path = cuda_library_path(blas, blas_name);
  const std::string& bp = lib.cublas_path;
  // The versioned names behind cublas_v2.h's macros (cublasCreate is cublasCreate_v2).
  resolve(blas, bp, "cublasCreate_v2", &lib.create);
  resolve(blas, bp, "cublasDestroy_v2", &lib.destroy);
  resolve(blas, bp, "cublasSetStream_v2", &lib.set_stream);
  resolve(blas, bp, "cublasSetWorkspace_v2", &lib.set_workspace);
  resolve(blas, bp, "cublasGetStatusString", &lib.status_string);
  resolve(blas, bp, "cublasGetProperty", &lib.get_property);
  resolve(blas, bp, "cublasGemmEx", &lib.gemm_ex);
  resolve(blas, bp, "cublasGemmStridedBatchedEx", &lib.gemm_strided_batched_ex);

  // The sonames already pin the major version; a library that says otherwise is not cuBLAS's.
  int loaded_major = -1;
  if (lib.get_property(MAJOR_VERSION, &loaded_major) != CUBLAS_STATUS_SUCCESS ||
      loaded_major != CUBLAS_VER_MAJOR) {
    throw std::runtime_error(bp + " reports major version " + std::to_string(loaded_major) +
                             ", the headers " + major);
  }
  const size_t lt_major = lib.lt_get_version() / 10000;
  if (lt_major != static_cast<size_t>(CUBLAS_VER_MAJOR)) {
    throw std::runtime_error(ltp + " reports major version " + std::to_string(lt_major) +
                             ", the headers " + major);
  }
  // The handles stay open for the life of the process: cuBLAS handles outlive any scope here.
  return lib;
}

}  // namespace

void* open_cuda_library(const std::string& soname) {
  void* handle = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return handle;
  const std::string first = ::dlerror();
  const std::string dir = RM_CUDA_LIBRARY_DIR;
  if (!dir.empty()) {
    handle = ::dlopen((dir + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return handle;
  }
  throw std::runtime_error("cannot load " + soname + " (needed by the cuda backend): " + first +
                           (dir.empty() ? "" : "; nor from " + dir + ": " + ::dlerror()) +
                           " -- put the CUDA toolkit's libraries on LD_LIBRARY_PATH");
}

std::string cuda_library_path(void* handle, const std::string& soname) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return soname;
}

void* cuda_library_symbol(void* handle, const std::string& path, const char* name,
                          const std::string& hint) {
  ::dlerror();
  void* symbol = ::dlsym(handle, name);
  if (symbol == nullptr) throw std::runtime_error(path + " has no " + name + " (" + hint + ")");
  return symbol;
}

const CublasLibrary& cublas() {
  // A failed load throws out of the initialiser, so the next call tries again and says why again.
  static const CublasLibrary lib = load();
  return lib;
}

}  // namespace rm::cuda
