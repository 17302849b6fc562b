#include "kernels/cuda/cudnn_sdpa.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/gpu_switches.h"

namespace rm::cuda {
namespace {

using sdpa::DataType;
using sdpa::OpKind;
using sdpa::PointwiseMode;
using sdpa::Role;

// " (cuDNN's own words on its last error)", or "" where it kept none.
std::string cudnn_last_error() {
  char detail[512] = {0};
  cudnn().last_error_string(detail, sizeof detail);
  return detail[0] != '\0' ? std::string(" (") + detail + ")" : "";
}

[[noreturn]] void cudnn_fail(cudnnStatus_t status, const std::string& what) {
  throw std::runtime_error("cuDNN: " + what + ": " + cudnn().error_string(status) +
                           cudnn_last_error());
}

void cudnn_check(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) cudnn_fail(status, what);
}

// One backend descriptor, destroyed with its owner.
class BackendDescriptor {
 public:
  BackendDescriptor(cudnnBackendDescriptorType_t type, const std::string& what) : what_(what) {
    cudnn_check(cudnn().create_descriptor(type, &d_), "creating " + what_);
  }
  ~BackendDescriptor() {
    if (d_ != nullptr) cudnn().destroy_descriptor(d_);
  }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  template <typename V>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const V* values) {
    cudnn_check(cudnn().set_attribute(d_, name, type, count, values),
                what_ + ": attribute " + std::to_string(static_cast<int>(name)));
  }
  void set(cudnnBackendAttributeName_t name, const BackendDescriptor& d) {
    cudnnBackendDescriptor_t raw = d.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  void finalize() { cudnn_check(cudnn().finalize(d_), "finalizing " + what_); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

cudnnDataType_t data_type(DataType t) {
  switch (t) {
    case DataType::kFloat:
      return CUDNN_DATA_FLOAT;
    case DataType::kBf16:
      return CUDNN_DATA_BFLOAT16;
    case DataType::kInt32:
      return CUDNN_DATA_INT32;
    case DataType::kBool:
      return CUDNN_DATA_BOOLEAN;
  }
  throw std::logic_error("cudnn_sdpa: data type");
}

cudnnPointwiseMode_t pointwise_mode(PointwiseMode m) {
  switch (m) {
    case PointwiseMode::kAdd:
      return CUDNN_POINTWISE_ADD;
    case PointwiseMode::kSub:
      return CUDNN_POINTWISE_SUB;
    case PointwiseMode::kMul:
      return CUDNN_POINTWISE_MUL;
    case PointwiseMode::kDiv:
      return CUDNN_POINTWISE_DIV;
    case PointwiseMode::kExp:
      return CUDNN_POINTWISE_EXP;
    case PointwiseMode::kLog:
      return CUDNN_POINTWISE_LOG;
    case PointwiseMode::kIdentity:
      return CUDNN_POINTWISE_IDENTITY;
    case PointwiseMode::kGenIndex:
      return CUDNN_POINTWISE_GEN_INDEX;
    case PointwiseMode::kCmpGe:
      return CUDNN_POINTWISE_CMP_GE;
    case PointwiseMode::kBinarySelect:
      return CUDNN_POINTWISE_BINARY_SELECT;
  }
  throw std::logic_error("cudnn_sdpa: pointwise mode");
}

// The operation graph names the handle as the front end's does when given one (llm.c gives it):
// required before cuDNN 9.8, deprecated since, still honoured. The execution plan does not: the
// front end sets only its engine configuration (its handle serves deserialization only).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kOperationGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
#pragma GCC diagnostic pop

// The graphs of sdpa_graph.h were compared with the front end's for cuDNN 9.19; before 9.16 its
// lowering differs: through 9.15 the backward gets a padding mask with per-batch sequence
// lengths as a workaround wherever T is not a multiple of 128, 9.10.0-9.10.1 have the bf16
// forward refused for known bugs, and before 9.10 the mask's value and a dQ accumulator the
// caller zeroes differ. Graphs the front end would not send are not sent: the flash kernels run.
constexpr size_t kOldestCudnn = 91600;

}  // namespace

struct CudnnGraph::Impl {
  sdpa::Graph graph;
  std::vector<std::unique_ptr<BackendDescriptor>> tensors;  // by uid - 1
  std::vector<std::unique_ptr<BackendDescriptor>> owned;    // operations and their settings
  std::vector<cudnnBackendDescriptor_t> operations;
  std::unique_ptr<BackendDescriptor> op_graph;
  std::vector<std::unique_ptr<BackendDescriptor>> configs;
  std::unique_ptr<BackendDescriptor> plan;
  int64_t workspace = 0;
  std::vector<float> scalars;  // by-value values, by uid - 1 (their addresses go to cuDNN)

  const BackendDescriptor& tensor(int64_t uid) const {
    return *tensors.at(static_cast<size_t>(uid - 1));
  }

  BackendDescriptor& own(cudnnBackendDescriptorType_t type, const std::string& what) {
    owned.push_back(std::make_unique<BackendDescriptor>(type, what));
    return *owned.back();
  }

  void build_tensor(const sdpa::Tensor& t) {
    auto d =
        std::make_unique<BackendDescriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + t.name);
    const cudnnDataType_t type = data_type(t.type);
    const int64_t alignment = 16;
    const bool is_virtual = t.is_virtual, by_value = t.by_value;
    d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    d->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dims.data());
    d->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, t.strides.data());
    d->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &t.uid);
    d->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    d->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    d->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    d->finalize();
    tensors.push_back(std::move(d));
  }

  void build_op(const sdpa::Op& op) {
    const std::string what = "operation " + op.name;
    const cudnnDataType_t compute = data_type(op.compute);
    switch (op.kind) {
      case OpKind::kMatmul: {
        BackendDescriptor& desc = own(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what + " (matmul)");
        desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
        desc.finalize();
        BackendDescriptor& o = own(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
        o.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensor(op.inputs.at(0)));
        o.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensor(op.inputs.at(1)));
        o.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensor(op.output));
        o.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc);
        o.finalize();
        operations.push_back(o.get());
        return;
      }
      case OpKind::kPointwise: {
        BackendDescriptor& desc = own(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what + " (pointwise)");
        const cudnnPointwiseMode_t mode = pointwise_mode(op.pointwise);
        desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        desc.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
        if (op.pointwise == PointwiseMode::kGenIndex) {
          desc.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &op.axis);
        }
        desc.finalize();
        BackendDescriptor& o = own(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
        o.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc);
        o.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensor(op.inputs.at(0)));
        if (op.inputs.size() >= 2)
          o.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensor(op.inputs[1]));
        o.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensor(op.output));
        if (op.inputs.size() >= 3)
          o.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensor(op.inputs[2]));
        const float one = 1.0f;
        o.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
        o.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
        o.finalize();
        operations.push_back(o.get());
        return;
      }
      case OpKind::kReduction: {
        BackendDescriptor& desc = own(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what + " (reduction)");
        const cudnnReduceTensorOp_t reduce =
            op.reduce == sdpa::ReduceMode::kMax ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD;
        desc.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
        desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
#if CUDNN_VERSION >= 91100
        if (cudnn().get_version() >= 91100) {  // as the front end: not asked to be deterministic
          const bool deterministic = false;
          desc.set(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &deterministic);
        }
#endif
        desc.finalize();
        BackendDescriptor& o = own(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
        o.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc);
        o.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensor(op.inputs.at(0)));
        o.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensor(op.output));
        o.finalize();
        operations.push_back(o.get());
        return;
      }
      case OpKind::kReshape: {
        BackendDescriptor& o = own(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
        o.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensor(op.inputs.at(0)));
        o.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensor(op.output));
        o.finalize();
        operations.push_back(o.get());
        return;
      }
    }
  }

  // Every descriptor anew (no operation is shared by two operation graphs), the graph naming
  // `handle` when there is one.
  void build(cudnnHandle_t handle) {
    op_graph.reset();
    operations.clear();
    owned.clear();
    tensors.clear();
    scalars.assign(graph.tensors.size(), 0.0f);
    for (const sdpa::Tensor& t : graph.tensors) {
      build_tensor(t);
      if (t.by_value) scalars[static_cast<size_t>(t.uid - 1)] = t.value;
    }
    for (const sdpa::Op& op : graph.ops) build_op(op);
    op_graph = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                                   "the operation graph");
    op_graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                  static_cast<int64_t>(operations.size()), operations.data());
    if (handle != nullptr) op_graph->set(kOperationGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle);
    op_graph->finalize();
  }
};

CudnnGraph::CudnnGraph(sdpa::Graph graph) : impl_(std::make_unique<Impl>()) {
  impl_->graph = std::move(graph);
  impl_->build(nullptr);
}

CudnnGraph::~CudnnGraph() = default;

const sdpa::Graph& CudnnGraph::graph() const {
  return impl_->graph;
}
bool CudnnGraph::planned() const {
  return impl_->plan != nullptr;
}
int64_t CudnnGraph::workspace_bytes() const {
  return impl_->workspace;
}

void CudnnGraph::plan(cudnnHandle_t handle) {
  Impl& m = *impl_;
  m.plan.reset();
  m.configs.clear();
  m.build(handle);  // anew, the graph naming the handle as llm.c's does
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  cudnnBackendDescriptor_t graph = m.op_graph->get();
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heuristics.finalize();
  int64_t count = 0;
  cudnn_check(cudnn().get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              "counting the engine configurations");
  if (count <= 0) {
    throw std::runtime_error("cuDNN: no engine takes the attention graph" + cudnn_last_error());
  }
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    m.configs.push_back(std::make_unique<BackendDescriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                                            "engine configuration"));
    raw.push_back(m.configs.back()->get());
  }
  int64_t got = 0;
  cudnn_check(cudnn().get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
              "reading the engine configurations");
  std::string refusals;
  for (int64_t i = 0; i < got; ++i) {
    auto plan = std::make_unique<BackendDescriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                    "execution plan " + std::to_string(i));
    try {
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *m.configs[static_cast<size_t>(i)]);
      plan->finalize();
    } catch (const std::runtime_error& e) {
      refusals += std::string("\n  ") + e.what();
      continue;
    }
    int64_t workspace = 0, n = 0;
    cudnn_check(cudnn().get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                      CUDNN_TYPE_INT64, 1, &n, &workspace),
                "reading the plan's workspace size");
    m.plan = std::move(plan);
    m.workspace = workspace;
    return;
  }
  throw std::runtime_error("cuDNN: none of " + std::to_string(got) +
                           " engine configurations plans the attention graph:" + refusals);
}

void CudnnGraph::execute(cudnnHandle_t handle, const std::map<Role, const void*>& bound,
                         void* workspace) const {
  const Impl& m = *impl_;
  if (m.plan == nullptr) throw std::logic_error("CudnnGraph::execute before plan()");
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const sdpa::Tensor& t : m.graph.tensors) {
    if (t.is_virtual) continue;
    uids.push_back(t.uid);
    if (t.by_value) {
      pointers.push_back(const_cast<float*>(&m.scalars[static_cast<size_t>(t.uid - 1)]));
      continue;
    }
    const auto it = bound.find(t.role);
    if (it == bound.end() || it->second == nullptr) {
      throw std::invalid_argument("CudnnGraph::execute: no memory for " + t.name);
    }
    pointers.push_back(const_cast<void*>(it->second));
  }
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(pointers.size()), pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  cudnn_check(cudnn().execute(handle, m.plan->get(), pack.get()), "executing the attention");
}

int cudnn_attention_mode() {
  // 1 by default since the sitting of 2026-11-30 measured it (cudnn_sdpa.h).
  return gpu_switch_value(kCudnnAttentionSwitch);
}

bool cudnn_attention_asked() {
  const char* v = std::getenv("RM_CUDNN_ATTENTION");
  return v != nullptr && *v != '\0';
}

CudnnAttention::CudnnAttention(cudaStream_t stream, bool deterministic, bool asked,
                               std::FILE* notes)
    : stream_(stream),
      deterministic_(deterministic),
      notes_(notes),
      refusals_(asked ? stderr : notes) {
  if (cudnn().get_version() < kOldestCudnn) {
    throw std::runtime_error(cudnn().path + " is cuDNN " + std::to_string(cudnn().get_version()) +
                             ", older than the " + std::to_string(kOldestCudnn) +
                             " the attention graphs are written for");
  }
  cudnn_check(cudnn().create(&handle_), "creating a handle");
  const cudnnStatus_t s = cudnn().set_stream(handle_, stream);
  if (s != CUDNN_STATUS_SUCCESS) {
    cudnn().destroy(handle_);
    cudnn_fail(s, "setting the handle's stream");
  }
}

CudnnAttention::~CudnnAttention() {
  // The stream may still use the workspace: wait for it first, whoever owns this (cudaFree
  // synchronises too, but that is not a contract to lean on).
  if (workspace_ != nullptr || !retired_.empty()) cudaStreamSynchronize(stream_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  for (void* w : retired_) cudaFree(w);
  plans_.clear();
  if (handle_ != nullptr) cudnn().destroy(handle_);
}

namespace {
size_t cudnn_align256(size_t n) {
  return (n + 255) / 256 * 256;
}
}  // namespace

CudnnAttention::Planned& CudnnAttention::planned(int B, int Tn, int C, int H) {
  const auto key = std::make_tuple(B, Tn, C, H);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Planned p;
  p.forward = std::make_unique<CudnnGraph>(sdpa::sdpa_forward_graph(B, Tn, C, H));
  p.backward = std::make_unique<CudnnGraph>(sdpa::sdpa_backward_graph(B, Tn, C, H, deterministic_));
  p.forward->plan(handle_);
  p.backward->plan(handle_);
  p.dq_accum_offset = cudnn_align256(
      static_cast<size_t>(std::max(p.forward->workspace_bytes(), p.backward->workspace_bytes())));
  p.dq_accum_bytes = sizeof(float) * sdpa::sdpa_dq_accum_floats(B, Tn, C, H, deterministic_);
  const size_t need = p.dq_accum_offset + p.dq_accum_bytes;
  if (need > workspace_bytes_) {
    void* grown = nullptr;
    const cudaError_t e = cudaMalloc(&grown, need);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("cuDNN attention: no " + std::to_string(need) +
                               " bytes of workspace on the GPU: " + cudaGetErrorString(e));
    }
    // The smaller one stays allocated until the destructor: a recorded step graph
    // (worker/step_graph.h) may still name it.
    if (workspace_ != nullptr) retired_.push_back(workspace_);
    workspace_ = grown;
    workspace_bytes_ = need;
  }
  return plans_.emplace(key, std::move(p)).first->second;
}

void CudnnAttention::refuse(int B, int Tn, int C, int H, const std::string& why) {
  (void)cudaGetLastError();  // a refused plan may leave a launch error the next check would see
  std::fprintf(refusals_,
               "ringmaster: cuDNN's attention refused B=%d Tn=%d C=%d H=%d (%s); that shape runs "
               "the flash kernels\n",
               B, Tn, C, H, why.c_str());
  std::fflush(refusals_);
  takes_[std::make_tuple(B, Tn, C, H)] = false;
  // Its plan, if it was made (refused at its first execution), is never run: it would only
  // count against kMaxShapes.
  plans_.erase(std::make_tuple(B, Tn, C, H));
}

bool CudnnAttention::takes(int B, int Tn, int C, int H) {
  const auto key = std::make_tuple(B, Tn, C, H);
  const auto known = takes_.find(key);
  if (known != takes_.end()) return known->second;
  if (!sdpa::sdpa_shape_supported(B, Tn, C, H)) return takes_[key] = false;
  if (plans_.size() >= kMaxShapes) {
    if (!said_full_) {
      std::fprintf(refusals_,
                   "ringmaster: cuDNN's attention is planned for %zu shapes already; B=%d Tn=%d "
                   "C=%d H=%d and any further shape run the flash kernels\n",
                   kMaxShapes, B, Tn, C, H);
      std::fflush(refusals_);
      said_full_ = true;
    }
    return takes_[key] = false;
  }
  try {
    planned(B, Tn, C, H);
  } catch (const std::runtime_error& e) {
    refuse(B, Tn, C, H, e.what());
    return false;
  }
  std::fprintf(notes_,
               "ringmaster: cuDNN's attention planned for B=%d Tn=%d C=%d H=%d, workspace %.1f "
               "MiB\n",
               B, Tn, C, H, static_cast<double>(workspace_bytes_) / (1 << 20));
  std::fflush(notes_);
  return takes_[key] = true;
}

bool CudnnAttention::forward(bf16* out, float* stats, const bf16* qkv, int B, int Tn, int C,
                             int H) {
  const Planned& p = planned(B, Tn, C, H);
  const sdpa::SdpaOffsets off = sdpa::sdpa_offsets(C);
  const auto key = std::make_tuple(B, Tn, C, H);
  try {
    p.forward->execute(handle_,
                       {{Role::kQ, qkv},
                        {Role::kK, qkv + off.k},
                        {Role::kV, qkv + off.v},
                        {Role::kO, out},
                        {Role::kStats, stats}},
                       workspace_);
  } catch (const std::runtime_error& e) {
    if (ran_.count(key) != 0) throw;
    refuse(B, Tn, C, H, e.what());
    return false;
  }
  ran_.insert(key);
  return true;
}

void CudnnAttention::backward(bf16* dqkv, float* softmax_sum, const bf16* dout, const bf16* qkv,
                              const float* stats, const bf16* out, int B, int Tn, int C, int H) {
  const Planned& p = planned(B, Tn, C, H);
  const sdpa::SdpaOffsets off = sdpa::sdpa_offsets(C);
  std::map<Role, const void*> bound = {{Role::kQ, qkv},           {Role::kK, qkv + off.k},
                                       {Role::kV, qkv + off.v},   {Role::kO, out},
                                       {Role::kDO, dout},         {Role::kStats, stats},
                                       {Role::kDQ, dqkv},         {Role::kDK, dqkv + off.k},
                                       {Role::kDV, dqkv + off.v}, {Role::kSoftmaxSum, softmax_sum}};
  if (!deterministic_) {
    // cuDNN adds each tile's dQ into the accumulator: it starts at zero every time, as the
    // front end clears it before each execution (a memset node when a step graph records it).
    // Left as the last backward left it, dQ would carry that backward's in (mode 2 only).
    void* accum = static_cast<char*>(workspace_) + p.dq_accum_offset;
    RM_CUDA_CHECK(cudaMemsetAsync(accum, 0, p.dq_accum_bytes, stream_), kThrow);
    bound[Role::kDQAccum] = accum;
  }
  p.backward->execute(handle_, bound, workspace_);
}

}  // namespace rm::cuda
