// A run's starting weights taken from another model (`model.init_from`): fine-tuning a trained
// run, or GPT-2's published weights, instead of the seed's random ones. Only the weights: the
// Adam moments, the step, the learning-rate schedule and the data order start afresh, as after
// nanoGPT's init_from or a DeepSpeed load without its optimizer states. Read at a run's first
// start only: a run that resumes (its own disk or in-memory checkpoint) never reads them again,
// so a requeued fine-tune goes on from where it stopped, not from the weights it began with.
//
// The source, by what PATH is:
//   a checkpoint directory (holds manifest.json): its "params" buffer, written by any number of
//     ranks in any shard mode; each piece's checksum is checked as it is read;
//   a run directory (holds checkpoints/): its newest committed checkpoint, as above, which must
//     verify (a damaged newest one is refused, not passed over);
//   a symbolic link (RUN/checkpoints/best, checkpoint.keep_best): where it points now;
//   a .safetensors file: what `ringmaster ckpt export` writes (model/model_export.h) -- for gpt,
//     Hugging Face GPT2LMHeadModel's names and [in, out] Conv1D matrices (transposed here), also
//     with GPT2Model's names (no "transformer." prefix), so GPT-2's published model.safetensors
//     loads; F32 tensors only;
//   an llm.c model file (gpt2_124M.bin: checkpoint/llmc_model_file.h), fp32 or bf16; the
//     padding rows of its vocabulary are not read.
// Matching: every tensor of the job's model must be in the source under its name with its shape,
// with one exception: `wpe` (gpt's position embedding) may have more rows than model.seq_len,
// and its first seq_len rows are taken (GPT-2, trained at 1024 tokens, fine-tuned at fewer, as
// nanoGPT's crop_block_size does). Where the source says its model's number of attention heads
// (a checkpoint's job, the gpt2_config an export carries, an llm.c header) it must be
// model.heads: the shapes do not show it. A source tensor the model has no place for is an error
// (the source would be another model), except what holds no weights -- GPT-2's attn.bias and
// attn.masked_bias mask buffers -- and lm_head.weight, which must equal wte, as Ringmaster's GPT
// ties the two (an untied head is refused when it is read).
//
// What a run directory or a link resolves to can change while a job starts, where the source
// run is still training: source() names what was opened, so that the ranks of a job read one
// source whatever they find later (the trainer's rank 0 opens the source and gives the others
// its source() to open as `pinned`). And the source run's retention may remove that checkpoint
// (checkpoint.keep: 1 removes it at its next save): a checkpoint source is pinned
// (checkpoint/checkpoint_pin.h) from when it is chosen for as long as this object lives, and the
// trainer's ranks keep theirs until every rank holds its own. One removed between being chosen
// and being pinned is chosen again (a run directory or a link: the run has a newer one by then).
//
// Errors are InitialWeightsError, an InputError (exit 2): "model.init_from: PATH: what is wrong".
// Not thread-safe; blocking file I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/input_error.h"
#include "checkpoint/checkpoint_pin.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/llmc_model_file.h"
#include "checkpoint/safetensors_writer.h"
#include "configs/job_config.h"
#include "io/posix_io.h"
#include "model/param_layout.h"

namespace rm {

class InitialWeightsError : public InputError {
 public:
  using InputError::InputError;
};

class InitialWeights {
 public:
  // Opens `path` and matches it to `layout` (which must outlive this), the parameters of a
  // model of `config`. For a checkpoint, `level` says how much is checked now: kStructure (the
  // files are there with their sizes) or kChecksums (every byte read and checked: once per job,
  // before any rank starts).
  // `pinned`, when not empty, is another InitialWeights' source() for this path: opened as it
  // is, instead of resolving `path` again; messages still name `path`.
  InitialWeights(const std::string& path, const ModelConfig& config, const ParamLayout& layout,
                 VerifyLevel level, const std::string& pinned = "");
  ~InitialWeights();
  InitialWeights(const InitialWeights&) = delete;
  InitialWeights& operator=(const InitialWeights&) = delete;

  // Elements [begin, end) of the model's flat parameter buffer (layout order) into dst. Reads
  // only the source tensors that overlap the range (a whole tensor where it must be transposed,
  // cropped or compared).
  void read(size_t begin, size_t end, float* dst);

  // What was found, for the log: "checkpoint DIR (step 200 of 4 ranks, shard full), 16 tensors",
  // "safetensors, GPT-2 layout, 148 tensors (wpe: the first 256 of its 1024 rows)", "llm.c
  // model file, version 3 (fp32), 148 tensors".
  const std::string& description() const { return description_; }
  // The same for events.jsonl: {"from", "kind", "step" (checkpoints), "tensors"}.
  nlohmann::json event_fields() const;
  // What was opened: `path`, or the checkpoint directory a run directory or a link resolved to.
  const std::string& source() const { return source_; }
  // A safetensors or llm.c file's size and a hash of its ends ("" for a checkpoint, whose every
  // piece is checksummed): equal on the ranks that opened one file, on any host, so that the
  // trainer can refuse ranks that found different files at one path.
  std::string file_identity() const;
  // For a file: fail()s if it was replaced or rewritten since it was opened (on this host; a
  // checkpoint's checksums catch that for a checkpoint). Call once everything is read.
  void check_unchanged() const;

 private:
  struct Match {
    const TensorSpec* target;
    std::string source;                 // the tensor's name in the source
    std::vector<int64_t> source_shape;  // as the source stores it
    uint64_t source_offset = 0;  // elements: in a checkpoint's "params" buffer, an llm.c file
    bool transpose = false;      // the source holds it [in, out] (GPT-2's Conv1D)
  };
  [[noreturn]] void fail(const std::string& what) const;
  // The checkpoint or file `path_` stands for now: a link's target, a run directory's newest
  // committed checkpoint; anything else as it is.
  std::string resolve() const;
  // An error's message without a leading "PATH: " when PATH is the source's (fail adds it).
  std::string without_path(const std::string& what) const;
  void open_checkpoint(const std::string& dir, const ModelConfig& config, VerifyLevel level);
  void open_safetensors(const ModelConfig& config);
  void open_llmc(const ModelConfig& config);
  // A source that says how many attention heads its GPT has: they must be the job's.
  void check_heads(const ModelConfig& config, int64_t heads) const;
  // Matches every layout tensor to a source tensor of `shapes` (name -> shape), under the first
  // of the names `rename` gives it that the source has. gpt2_file: a GPT-2 file's Conv1D
  // matrices are transposed, and its mask buffers and lm_head.weight have no place to take.
  template <typename Shapes, typename Rename>
  void match(const ModelConfig& config, const Shapes& shapes, Rename rename, bool gpt2_file);
  // A source tensor's values in the model's layout (transposed, cropped) as a whole.
  std::vector<float> whole(const Match& m);
  // fail()s naming the tensor when any of `count` values read of it, from its element `first`
  // (in the model's layout), is NaN or an infinity: a source saved from a diverged run.
  void check_finite(const Match& m, size_t first, const float* values, size_t count) const;

  std::string path_;    // as the job gives it
  std::string source_;  // the file or checkpoint directory read
  std::optional<io::FileVersion> file_version_;  // a file source's, when it was opened
  std::string file_identity_;                    // a file source's file_identity()
  const ParamLayout& layout_;
  std::vector<Match> matches_;  // in layout order
  std::string kind_;            // "checkpoint", "safetensors" or "llm.c"
  int64_t step_ = -1;           // checkpoints
  std::string description_;
  std::string crop_note_;  // "wpe: the first 256 of its 1024 rows", when cropped
  std::unique_ptr<CheckpointReader> checkpoint_;
  std::optional<CheckpointPin> pin_;  // on a checkpoint source, while this lives
  SafetensorsHeader safetensors_;
  std::string tied_head_;       // safetensors: the name of an lm_head.weight to compare with wte
  std::unique_ptr<LlmcModelFile> llmc_;  // an llm.c file's header; null for other sources
  // safetensors: the last tensor read whole (and the tied head compared with it), kept for the
  // next read() of a range in it -- a GPU's initial weights come in 64 MiB pieces, and wte
  // (154 MB in GPT-2) would otherwise be read, converted and transposed for each.
  const Match* cached_ = nullptr;
  std::vector<float> cached_values_, cached_head_;
};

// The job's initial weights checked, nothing read beyond `level`: `check_job` and the commands
// that check a job before it runs. Returns what was found (InitialWeights::description), or ""
// when model.init_from is empty. Also refuses a source inside the job's own run directory (that
// run resumes; it does not start from itself).
std::string check_initial_weights(const JobConfig& job, VerifyLevel level);

}  // namespace rm
