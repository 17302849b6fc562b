// The choice-valued job keys as types: one enum class per key (or per kind of choice), the words
// a job file spells them with, and the facts derived from a choice, stated once here.
//
// The schema (configs/schema.cc) binds each key to its enum; the loader parses the word once,
// where it checks it is one of the choices, and the resolved job writes it back with
// choice_name(). Code outside configs/ compares enum values, never the words.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rm {

enum class ModelType { kGpt, kMlp };                            // model.type
enum class DataFormat { kText, kTokens };                       // data.format
enum class OptimizerName { kAdamW };                            // optimizer.name
enum class LrScheduleKind { kCosine, kLinear, kConstant, kWsd };  // optimizer.schedule
enum class Backend { kAuto, kCpu, kCuda };                      // parallel.backend
enum class ShardMode { kNone, kOptimizer, kGradients, kFull };  // parallel.shard
// The element type of parameters and activations (parallel.precision) or of the gradients on the
// wire (parallel.grad_reduce).
enum class Precision { kFp32, kBf16 };
enum class OnSaveError { kStop, kContinue };                    // checkpoint.on_error
enum class OnNan { kSkip, kRollback, kAbort };                  // resilience.on_nan

// The words of each choice, in the order of its enumerators: words_of(E{})[int(e)].
constexpr std::array<std::string_view, 2> words_of(ModelType) { return {"gpt", "mlp"}; }
constexpr std::array<std::string_view, 2> words_of(DataFormat) { return {"text", "tokens"}; }
constexpr std::array<std::string_view, 1> words_of(OptimizerName) { return {"adamw"}; }
constexpr std::array<std::string_view, 4> words_of(LrScheduleKind) {
  return {"cosine", "linear", "constant", "wsd"};
}
constexpr std::array<std::string_view, 3> words_of(Backend) { return {"auto", "cpu", "cuda"}; }
constexpr std::array<std::string_view, 4> words_of(ShardMode) {
  return {"none", "optimizer", "gradients", "full"};
}
constexpr std::array<std::string_view, 2> words_of(Precision) { return {"fp32", "bf16"}; }
constexpr std::array<std::string_view, 2> words_of(OnSaveError) { return {"stop", "continue"}; }
constexpr std::array<std::string_view, 3> words_of(OnNan) {
  return {"skip", "rollback", "abort"};
}

// The same words with static storage, for whoever keeps a pointer to them (ChoiceRef).
template <typename E>
inline constexpr auto kChoiceWords = words_of(E{});

// The word a job file writes for `choice` ("full" for ShardMode::kFull); NUL-terminated (the
// words are string literals), so it goes to printf as it is.
template <typename E>
constexpr const char* choice_name(E choice) {
  return kChoiceWords<E>[static_cast<size_t>(choice)].data();
}

// Sets *out to the choice spelled `word` and returns true; false (and *out untouched) when
// `word` is none of them. Exact and case-sensitive, as the schema checks.
template <typename E>
bool parse_choice(std::string_view word, E* out) {
  const auto& words = kChoiceWords<E>;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == word) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

// The choice spelled `word`; throws std::invalid_argument listing the words when there is none
// (for words that did not come through the schema: a test's parameter, a bench flag).
template <typename E>
E choice_of(std::string_view word) {
  E e{};
  if (parse_choice(word, &e)) return e;
  std::string words;
  for (std::string_view w : kChoiceWords<E>) {
    words += (words.empty() ? "" : "|") + std::string(w);
  }
  throw std::invalid_argument("'" + std::string(word) + "' is not one of " + words);
}

// Every word of choice E, in enumerator order (the schema's allowed values).
template <typename E>
std::vector<std::string_view> choice_words() {
  const auto& words = kChoiceWords<E>;
  return std::vector<std::string_view>(words.begin(), words.end());
}

// Every value of choice E, in enumerator order (e.g. each shard mode, for the planner).
template <typename E>
std::vector<E> every_choice() {
  std::vector<E> all;
  for (size_t i = 0; i < kChoiceWords<E>.size(); ++i) all.push_back(static_cast<E>(i));
  return all;
}

// ---- What a shard mode keeps whole on every rank (docs/DESIGN.md, ZeRO) ---------------------
// none (replicated) and optimizer (ZeRO-1): all parameters and all gradients, reduced in buckets;
// gradients (ZeRO-2): all parameters, a shard of the gradients, reduced unit by unit;
// full (ZeRO-3): a shard of both, parameters gathered unit by unit. Every mode but none shards
// the AdamW moments.
constexpr bool keeps_all_params(ShardMode m) { return m != ShardMode::kFull; }
constexpr bool keeps_all_grads(ShardMode m) {
  return m == ShardMode::kNone || m == ShardMode::kOptimizer;
}
constexpr bool shards_optimizer_state(ShardMode m) { return m != ShardMode::kNone; }

// Bytes of one element of a precision: 4 (fp32) or 2 (bf16).
constexpr int bytes_per_element(Precision p) { return p == Precision::kBf16 ? 2 : 4; }

}  // namespace rm
