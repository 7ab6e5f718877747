#include "kube/informer.h"

#include <random>

#include "common/log.h"

namespace gpupack::kube {
namespace {
constexpr std::string_view kComponent = "informer";

double Uniform(double lo, double hi) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
}  // namespace

Informer::Informer(Client* client, Resource resource, InformerOptions options, InformerHandlers handlers,
                   const Clock* clock)
    : client_(client),
      resource_(std::move(resource)),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      clock_(clock) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  std::lock_guard<std::mutex> l(mu_);
  GPUPACK_CHECK(!thread_.joinable());
  stopping_ = false;
  synced_notified_ = false;
  canceller_.Reset();
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  canceller_.Cancel();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [this] { return synced_.load() || stopping_; });
  return synced_.load();
}

std::optional<Json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> Informer::List() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Json> out;
  out.reserve(cache_.size());
  for (const auto& [key, obj] : cache_) out.push_back(obj);
  return out;
}

std::string Informer::LastResourceVersion() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_rv_;
}

InformerStats Informer::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void Informer::Backoff() {
  std::unique_lock<std::mutex> l(mu_);
  backoff_ = backoff_.count() == 0 ? options_.initial_backoff : std::min(backoff_ * 2, options_.max_backoff);
  const auto wait =
      std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(backoff_.count()) * Uniform(0.5, 1.5)));
  cv_.wait_for(l, wait, [this] { return stopping_; });
}

void Informer::Run() {
  bool need_list = true;
  bool first_watch = true;
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
    }
    if (need_list) {
      Status s = ListAndReplace();
      if (!s.ok()) {
        GPUPACK_LOG(kWarning, kComponent) << resource_.plural << ": list failed: " << s;
        {
          std::lock_guard<std::mutex> l(mu_);
          ++stats_.errors;
        }
        Backoff();
        continue;
      }
      need_list = false;
    }
    if (!first_watch) {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.watch_restarts;
    }
    first_watch = false;
    Status s = WatchOnce();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
    }
    if (s.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      backoff_ = std::chrono::milliseconds(0);
      continue;  // normal end of a watch: resume from the last RV
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.errors;
    }
    if (s.code() == StatusCode::kGone) {
      GPUPACK_LOG(kInfo, kComponent) << resource_.plural << ": resourceVersion expired; relisting";
      need_list = true;
      continue;  // relist at once: 410 is not an error to back off from
    }
    GPUPACK_LOG(kWarning, kComponent) << resource_.plural << ": watch ended: " << s << "; resuming";
    Backoff();
  }
}

Status Informer::ListAndReplace() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.list_page_size;
  GPUPACK_ASSIGN_OR_RETURN(ListResult list, client_->List(resource_, options_.ns, lo));

  std::map<std::string, Json> fresh;
  for (Json& item : list.items) {
    if (options_.transform && !options_.transform(item)) continue;
    std::string key = ObjectKey(item);
    fresh.emplace(std::move(key), std::move(item));
  }
  std::vector<Json> added;
  std::vector<std::pair<Json, Json>> updated;
  std::vector<Json> deleted;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [key, obj] : fresh) {
      auto it = cache_.find(key);
      if (it == cache_.end())
        added.push_back(obj);
      else if (ResourceVersionOf(it->second) != ResourceVersionOf(obj))
        updated.emplace_back(it->second, obj);
    }
    for (const auto& [key, obj] : cache_) {
      if (!fresh.count(key)) deleted.push_back(obj);
    }
    cache_ = std::move(fresh);
    last_rv_ = list.resource_version;
    if (stats_.lists > 0) ++stats_.relists;
    ++stats_.lists;
    stats_.last_event_time = clock_->Now();
    backoff_ = std::chrono::milliseconds(0);
  }
  for (const Json& obj : deleted)
    if (handlers_.on_delete) handlers_.on_delete(obj);
  for (const auto& [o, n] : updated)
    if (handlers_.on_update) handlers_.on_update(o, n);
  for (const Json& obj : added)
    if (handlers_.on_add) handlers_.on_add(obj);
  bool notify = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!synced_notified_) {
      synced_notified_ = true;
      notify = true;
    }
  }
  if (notify) {
    synced_.store(true);
    if (handlers_.on_synced) handlers_.on_synced();
    cv_.notify_all();
  }
  return Status::Ok();
}

Status Informer::WatchOnce() {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.resource_version = LastResourceVersion();
  wo.allow_bookmarks = true;
  wo.timeout_seconds = static_cast<int>(options_.watch_timeout_seconds * Uniform(1.0, 2.0));
  wo.stall_timeout = options_.stall_timeout;
  return client_->Watch(
      resource_, options_.ns, wo,
      [this](const WatchEvent& ev) {
        Apply(ev);
        return true;
      },
      &canceller_);
}

void Informer::Apply(const WatchEvent& event) {
  const std::string rv = ResourceVersionOf(event.object);
  WatchEvent ev = event;
  bool refused = false;
  if (ev.type != WatchEvent::Type::kBookmark && options_.transform) refused = !options_.transform(ev.object);
  std::optional<Json> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!rv.empty()) last_rv_ = rv;
    stats_.last_event_time = clock_->Now();
    if (ev.type == WatchEvent::Type::kBookmark) return;
    const std::string key = ObjectKey(ev.object);
    auto it = cache_.find(key);
    if (it != cache_.end()) old = it->second;
    if (refused && ev.type != WatchEvent::Type::kDeleted) {
      if (it == cache_.end()) return;  // never cached: nothing to tell
      ev.type = WatchEvent::Type::kDeleted;
      ev.object = *old;
    }
    if (ev.type == WatchEvent::Type::kDeleted) {
      if (it != cache_.end()) cache_.erase(it);
    } else {
      cache_[key] = ev.object;
    }
  }
  switch (ev.type) {
    case WatchEvent::Type::kAdded:
    case WatchEvent::Type::kModified:
      if (old && handlers_.on_update)
        handlers_.on_update(*old, ev.object);
      else if (!old && handlers_.on_add)
        handlers_.on_add(ev.object);
      break;
    case WatchEvent::Type::kDeleted:
      if (handlers_.on_delete) handlers_.on_delete(ev.object);
      break;
    case WatchEvent::Type::kBookmark:
      break;
  }
}

}  // namespace gpupack::kube
