#include "kernels/cuda/cudnn_library.h"

#include <stdexcept>

#include "kernels/cuda/cublas_library.h"  // open_cuda_library, cuda_library_path/_symbol

namespace rm::cuda {
namespace {

template <typename F>
void resolve_cudnn(void* handle, const std::string& path, const char* name, F* out) {
  *out = reinterpret_cast<F>(cuda_library_symbol(handle, path, name,
                                                 "a cuDNN older than the headers' " +
                                                     std::to_string(CUDNN_MAJOR) + "." +
                                                     std::to_string(CUDNN_MINOR) + "?"));
}

CudnnLibrary load() {
  const std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  void* handle = open_cuda_library(soname);
  CudnnLibrary lib;
  lib.path = cuda_library_path(handle, soname);
  const std::string& p = lib.path;
  resolve_cudnn(handle, p, "cudnnGetVersion", &lib.get_version);
  resolve_cudnn(handle, p, "cudnnGetErrorString", &lib.error_string);
  resolve_cudnn(handle, p, "cudnnGetLastErrorString", &lib.last_error_string);
  resolve_cudnn(handle, p, "cudnnCreate", &lib.create);
  resolve_cudnn(handle, p, "cudnnDestroy", &lib.destroy);
  resolve_cudnn(handle, p, "cudnnSetStream", &lib.set_stream);
  resolve_cudnn(handle, p, "cudnnBackendCreateDescriptor", &lib.create_descriptor);
  resolve_cudnn(handle, p, "cudnnBackendDestroyDescriptor", &lib.destroy_descriptor);
  resolve_cudnn(handle, p, "cudnnBackendSetAttribute", &lib.set_attribute);
  resolve_cudnn(handle, p, "cudnnBackendGetAttribute", &lib.get_attribute);
  resolve_cudnn(handle, p, "cudnnBackendFinalize", &lib.finalize);
  resolve_cudnn(handle, p, "cudnnBackendExecute", &lib.execute);
  const size_t major = lib.get_version() / 10000;
  if (major != static_cast<size_t>(CUDNN_MAJOR)) {
    throw std::runtime_error(p + " reports version " + std::to_string(lib.get_version()) +
                             ", the headers major " + std::to_string(CUDNN_MAJOR));
  }
  return lib;
}

}  // namespace

const CudnnLibrary& cudnn() {
  static const CudnnLibrary lib = load();
  return lib;
}

}  // namespace rm::cuda
