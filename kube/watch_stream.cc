#include "kube/watch_stream.h"

#include <utility>

#include "kube/client.h"

namespace gpupack::kube {

WatchStreamDecoder::WatchStreamDecoder(std::string what, size_t max_line_bytes)
    : what_(std::move(what)), max_line_bytes_(max_line_bytes) {}

bool WatchStreamDecoder::Feed(std::string_view data, const Handler& on_event) {
  if (ended_) return false;
  buffer_.append(data);
  size_t start = 0;
  for (size_t nl; (nl = buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (!DeliverLine(std::string_view(buffer_).substr(start, nl - start), on_event)) return false;
  }
  buffer_.erase(0, start);
  if (buffer_.size() > max_line_bytes_) {
    status_ = Status::Internal(what_ + ": a watch event longer than " + std::to_string(max_line_bytes_) +
                               " bytes without a newline");
    ended_ = true;
    return false;
  }
  return true;
}

bool WatchStreamDecoder::Finish(const Handler& on_event) {
  if (ended_) return false;
  std::string last = std::move(buffer_);
  buffer_.clear();
  return DeliverLine(last, on_event);
}

bool WatchStreamDecoder::DeliverLine(std::string_view line, const Handler& on_event) {
  if (line.find_first_not_of(" \r\t") == std::string_view::npos) return true;
  ended_ = true;  // until the event is delivered and the handler wants more
  nlohmann::json ev = nlohmann::json::parse(line, nullptr, false);
  if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string() || !ev.contains("object")) {
    status_ = Status::Internal(what_ + ": malformed watch event");
    return false;
  }
  const std::string& type = ev["type"].get_ref<const std::string&>();
  WatchEvent out;
  if (type == "ADDED") {
    out.type = WatchEvent::Type::kAdded;
  } else if (type == "MODIFIED") {
    out.type = WatchEvent::Type::kModified;
  } else if (type == "DELETED") {
    out.type = WatchEvent::Type::kDeleted;
  } else if (type == "BOOKMARK") {
    out.type = WatchEvent::Type::kBookmark;
  } else if (type == "ERROR") {
    const nlohmann::json& obj = ev["object"];
    const int code =
        obj.is_object() && obj.contains("code") && obj["code"].is_number_integer() ? obj["code"].get<int>() : 500;
    status_ = StatusFromHttp(code, obj.dump(), what_);
    if (status_.ok()) status_ = Status::Unavailable(what_ + ": ERROR event");
    return false;
  } else {
    status_ = Status::Internal(what_ + ": unknown watch event type " + type);
    return false;
  }
  out.object = std::move(ev["object"]);
  if (!on_event(out)) {
    stopped_by_handler_ = true;
    return false;
  }
  ended_ = false;
  return true;
}

}  // namespace gpupack::kube
