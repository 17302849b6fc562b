#include "observe/run_events.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <sys/stat.h>

#include "checkpoint/json_guard.h"
#include "io/posix_io.h"

namespace rm {

std::string utc_now_iso8601() {
  return utc_iso8601(std::chrono::system_clock::now());
}

std::string utc_iso8601(std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

void append_run_event(const std::string& run_dir, const std::string& event,
                      const nlohmann::json& fields) {
  nlohmann::json line = {{"time", utc_now_iso8601()}, {"event", event}};
  for (const auto& [k, v] : fields.items()) line[k] = v;
  const std::string path = run_dir + "/events.jsonl";
  try {
    // A path that is not UTF-8 (a run directory or --from named in Latin-1) is written with
    // U+FFFD in its place: strict dumping threw, and ended the run this event describes.
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    io::Fd fd = io::open_append(path);
    // A last line torn by a crash or a power cut (no newline) would swallow this event into
    // one line no reader can parse: end it first (readers skip the torn part alone).
    struct stat st {};
    if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
      char last = '\n';
      io::Fd in = io::open_read(path);
      io::pread_exact(in.get(), &last, 1, static_cast<uint64_t>(st.st_size - 1), path);
      if (last != '\n') text.insert(0, "\n");
    }
    io::write_all(fd.get(), text.data(), text.size(), path);  // one write(2): whole lines
  } catch (const std::exception& e) {
    // An event that cannot be recorded must not end the run it describes.
    std::fprintf(stderr, "ringmaster: cannot append the '%s' event: %s\n", event.c_str(), e.what());
  }
}

nlohmann::json parse_json_line(std::string_view line) {
  // Our lines nest three levels at most; a line's value count is bounded by its 1 MiB.
  if (!check_json_shape(line, 16, SIZE_MAX).empty())
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
}

std::vector<nlohmann::json> read_run_events(const std::string& run_dir) {
  return read_json_lines(run_dir + "/events.jsonl");
}

std::vector<nlohmann::json> read_json_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  for_each_line(path, [&](const std::string& line) {
    nlohmann::json j = parse_json_line(line);
    if (j.is_object()) out.push_back(std::move(j));
    return true;
  });
  return out;
}

void for_each_line(const std::string& path, const std::function<bool(const std::string&)>& visit) {
  constexpr size_t kBlock = size_t{64} << 10, kMaxLine = size_t{1} << 20;
  if (!io::exists(path)) return;
  const io::Fd fd = io::open_read(path);
  const uint64_t size = io::regular_file_size(fd.get(), path);
  std::string block, line;
  bool dropping = false;  // inside a line too long to keep: skip to its end
  for (uint64_t off = 0; off < size;) {
    block.resize(static_cast<size_t>(std::min<uint64_t>(kBlock, size - off)));
    io::pread_exact(fd.get(), block.data(), block.size(), off, path);
    off += block.size();
    size_t begin = 0;
    for (size_t nl; (nl = block.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      if (!dropping) {
        line.append(block, begin, nl - begin);
        if (!visit(line)) return;
      }
      line.clear();
      dropping = false;
    }
    if (!dropping) line.append(block, begin, std::string::npos);
    if (line.size() > kMaxLine) line.clear(), dropping = true;
  }
  if (!dropping && !line.empty()) visit(line);  // the last line, without its newline
}

void for_each_json_line_backwards(const std::string& path,
                                  const std::function<bool(const nlohmann::json&)>& visit) {
  constexpr size_t kBlock = size_t{64} << 10, kMaxLine = size_t{1} << 20;
  if (!io::exists(path)) return;
  const io::Fd fd = io::open_read(path);
  uint64_t off = io::regular_file_size(fd.get(), path);
  std::string carry;       // the start of the file's text not yet split: a line's first part
  bool drop_next = false;  // the next line found is the rest of one too long to keep
  // Visits the complete line text[begin, end); false: stop.
  const auto line = [&](const std::string& text, size_t begin, size_t end) {
    if (drop_next) {
      drop_next = false;
      return true;
    }
    if (end == begin) return true;
    const nlohmann::json j = parse_json_line(std::string_view(text).substr(begin, end - begin));
    return !j.is_object() || visit(j);
  };
  std::string text;
  while (off > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, off));
    off -= n;
    text.assign(n, '\0');
    io::pread_exact(fd.get(), text.data(), n, off, path);
    text += carry;
    size_t end = text.size();
    while (end > 0) {
      const size_t nl = text.rfind('\n', end - 1);
      if (nl == std::string::npos) break;
      if (!line(text, nl + 1, end)) return;
      end = nl;
    }
    carry.assign(text, 0, end);
    if (carry.size() > kMaxLine) {  // a line this long is not a metrics line: skip it
      carry.clear();
      drop_next = true;
    }
  }
  line(carry, 0, carry.size());
}

}  // namespace rm
