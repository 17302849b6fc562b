// cuDNN's graph API, opened with dlopen on first use instead of linked (as cublas_library.h, and
// for the same reason: only a process that runs cuDNN's attention pays for loading it).
//
// cudnn() opens libcudnn.so.<major of the headers> on its first call (thread-safe; dlopen's
// search, then the toolkit's library folder) and returns its entry points. libcudnn.so.9 is a
// small dispatcher that loads the engine libraries beside it when a graph needs them. Missing,
// lacking an entry point, or of another major version than the headers: std::runtime_error naming
// the library and why, from every call.
#pragma once

#include <cudnn_graph.h>

#include <string>

namespace rm::cuda {

struct CudnnLibrary {
  decltype(&::cudnnGetVersion) get_version = nullptr;
  decltype(&::cudnnGetErrorString) error_string = nullptr;
  decltype(&::cudnnGetLastErrorString) last_error_string = nullptr;
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnDestroy) destroy = nullptr;
  decltype(&::cudnnSetStream) set_stream = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&::cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&::cudnnBackendFinalize) finalize = nullptr;
  decltype(&::cudnnBackendExecute) execute = nullptr;
  std::string path;  // the file opened (for messages)
};

const CudnnLibrary& cudnn();

}  // namespace rm::cuda
