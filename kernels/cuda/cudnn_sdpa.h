// The attention graphs of sdpa_graph.h run through cuDNN's graph API (the C backend, opened by
// cudnn_library.h): descriptors, execution plans, and the bf16 attention's forward and backward.
//
//  - CudnnGraph builds and finalizes every tensor and operation descriptor and the operation
//    graph in its constructor. That needs the cuDNN library but no GPU, so a wrong attribute, type
//    or count fails on any machine with cuDNN (cudnn_sdpa_test.cc). plan() (engine heuristics,
//    mode A, then the first configuration whose execution plan finalizes) needs the GPU.
//  - CudnnAttention keeps one planned forward and backward per shape, planned together on first
//    sight, so a shape either runs both through cuDNN or throws before anything is queued (the
//    two paths' saved statistics differ: sdpa_graph.h). Its workspace is allocated then; one
//    outgrown by a later shape is kept until the end (a recorded step graph may name it).
//
// Switch: RM_CUDNN_ATTENTION (cudnn_attention_mode(); on by default since the sitting of
// 2026-11-30: GPT-2 124M bf16 on one H200, 32.5 -> 30.3 ms a step at 16 sequences, 10.4 -> 10.3
// at 4). cuda_layers.cc takes cuDNN where it is on and the shape is one the flash kernels take too
// (so the buffers planned are the same), and falls back to the flash kernels, saying why once,
// where cuDNN refuses the graph.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda/sdpa_graph.h"

namespace rm::cuda {

class CudnnGraph {
 public:
  // std::runtime_error naming the operation or tensor cuDNN refused, with its message.
  explicit CudnnGraph(sdpa::Graph graph);
  ~CudnnGraph();
  CudnnGraph(const CudnnGraph&) = delete;
  CudnnGraph& operator=(const CudnnGraph&) = delete;

  const sdpa::Graph& graph() const;
  // std::runtime_error listing each configuration's refusal when none plans.
  void plan(cudnnHandle_t handle);
  bool planned() const;
  int64_t workspace_bytes() const;  // after plan()
  // Every bound tensor of the graph must be given (std::invalid_argument otherwise). Queued on
  // the handle's stream.
  void execute(cudnnHandle_t handle, const std::map<sdpa::Role, const void*>& bound,
               void* workspace) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// RM_CUDNN_ATTENTION: "0": off (the flash kernels); unset, empty or "1": cuDNN, with the backward
// whose dQ is a plain product (deterministic: reruns bit-identical, as the rest of the backend; the
// graph llm.c + cuDNN runs, whose cudnn_att.cpp asks the front end for the deterministic
// algorithm); "2": cuDNN with dQ accumulated from several blocks (the front end's default; last
// bits vary between runs). Anything else: std::invalid_argument naming the variable (refused
// before a job starts: kernels/gpu_switches.h).
int cudnn_attention_mode();

// Whether RM_CUDNN_ATTENTION was given a value (not unset or empty). Who asked hears on stderr
// why cuDNN is not used; by default that is said with the other notes (ComputeOptions::notes:
// stdout in a rank, which is rank 0's console and every rank's log, observe/rank_log.h -- not a
// line from every rank of a large job on the console).
bool cudnn_attention_asked();

class CudnnAttention {
 public:
  // asked: cudnn_attention_asked() (refusals go to stderr if so, else to notes); notes: where
  // what runs is said (ComputeOptions::notes).
  CudnnAttention(cudaStream_t stream, bool deterministic, bool asked = true,
                 std::FILE* notes = stdout);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // The constructor throws std::runtime_error for a cuDNN older than 9.16 (see cudnn_sdpa.cc).

  // Whether the shape runs through cuDNN: a shape sdpa_shape_supported() takes whose two graphs
  // cuDNN planned (at the first call for the shape, with their workspace). A shape cuDNN refused
  // is said once on stderr and answered false from then on, so a forward and its backward
  // always take the same path. At most kMaxShapes shapes are planned in a process (training
  // and evaluation use one or two): text generation grows its context a token at a time, and
  // planning each length (two runtime compilations) would cost far more than it saves; the
  // shapes past them run the flash kernels, said once. A shape planned is said on `notes`.
  static constexpr size_t kMaxShapes = 4;
  bool takes(int B, int Tn, int C, int H);
  // Says why (stderr if asked, else notes) and answers takes() false for the shape from now on.
  void refuse(int B, int Tn, int C, int H, const std::string& why);
  // stats: float [B,H,Tn]; out and qkv as flash_attention_forward's. False when cuDNN failed the
  // shape's first execution: the shape is refused (nothing of its backward has run, and the
  // caller's flash forward rewrites the statistics); a later failure throws std::runtime_error.
  bool forward(bf16* out, float* stats, const bf16* qkv, int B, int Tn, int C, int H);
  // dqkv OVERWRITTEN; softmax_sum: float [B,H,Tn] scratch.
  void backward(bf16* dqkv, float* softmax_sum, const bf16* dout, const bf16* qkv,
                const float* stats, const bf16* out, int B, int Tn, int C, int H);

 private:
  struct Planned {
    std::unique_ptr<CudnnGraph> forward, backward;
    size_t dq_accum_offset = 0;  // bytes into the workspace, past what the plans use
    size_t dq_accum_bytes = 0;   // 0: the deterministic backward, which has none
  };
  // Builds and plans both graphs for the shape unless done before; std::runtime_error (nothing
  // queued) if cuDNN refuses either or the GPU lacks the memory for their workspace.
  Planned& planned(int B, int Tn, int C, int H);

  cudnnHandle_t handle_ = nullptr;
  cudaStream_t stream_;  // the handle's: where dQ's accumulator is cleared
  bool deterministic_;
  std::FILE* notes_;     // what runs
  std::FILE* refusals_;  // stderr if RM_CUDNN_ATTENTION asked for cuDNN, else notes_
  std::map<std::tuple<int, int, int, int>, Planned> plans_;
  bool said_full_ = false;  // the shapes past kMaxShapes were said to run the flash kernels
  std::map<std::tuple<int, int, int, int>, bool> takes_;
  std::set<std::tuple<int, int, int, int>> ran_;  // shapes whose forward ran through cuDNN
  void* workspace_ = nullptr;  // the largest any plan needs, plus dQ's accumulator
  size_t workspace_bytes_ = 0;
  std::vector<void*> retired_;  // outgrown workspaces, freed by the destructor
};

}  // namespace rm::cuda
