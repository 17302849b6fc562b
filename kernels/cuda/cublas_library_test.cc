// cublas_library.h without a GPU: the libraries are not in the process until cublas() opens
// them, every entry point resolves, and the versions match the headers'. Opening cuBLAS needs no
// device; this runs wherever the build found CUDA.
#include "kernels/cuda/cublas_library.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace rm::cuda {
namespace {

std::string self_maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One test: whether the libraries were already mapped depends on what ran before in a process.
TEST(CublasLibrary, OpensOnFirstUseWithEveryEntryPointAndTheHeadersVersion) {
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  ASSERT_EQ(self_maps().find("libcublas"), std::string::npos)
      << "cuBLAS is mapped before cublas() was called: a program linking rm_kernels_cuda pays "
         "its load again";

  const CublasLibrary& lib = cublas();
  EXPECT_EQ(&lib, &cublas());
  const std::string maps = self_maps();
  EXPECT_NE(maps.find("libcublasLt.so." + major), std::string::npos);
  EXPECT_NE(maps.find("libcublas.so." + major), std::string::npos);
  EXPECT_NE(lib.cublas_path.find("libcublas.so." + major), std::string::npos) << lib.cublas_path;
  EXPECT_NE(lib.cublas_lt_path.find("libcublasLt.so." + major), std::string::npos)
      << lib.cublas_lt_path;

  const void* entries[] = {
      reinterpret_cast<const void*>(lib.create),
      reinterpret_cast<const void*>(lib.destroy),
      reinterpret_cast<const void*>(lib.set_stream),
      reinterpret_cast<const void*>(lib.set_workspace),
      reinterpret_cast<const void*>(lib.status_string),
      reinterpret_cast<const void*>(lib.get_property),
      reinterpret_cast<const void*>(lib.gemm_ex),
      reinterpret_cast<const void*>(lib.gemm_strided_batched_ex),
      reinterpret_cast<const void*>(lib.lt_create),
      reinterpret_cast<const void*>(lib.lt_destroy),
      reinterpret_cast<const void*>(lib.lt_get_version),
      reinterpret_cast<const void*>(lib.lt_matmul),
      reinterpret_cast<const void*>(lib.lt_matmul_algo_get_heuristic),
      reinterpret_cast<const void*>(lib.lt_matmul_desc_create),
      reinterpret_cast<const void*>(lib.lt_matmul_desc_destroy),
      reinterpret_cast<const void*>(lib.lt_matmul_desc_set_attribute),
      reinterpret_cast<const void*>(lib.lt_matmul_preference_create),
      reinterpret_cast<const void*>(lib.lt_matmul_preference_destroy),
      reinterpret_cast<const void*>(lib.lt_matmul_preference_set_attribute),
      reinterpret_cast<const void*>(lib.lt_matrix_layout_create),
      reinterpret_cast<const void*>(lib.lt_matrix_layout_destroy),
  };
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); ++i) {
    EXPECT_NE(entries[i], nullptr) << "entry point " << i;
  }

  // Calls that need no device: the pointers are the functions they name.
  int value = -1;
  ASSERT_EQ(lib.get_property(MAJOR_VERSION, &value), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(value, CUBLAS_VER_MAJOR);
  EXPECT_EQ(lib.lt_get_version() / 10000, static_cast<size_t>(CUBLAS_VER_MAJOR));
  const std::string not_initialized = lib.status_string(CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_NE(not_initialized.find("not initialized"), std::string::npos) << not_initialized;
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(lib.lt_matrix_layout_create(&layout, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lib.lt_matrix_layout_destroy(layout), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasLibrary, AMissingLibraryIsNamedWithTheLoadersReason) {
  try {
    open_cuda_library("libcublasLt.so.999");
    FAIL() << "opened a library that does not exist";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load libcublasLt.so.999"), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;
    EXPECT_NE(what.find("LD_LIBRARY_PATH"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace rm::cuda
