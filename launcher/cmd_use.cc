// Using a trained model: `ringmaster sample PATH` and `ringmaster eval PATH --data F`, where PATH
// is a run directory or a checkpoint (launcher/loaded_run.h). Text passes through the job's
// data.tokenizer (or --tokenizer DIR) where there is one.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "base/error_report.h"
#include "base/exit_codes.h"
#include "launcher/cli_checks.h"
#include "launcher/cmd_common.h"
#include "launcher/loaded_run.h"
#include "launcher/model_placement.h"
#include "model/generate.h"
#include "model/resident_params.h"
#include "worker/data/choice_file.h"
#include "worker/data/data_error.h"
#include "worker/data/encoded_text.h"
#include "worker/data/token_shard.h"
#include "worker/evaluate.h"
#include "worker/mpi_bootstrap.h"
#include "worker/training_data.h"

namespace rm {
namespace {

// The first token of a sample from a model that takes ids, when no --prompt was given: GPT-2's
// <|endoftext|> for its vocabulary (as llm.c starts its samples), padded or not; else 0. (The
// default prompt, a newline, is text, and no id.)
constexpr int kGpt2Vocab = 50257, kGpt2PaddedVocab = 50304, kGpt2EndOfText = 50256;
int default_start_id(int vocab) {
  return vocab == kGpt2Vocab || vocab == kGpt2PaddedVocab ? kGpt2EndOfText : 0;
}

// A prompt through the tokenizer where there is one; byte-level models take it as text, others
// as whitespace-separated token ids (a default id when none was given).
std::vector<int> encode_prompt(const std::string& prompt, bool given, int vocab,
                               BpeTokenizer* tokenizer) {
  std::vector<int> tokens;
  if (tokenizer == nullptr && vocab != 256 && !given) return {default_start_id(vocab)};
  if (tokenizer != nullptr) {
    tokens = tokenizer->encode(prompt);
  } else if (vocab == 256) {
    for (unsigned char c : prompt) tokens.push_back(c);
  } else {
    std::istringstream in(prompt);
    std::string word;
    while (in >> word) {
      char* end = nullptr;
      const long id = std::strtol(word.c_str(), &end, 10);
      if (*end != '\0' || id < 0 || id >= vocab) {
        throw std::invalid_argument("--prompt: '" + word + "' is not a token id below " +
                                    std::to_string(vocab) +
                                    " (models with a vocabulary other than bytes take ids)");
      }
      tokens.push_back(static_cast<int>(id));
    }
  }
  if (tokens.empty()) throw std::invalid_argument("--prompt: empty");
  return tokens;
}

// The tokenizer text goes through: --tokenizer, else the run's data.tokenizer; none = a byte a
// token (byte-level models) or token ids.
std::optional<BpeTokenizer> text_tokenizer(const std::string& flag, const LoadedRun& run) {
  if (!flag.empty()) return load_tokenizer_for(flag, run.model->vocab_size(), "--tokenizer");
  try {
    return load_job_tokenizer(run.job);
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) +
                    " (the run's job names it relative to the directory the run was started "
                    "in: run this from there, or give --tokenizer DIR)");
  }
}

// On stderr, so that stdout stays the output alone (a sample can be piped).
void describe_source(const LoadedRun& run, const ModelPlacement* placement) {
  const std::string on = placement != nullptr ? ", on " + placement->describe() : "";
  if (run.step >= 0) {
    std::fprintf(stderr, "ringmaster: using checkpoint %s (step %lld)%s\n", run.source.c_str(),
                 static_cast<long long>(run.step), on.c_str());
  } else {
    std::fprintf(stderr, "ringmaster: using %s%s\n", run.source.c_str(), on.c_str());
  }
}

// The model made where --backend and --precision say, once the run's job is read
// (model_placement.h); the placement keeps the compute the model runs on.
ModelMaker placed(const std::string& command, const std::string& backend,
                  const std::string& precision, ModelPlacement& placement) {
  return [command, backend, precision, &placement](const JobConfig& job, int max_batch) {
    placement = place_model(job, command, backend, precision);
    return placement.maker()(job, max_batch);
  };
}

}  // namespace

int cmd_sample(const SampleArgs& args) {
  return report_errors([&] {
    try {
      check_sampling_options(args.sampling);
    } catch (const std::invalid_argument& e) {
      print_error(std::string("sample: ") + e.what());
      return kExitBadInput;
    }
    ModelPlacement placement;
    LoadedRun run = load_trained_model(args.run_dir, 1,
                                       placed("sample", args.backend, args.precision, placement));
    configure_threads(run.job.parallel.threads_per_rank, 1);
    describe_source(run, &placement);
    std::optional<BpeTokenizer> tokenizer = text_tokenizer(args.tokenizer, run);
    std::vector<int> prompt;
    try {
      prompt = encode_prompt(args.prompt, args.prompt_given, run.model->vocab_size(),
                             tokenizer ? &*tokenizer : nullptr);
    } catch (const std::invalid_argument& e) {
      print_error(e.what());
      return kExitBadInput;
    }
    ResidentParams params(*run.model, run.params);
    const std::vector<int> out =
        generate(*run.model, params, prompt, args.tokens, args.sampling, args.seed);
    if (tokenizer || run.model->vocab_size() == 256) {
      std::string text(args.prompt);
      for (int t : out) {
        if (!tokenizer) {
          text.push_back(static_cast<char>(t));
          continue;
        }
        // A model's vocabulary may be larger than the tokenizer's (padded): such an id, which
        // training never asked for, is shown by number.
        const std::string& bytes = tokenizer->token_bytes(t);
        text += bytes.empty() ? "<|" + std::to_string(t) + "|>" : bytes;
      }
      std::printf("%s\n", text.c_str());
    } else {
      for (int t : out) std::printf("%d ", t);
      std::printf("\n");
    }
    return kExitOk;
  });
}

namespace {

// `eval --choices`: the accuracy on a multiple-choice file, one HellaSwag example (4
// completions) a forward pass: rows are planned for at most 4 seq_len windows, whatever the
// file holds.
int eval_choices(const EvalArgs& args) {
  constexpr size_t kMaxRows = 4;
  const std::vector<ChoiceExample> examples = read_choice_file(args.choices);
  size_t rows = 1;
  for (const ChoiceExample& e : examples) rows = std::max(rows, e.completions.size());
  ModelPlacement placement;
  LoadedRun run = load_trained_model(args.run_dir, static_cast<int>(std::min(rows, kMaxRows)),
                                     placed("eval", args.backend, args.precision, placement));
  configure_threads(run.job.parallel.threads_per_rank, 1);
  describe_source(run, &placement);
  if (run.job.model.type != ModelType::kGpt) {
    print_error("eval --choices: " + run.source +
                ": the model is an mlp, which predicts one token a sample: multiple-choice "
                "scoring needs a gpt");
    return kExitBadInput;
  }
  check_choices_fit(args.choices, examples, run.model->vocab_size(), run.model->seq_len());
  ResidentParams params(*run.model, run.params);
  const ChoiceResult r =
      evaluate_choices(*run.model, params, examples, static_cast<size_t>(args.max_examples));
  std::printf("accuracy=%.4f correct=%lld examples=%lld\n", r.accuracy(),
              static_cast<long long>(r.correct), static_cast<long long>(r.examples));
  return kExitOk;
}

}  // namespace

int cmd_eval(const EvalArgs& args) {
  return report_errors([&] {
    if (args.data.empty() == args.choices.empty()) {
      print_error(
          "eval: give --data FILE (the mean loss per token) or --choices FILE (the "
          "accuracy on multiple-choice examples)");
      return kExitBadInput;
    }
    if (!args.choices.empty()) return eval_choices(args);
    ModelPlacement placement;
    LoadedRun run = load_trained_model(args.run_dir, 0,
                                       placed("eval", args.backend, args.precision, placement));
    configure_threads(run.job.parallel.threads_per_rank, 1);
    describe_source(run, &placement);
    std::optional<BpeTokenizer> tokenizer = text_tokenizer(args.tokenizer, run);
    const bool bytes_model =
        run.job.data.format == DataFormat::kText && run.job.data.tokenizer.empty();
    auto data = open_eval_file(args.data, run.model->seq_len(), run.model->vocab_size(),
                               tokenizer ? &*tokenizer : nullptr, bytes_model);
    const int per_window = run.model->targets_per_sample();
    // Whole windows only: --max-tokens is an upper bound, which one window must fit under.
    if (args.max_tokens > 0 && args.max_tokens < per_window) {
      print_error("eval: --max-tokens " + std::to_string(args.max_tokens) +
                  " is less than one window, which scores " + std::to_string(per_window) +
                  " tokens with this model (model.seq_len): give at least that, or 0 for all");
      return kExitBadInput;
    }
    const uint64_t max_windows =
        args.max_tokens > 0 ? static_cast<uint64_t>(args.max_tokens) / per_window : 0;
    ResidentParams params(*run.model, run.params);
    const EvalResult r = evaluate_windows(*run.model, params, *data, max_windows);
    std::printf("loss=%.6f tokens=%lld\n", r.mean_loss, static_cast<long long>(r.targets));
    return kExitOk;
  });
}

int cmd_tokenize(const TokenizeArgs& args) {
  return report_errors([&] {
    cli::refuse_overwriting_input("-o", args.output, args.text);
    // No model to fit: the encoding refuses a vocabulary that uint16 ids cannot hold.
    BpeTokenizer tokenizer = load_tokenizer_for(args.tokenizer, 0, "--tokenizer");
    const EncodedText encoded = encode_text_file(args.text, tokenizer);
    const std::vector<uint16_t>& tokens = *encoded.tokens;
    // Named by the input: the output's name alone ("refusing to write an empty token shard")
    // sent users looking at the wrong file.
    if (tokens.empty()) throw DataError(args.text, "empty: no tokens to write to " + args.output);
    write_token_shard(args.output, tokens);
    std::printf("%s: %zu tokens of %s\n", args.output.c_str(), tokens.size(), args.text.c_str());
    return kExitOk;
  });
}

}  // namespace rm
