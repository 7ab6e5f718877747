// The framing of a Kubernetes watch response: one JSON event per line, `{"type": T, "object": O}`
// with T one of ADDED, MODIFIED, DELETED, BOOKMARK or ERROR. Kept apart from the transport so the
// bytes a watch reads (half-trusted: any API server or proxy in the path) are decoded by code that
// a fuzz target and table tests drive without a connection (fuzz/watch_stream_fuzz.cc).
//
// Thread safety: a decoder belongs to one watch; not thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace gpupack::kube {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark };
  Type type;
  nlohmann::json object;  // for kBookmark only metadata.resourceVersion is meaningful
};

// A line longer than this ends the watch (Internal): the API server caps an object well below it
// (etcd's request limit is 1.5 MiB by default), so such a line is a broken stream, and without a
// bound a peer that never sends a newline would grow the buffer until the process is killed.
inline constexpr size_t kMaxWatchLineBytes = 64u << 20;

class WatchStreamDecoder {
 public:
  using Handler = std::function<bool(const WatchEvent&)>;

  // `what` names the watch in errors ("WATCH /api/v1/pods?watch=1").
  explicit WatchStreamDecoder(std::string what, size_t max_line_bytes = kMaxWatchLineBytes);

  // Appends `data` and hands every complete event to `on_event`, in order. False when the stream
  // must end: a malformed, unknown or ERROR event or an overlong line (status() says which, an
  // ERROR event as the Status its code maps to), or `on_event` returned false (stopped_by_handler()).
  // Blank lines are skipped. Once it has returned false it delivers nothing more.
  bool Feed(std::string_view data, const Handler& on_event);
  // The body ended: delivers a last event that had no trailing newline. Same result as Feed.
  bool Finish(const Handler& on_event);

  const Status& status() const { return status_; }
  bool stopped_by_handler() const { return stopped_by_handler_; }

 private:
  bool DeliverLine(std::string_view line, const Handler& on_event);

  std::string what_;
  size_t max_line_bytes_;
  std::string buffer_;  // undelivered bytes: a partial line
  Status status_;
  bool stopped_by_handler_ = false;
  bool ended_ = false;
};

}  // namespace gpupack::kube
