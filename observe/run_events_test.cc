// for_each_json_line_backwards: every line, last first, across block boundaries; torn and
// oversized lines skipped; stops when asked. for_each_line and read_json_lines: the same going
// forwards, and a FIFO refused at once.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "io/io_error.h"
#include "io/posix_io.h"
#include "observe/run_events.h"
#include "testing/temp_dir.h"

namespace rm {
namespace {

// Steps first..last, one metrics-like line each, padded so that lines straddle 64 KiB blocks.
std::string step_lines(int first, int last) {
  std::string text;
  for (int i = first; i <= last; ++i) {
    text +=
        "{\"step\": " + std::to_string(i) + ", \"pad\": \"" + std::string(i % 97, 'x') + "\"}\n";
  }
  return text;
}

std::vector<int> steps_backwards(const std::string& path, size_t stop_after = 0) {
  std::vector<int> steps;
  for_each_json_line_backwards(path, [&](const nlohmann::json& j) {
    steps.push_back(j.value("step", -1));
    return stop_after == 0 || steps.size() < stop_after;
  });
  return steps;
}

TEST(JsonLinesBackwards, EveryLineLastFirstAndATornLastLineSkipped) {
  TempDir dir;
  const std::string path =
      dir.write("m.jsonl", step_lines(1, 20000) + "not json\n" + "{\"step\": 20001, \"lo");
  const std::vector<int> steps = steps_backwards(path);
  ASSERT_EQ(steps.size(), 20000u);
  for (int i = 0; i < 20000; ++i) ASSERT_EQ(steps[static_cast<size_t>(i)], 20000 - i) << i;
}

TEST(JsonLinesBackwards, StopsWhenTheVisitorSaysSo) {
  TempDir dir;
  const std::string path = dir.write("m.jsonl", step_lines(1, 20000));
  EXPECT_EQ(steps_backwards(path, 3), (std::vector<int>{20000, 19999, 19998}));
}

TEST(JsonLinesBackwards, ALineOverOneMebibyteIsSkippedAndTheOthersKept) {
  TempDir dir;
  const std::string huge = "{\"step\": 0, \"pad\": \"" + std::string(3 << 20, 'y') + "\"}\n";
  const std::string path = dir.write("m.jsonl", step_lines(1, 5) + huge + step_lines(6, 9));
  EXPECT_EQ(steps_backwards(path), (std::vector<int>{9, 8, 7, 6, 5, 4, 3, 2, 1}));
}

TEST(JsonLinesBackwards, AMissingOrEmptyFileVisitsNothing) {
  TempDir dir;
  EXPECT_TRUE(steps_backwards(dir.file("none.jsonl")).empty());
  EXPECT_TRUE(steps_backwards(dir.write("empty.jsonl", "")).empty());
}

// for_each_line / read_json_lines: the forward reader of events.jsonl and metrics.jsonl.
TEST(JsonLinesForwards, EveryLineInOrderAcrossBlocksATornOneSkipped) {
  TempDir dir;
  const std::string path =
      dir.write("m.jsonl", step_lines(1, 20000) + "not json\n" + "{\"step\": 20001, \"lo");
  const std::vector<nlohmann::json> lines = read_json_lines(path);
  ASSERT_EQ(lines.size(), 20000u);
  for (int i = 0; i < 20000; ++i) ASSERT_EQ(lines[static_cast<size_t>(i)]["step"], i + 1) << i;
  std::vector<std::string> raw;
  for_each_line(path, [&](const std::string& line) { return raw.push_back(line), true; });
  ASSERT_EQ(raw.size(), 20002u);  // with the unparsable and the torn line, as written
  EXPECT_EQ(raw[20000], "not json");
  EXPECT_EQ(raw[20001], "{\"step\": 20001, \"lo");
}

TEST(JsonLinesForwards, ALineOverOneMebibyteIsSkippedAndTheOthersKept) {
  TempDir dir;
  const std::string huge = "{\"step\": 0, \"pad\": \"" + std::string(3 << 20, 'y') + "\"}\n";
  const std::string path = dir.write("m.jsonl", step_lines(1, 5) + huge + step_lines(6, 9));
  std::vector<int> steps;
  for (const nlohmann::json& j : read_json_lines(path)) steps.push_back(j["step"]);
  EXPECT_EQ(steps, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(JsonLinesForwards, AFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  const std::string fifo = dir.file("events.jsonl");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  try {
    read_json_lines(fifo);  // with no writer, a blocking open or read would never return
    FAIL() << "a FIFO was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("a FIFO, not a regular file"), std::string::npos)
        << e.what();
  }
}

// The writing side: an event appended to a FIFO (no reader) is refused at once, naming it
// (before: the open waited for a reader, and a resumed run hung at its first event for ever).
TEST(RunEvents, AFifoAsTheEventLogIsRefusedNotWaitedOn) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("events.jsonl").c_str(), 0644), 0);
  testing::internal::CaptureStderr();
  append_run_event(dir.path(), "started");  // never throws: says why on stderr
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("events.jsonl: a FIFO, not a regular file"), std::string::npos) << err;
}

// A last line torn by a crash (no newline) is ended before the next event, so that the event
// stays a line of its own that readers find (before: it was glued to the fragment, unparsable).
TEST(RunEvents, AnEventAfterATornLastLineIsALineOfItsOwn) {
  TempDir dir;
  dir.write("events.jsonl", "{\"event\":\"started\"}\n{\"bytes\":12,\"path\":\"/tmp/rev");
  append_run_event(dir.path(), "resumed", {{"step", 8}});
  append_run_event(dir.path(), "finished");
  std::vector<std::string> events;
  for_each_line(dir.file("events.jsonl"), [&](const std::string& line) {
    const nlohmann::json j = parse_json_line(line);
    if (!j.is_discarded()) events.push_back(j.value("event", "?"));
    return true;
  });
  EXPECT_EQ(events, (std::vector<std::string>{"started", "resumed", "finished"}));
}

// A field that is not UTF-8 (a path in Latin-1) is written with U+FFFD in its place: strict
// dumping threw out of a function that must never throw, and ended the run.
TEST(RunEvents, AFieldThatIsNotUtf8IsWrittenNotThrown) {
  TempDir dir;
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(append_run_event(dir.path(), "resumed", {{"from", "caf\xe9/checkpoints"}}));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  const std::string text = io::read_file(dir.file("events.jsonl"));
  EXPECT_NE(text.find("caf\xef\xbf\xbd/checkpoints"), std::string::npos) << text;
}

// Lines nested deeper than any of ours are skipped as lines that do not parse are (before: a
// 200 KB line of brackets crashed `status`, `report` and `trace` in nlohmann's recursion).
TEST(JsonLinesForwards, ALineNestedTooDeepIsSkipped) {
  TempDir dir;
  const std::string deep =
      "{\"step\": 2, \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}\n";
  const std::string path = dir.write("metrics.jsonl", step_lines(1, 1) + deep + step_lines(3, 3));
  std::vector<int> steps;
  for (const nlohmann::json& j : read_json_lines(path)) steps.push_back(j["step"]);
  EXPECT_EQ(steps, (std::vector<int>{1, 3}));
  EXPECT_EQ(steps_backwards(path), (std::vector<int>{3, 1}));
  EXPECT_TRUE(parse_json_line(std::string(20, '[') + std::string(20, ']')).is_discarded());
  EXPECT_EQ(parse_json_line("{\"a\": {\"b\": [1, {\"c\": 2}]}}")["a"]["b"][1]["c"], 2);
}

}  // namespace
}  // namespace rm
