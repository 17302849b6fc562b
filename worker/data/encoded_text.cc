#include "worker/data/encoded_text.h"

#include <string_view>

#include "worker/data/data_error.h"
#include "worker/data/file_glob.h"
#include "worker/data/mapped_file.h"

namespace rm {

std::vector<uint16_t> encode_to_uint16(const std::string& path, std::string_view text,
                                       BpeTokenizer& tokenizer) {
  if (tokenizer.vocab_size() > 65536) {
    throw DataError(tokenizer.directory(),
                    "a vocabulary of " + std::to_string(tokenizer.vocab_size()) +
                        " tokens: token ids are stored as uint16 (at most 65536), as in llm.c's "
                        "shards; " +
                        path + " cannot be encoded with it");
  }
  std::vector<int32_t> ids;
  try {
    tokenizer.encode_into(text, ids);
  } catch (const DataError& e) {
    throw DataError(path, e.what());
  }
  return std::vector<uint16_t>(ids.begin(), ids.end());
}

EncodedText encode_text_file(const std::string& path, BpeTokenizer& tokenizer) {
  const MappedFile file = MappedFile::open(path);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  return {path,
          std::make_shared<const std::vector<uint16_t>>(encode_to_uint16(path, text, tokenizer))};
}

std::vector<EncodedText> encode_text_globs(const std::vector<std::string>& globs,
                                           BpeTokenizer& tokenizer) {
  std::vector<EncodedText> out;
  for (const std::string& path : expand_globs(globs)) {
    out.push_back(encode_text_file(path, tokenizer));
  }
  return out;
}

}  // namespace rm
