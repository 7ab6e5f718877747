#include "kube/watch_stream.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpupack::kube {
namespace {

// Feeds `chunks` in order, then Finish; the events' types and object names as "T:name".
struct Decoded {
  std::vector<std::string> events;
  bool ok = true;
  Status status;
  bool stopped = false;
};
Decoded Decode(const std::vector<std::string>& chunks, int stop_after = -1, size_t max_line = kMaxWatchLineBytes) {
  WatchStreamDecoder d("WATCH /api/v1/pods", max_line);
  Decoded run;
  auto handler = [&](const WatchEvent& ev) {
    const char* t = ev.type == WatchEvent::Type::kAdded      ? "A"
                    : ev.type == WatchEvent::Type::kModified ? "M"
                    : ev.type == WatchEvent::Type::kDeleted  ? "D"
                                                             : "B";
    run.events.push_back(std::string(t) + ":" + ev.object["metadata"].value("name", ""));
    return stop_after < 0 || static_cast<int>(run.events.size()) < stop_after;
  };
  for (const std::string& c : chunks) {
    if (!(run.ok = d.Feed(c, handler))) break;
  }
  if (run.ok) run.ok = d.Finish(handler);
  run.status = d.status();
  run.stopped = d.stopped_by_handler();
  return run;
}

std::string Event(const std::string& type, const std::string& name) {
  return R"({"type":")" + type + R"(","object":{"metadata":{"name":")" + name + R"("}}})";
}

TEST(WatchStreamDecoder, EventsSplitAnywhereAcrossChunksArriveWhole) {
  const std::string body = Event("ADDED", "a") + "\n" + Event("MODIFIED", "b") + "\r\n\n" + Event("DELETED", "c") +
                           "\n" + Event("BOOKMARK", "") + "\n";
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    const Decoded run = Decode({body.substr(0, cut), body.substr(cut)});
    EXPECT_TRUE(run.ok) << cut << ": " << run.status;
    EXPECT_EQ(run.events, (std::vector<std::string>{"A:a", "M:b", "D:c", "B:"})) << "cut at " << cut;
  }
}

TEST(WatchStreamDecoder, ALastEventWithoutNewlineIsDeliveredAtTheEnd) {
  const Decoded run = Decode({Event("ADDED", "a") + "\n" + Event("ADDED", "b")});
  EXPECT_TRUE(run.ok);
  EXPECT_EQ(run.events, (std::vector<std::string>{"A:a", "A:b"}));
}

TEST(WatchStreamDecoder, BadEventsEndTheStreamWithTheirReason) {
  struct Case {
    std::string line;
    std::string message;
  } cases[] = {
      {"not json", "WATCH /api/v1/pods: malformed watch event"},
      {R"({"object":{}})", "WATCH /api/v1/pods: malformed watch event"},
      {R"({"type":3,"object":{}})", "WATCH /api/v1/pods: malformed watch event"},
      {R"({"type":"ADDED"})", "WATCH /api/v1/pods: malformed watch event"},
      {R"(["type","object"])", "WATCH /api/v1/pods: malformed watch event"},
      {R"({"type":"RENAMED","object":{}})", "WATCH /api/v1/pods: unknown watch event type RENAMED"},
  };
  for (const Case& c : cases) {
    const Decoded run = Decode({Event("ADDED", "a") + "\n" + c.line + "\n" + Event("ADDED", "never") + "\n"});
    EXPECT_FALSE(run.ok) << c.line;
    EXPECT_EQ(run.status.code(), StatusCode::kInternal) << c.line;
    EXPECT_EQ(run.status.message(), c.message) << c.line;
    EXPECT_EQ(run.events, (std::vector<std::string>{"A:a"})) << c.line << ": nothing after the bad event";
  }
}

TEST(WatchStreamDecoder, AnErrorEventBecomesTheStatusOfItsCode) {
  // 410 Gone: the resourceVersion is too old, the caller relists.
  const Decoded run = Decode({R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",)"
                              R"("message":"too old resource version"}})"
                              "\n"});
  EXPECT_FALSE(run.ok);
  EXPECT_FALSE(run.stopped);
  EXPECT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("too old resource version"), std::string::npos) << run.status;
}

TEST(WatchStreamDecoder, TheHandlerCanStopTheStream) {
  const Decoded run = Decode({Event("ADDED", "a") + "\n" + Event("ADDED", "b") + "\n" + Event("ADDED", "c") + "\n"},
                             /*stop_after=*/2);
  EXPECT_FALSE(run.ok);
  EXPECT_TRUE(run.stopped);
  EXPECT_TRUE(run.status.ok());
  EXPECT_EQ(run.events, (std::vector<std::string>{"A:a", "A:b"}));
}

// A bound of 16 bytes: a complete line longer than it passes (it is delivered before the check;
// the transport's chunks are far smaller than the real bound), a partial line of 17 bytes does not.
TEST(WatchStreamDecoder, APartialLineLongerThanTheBoundEndsTheStream) {
  EXPECT_TRUE(Decode({Event("ADDED", "a") + "\n"}, -1, 16).ok);
  const Decoded run = Decode({std::string(17, 'x')}, -1, 16);
  EXPECT_FALSE(run.ok);
  EXPECT_EQ(run.status.message(), "WATCH /api/v1/pods: a watch event longer than 16 bytes without a newline");
}

}  // namespace
}  // namespace gpupack::kube
