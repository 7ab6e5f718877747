// Informer: list + watch + a local cache of one resource type, with add/update/delete handlers
// (client-go's reflector + store, reduced to what gpupack needs).
//
// Behaviour:
//  - Start() lists (most recent, quorum read), fills the cache, calls on_add for each object, then
//    on_synced once, and watches from the list's resourceVersion with bookmarks requested.
//  - A watch that ends normally, breaks or stalls resumes from the last resourceVersion seen
//    (events and bookmarks both advance it); no events are lost or repeated.
//  - 410 Gone (on the request or in-band) relists: the new list is diffed against the cache, and
//    the differences are delivered as add/update/delete, so handlers never miss a deletion.
//  - Errors back off exponentially with jitter (capped) before the next list or watch.
// Handlers run on the informer's own thread, one at a time, in event order; they must not call
// Stop(). A handler sees the cache already updated.
//
// Thread safety: Get/List/HasSynced/stats may be called from any thread at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "kube/client.h"

namespace gpupack::kube {

struct InformerHandlers {
  std::function<void(const Json& obj)> on_add;
  std::function<void(const Json& old_obj, const Json& new_obj)> on_update;
  std::function<void(const Json& last_known)> on_delete;
  // After the first successful list has been delivered (once per Start()).
  std::function<void()> on_synced;
};

struct InformerOptions {
  std::string ns;  // empty = all namespaces (or a cluster-scoped resource)
  // Applied to every listed or watched object before it is cached and handed to the handlers
  // (client-go's SetTransform): may trim the object in place; returning false keeps it out of the
  // cache (an object that was cached and is now refused is delivered as a deletion). Lets a
  // cluster-wide pod informer hold only the pods that matter, trimmed. Null = keep everything.
  std::function<bool(Json& obj)> transform;
  std::string label_selector;
  std::string field_selector;
  int list_page_size = 500;
  int watch_timeout_seconds = 300;  // randomised ×[1,2) per watch like client-go
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(90)};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
};

struct InformerStats {
  uint64_t lists = 0;                  // successful lists, the first one included
  uint64_t relists = 0;                // lists after the first (410, or errors)
  uint64_t watch_restarts = 0;         // watches started after the first
  uint64_t errors = 0;                 // failed list/watch attempts
  Clock::TimePoint last_event_time{};  // last list, event or bookmark received
};

class Informer {
 public:
  // `client` must outlive the informer.
  Informer(Client* client, Resource resource, InformerOptions options, InformerHandlers handlers,
           const Clock* clock = &SystemClock::Instance());
  ~Informer();  // Stops.
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Starts the background thread. REQUIRES: not running.
  void Start();
  // Stops the watch and joins the thread; idempotent.
  void Stop();

  bool HasSynced() const { return synced_.load(); }
  // Blocks until synced, Stop(), or `timeout`; returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout);

  std::optional<Json> Get(const std::string& key) const;  // key = ObjectKey()
  std::vector<Json> List() const;
  std::string LastResourceVersion() const;
  InformerStats stats() const;

 private:
  void Run();
  Status ListAndReplace();
  Status WatchOnce();
  void Apply(const WatchEvent& ev);
  void Backoff();

  Client* const client_;
  const Resource resource_;
  const InformerOptions options_;
  const InformerHandlers handlers_;
  const Clock* const clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Json> cache_;
  std::string last_rv_;
  InformerStats stats_;
  bool stopping_ = false;
  std::chrono::milliseconds backoff_{0};
  std::atomic<bool> synced_{false};
  bool synced_notified_ = false;
  WatchCanceller canceller_;
  std::thread thread_;
};

}  // namespace gpupack::kube
