#include "worker/data/encoded_text.h"

#include <filesystem>
#include <string_view>
#include <system_error>

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
  std::vector<uint16_t> ids;
  ids.reserve(text.size() / 4 + 16);
  try {
    tokenizer.encode_each(text, [&](const int32_t* piece, size_t count) {
      ids.insert(ids.end(), piece, piece + count);  // ids < vocab_size <= 65536
    });
  } catch (const DataError& e) {
    throw DataError(path, e.what());
  }
  if (ids.capacity() - ids.size() > ids.size() / 8) ids.shrink_to_fit();
  return ids;
}

double tokenized_text_bytes(const DataConfig& data) {
  if (data.tokenizer.empty() || data.format != DataFormat::kText) return 0;
  double bytes = 0;
  for (const std::vector<std::string>* globs : {&data.train, &data.val}) {
    if (globs->empty()) continue;
    try {
      for (const std::string& path : expand_globs(*globs)) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        if (!ec) bytes += static_cast<double>(size);
      }
    } catch (const DataError&) {
      // said when the data is opened
    }
  }
  return bytes;
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
