// A small Kubernetes API client: the calls gpupack makes, with per-call deadlines, retries with
// jittered back-off, and HTTP status → Status mapping. Objects travel as nlohmann::json exactly
// as the API server sends them; typed decoding lives in api/ (pod_request.h, gpunode.h, ...).
//
// Status mapping (every call):
//   2xx → OK; 404 → NotFound; 409 → Conflict (create of an existing object: AlreadyExists);
//   410 → Gone; 401/403 → PermissionDenied; 400/422 → InvalidArgument; 429, 5xx, connection
//   errors, timeouts → Unavailable. The message carries the verb, the path and the server's
//   Status.message.
// Retries: Unavailable is retried up to RetryPolicy::max_attempts with jittered exponential
// back-off, never past the call's deadline; a 401 re-reads the token file and retries once.
// Conflict, NotFound, Gone and InvalidArgument are returned at once (the caller decides).
//
// Connections: HTTP/1.1 keep-alive. Each call takes an idle connection of the client's pool (or
// opens one) for itself and gives it back after the response, so concurrent calls never share a
// connection and a slow call never blocks another one; at most RetryPolicy::idle_connections stay
// open between calls. An idle connection the server closed is dropped before use; a request that
// meets one closed under it is sent again at once on a new connection when that is safe (GET, PUT,
// DELETE, or a request not written out whole), otherwise it fails Unavailable into the retries
// above. A watch has a connection of its own, closed when it ends.
//
// Thread safety: every method may be called concurrently from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "kube/config.h"
#include "kube/watch_stream.h"

namespace gpupack::kube {

using Json = nlohmann::json;

// A resource type: how to build its URL.
struct Resource {
  std::string group;    // "" for core/v1
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "pods", "gpunodes"
  bool namespaced = true;

  // "/api/v1" or "/apis/<group>/<version>".
  std::string ApiPrefix() const;
  // Collection path: ns empty on a namespaced resource means all namespaces.
  std::string CollectionPath(std::string_view ns) const;
  // Object path, with an optional subresource ("status", "binding").
  std::string ObjectPath(std::string_view ns, std::string_view name, std::string_view subresource = "") const;
};

const Resource& PodsResource();
const Resource& NodesResource();
const Resource& EventsResource();
const Resource& LeasesResource();    // coordination.k8s.io/v1
const Resource& GpuNodesResource();  // gpupack.io/v1alpha1, cluster-scoped

struct ListOptions {
  std::string label_selector;  // e.g. "app=x"
  std::string field_selector;  // e.g. "spec.nodeName=n1,status.phase!=Succeeded"
  // Empty = most recent (a quorum read, what gpupack wants for consistency); "0" = any.
  std::string resource_version;
  int limit = 0;  // page size; 0 = no paging. List() follows `continue` and returns all items.
};

struct ListResult {
  std::vector<Json> items;
  std::string resource_version;  // the collection's RV: where a following watch starts
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start exactly after this RV (required; from a list or a prior event)
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // server-side end of the watch (normal; re-watch)
  // No byte for this long (events or bookmarks) = a stalled stream: the watch ends with
  // Unavailable so the caller resumes from its last RV.
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(90)};
};

// Lets another thread end a running Watch promptly (e.g. at shutdown). Reusable: Reset() before
// the next watch. Thread safety: all methods are thread-safe.
class WatchCanceller {
 public:
  WatchCanceller();
  ~WatchCanceller();
  void Cancel();
  bool cancelled() const;
  void Reset();

 private:
  friend class Client;
  struct State;
  std::shared_ptr<State> state_;
};

struct RetryPolicy {
  int max_attempts = 4;  // including the first
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{2000};
  std::chrono::milliseconds call_timeout{10000};  // per call, all attempts together
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::seconds token_reread_period{60};
  // Keep-alive connections kept open between calls; 0 = a new connection (and TLS handshake) for
  // every call.
  int idle_connections = 8;
};

enum class PatchType { kMerge, kStrategicMerge, kJsonPatch };

// What the API server answered to an eviction it did not refuse with an error.
struct EvictionAnswer {
  // true: 201, the pod is being deleted gracefully. false: 429 with a DisruptionBudget cause, a
  // PodDisruptionBudget allows no disruption now.
  bool evicted = false;
  // For a refusal, the budget's cause as the API server words it ("The disruption budget web needs
  // 2 healthy pods and has 2 currently"), else its Status message.
  std::string message;
};

// A core/v1 Event, reduced to what gpupack emits.
struct EventSpec {
  std::string ns;
  Json involved_object;         // {"kind":"Pod","namespace":..,"name":..,"uid":..}
  std::string type = "Normal";  // Normal | Warning
  std::string reason;           // CamelCase, e.g. "GpupackAssigned"
  std::string message;
  std::string reporting_component = "gpupack";
};

class Client {
 public:
  // Validates the config (server URL, PEM blocks, readable token file); errors name what is wrong.
  static StatusOr<std::unique_ptr<Client>> Create(Config config, RetryPolicy policy = {},
                                                  const Clock* clock = &SystemClock::Instance());
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Config& config() const { return config_; }
  // Connections this client has opened (attempted), watches included; each one on https is a TLS
  // handshake.
  uint64_t connections_opened() const;

  // --- generic verbs (ns empty for cluster-scoped resources) ---
  StatusOr<Json> Get(const Resource& r, std::string_view ns, std::string_view name);
  // Lists everything matching (follows `continue`). ns empty = all namespaces.
  StatusOr<ListResult> List(const Resource& r, std::string_view ns, const ListOptions& opts = {});
  // POST to the collection. 409 → AlreadyExists.
  StatusOr<Json> Create(const Resource& r, std::string_view ns, const Json& object);
  // PUT the object (metadata.resourceVersion must be set; a stale one → Conflict).
  StatusOr<Json> Update(const Resource& r, std::string_view ns, const Json& object, std::string_view subresource = "");
  StatusOr<Json> Patch(const Resource& r, std::string_view ns, std::string_view name, PatchType type, const Json& patch,
                       std::string_view subresource = "");
  Status Delete(const Resource& r, std::string_view ns, std::string_view name);

  // Runs one watch request, calling `on_event` for each event in order, until the server ends
  // the stream (returns OK: resume from the last RV seen), `on_event` returns false (OK),
  // `canceller` is cancelled (OK), the stream stalls or breaks (Unavailable), or the server
  // reports 410 on the request or in-band (Gone: relist). An in-band ERROR other than 410 →
  // the mapped status. Not retried: the caller (an Informer) owns resumption.
  Status Watch(const Resource& r, std::string_view ns, const WatchOptions& opts,
               const std::function<bool(const WatchEvent&)>& on_event, WatchCanceller* canceller = nullptr);

  // --- typed calls gpupack makes ---
  StatusOr<Json> GetPod(std::string_view ns, std::string_view name);
  // POST /api/v1/namespaces/{ns}/pods/{name}/binding with metadata.uid = pod_uid as a storage
  // precondition (a re-created pod of the same name is never bound) and `annotations`, which the
  // API server merges into the pod in the same write as spec.nodeName. Conflict when the pod is
  // already bound (to any node) or its UID differs; NotFound when the pod is gone.
  Status CreateBinding(std::string_view ns, std::string_view pod_name, std::string_view pod_uid,
                       std::string_view node_name, const std::map<std::string, std::string>& annotations);
  // PATCH /api/v1/nodes/{node}/status (merge patch), e.g. {"status":{"capacity":{...},"allocatable":{...}}}.
  StatusOr<Json> PatchNodeStatus(std::string_view node_name, const Json& merge_patch);
  StatusOr<Json> GetNode(std::string_view node_name);
  // GPUNode (cluster-scoped). UpsertGpuNodeStatus: get; create if missing (with status: the CRD
  // status subresource ignores status on create, so a status PUT follows); then PUT status with
  // the current resourceVersion, re-reading and retrying on Conflict a few times.
  StatusOr<Json> GetGpuNode(std::string_view name);
  StatusOr<Json> UpsertGpuNodeStatus(std::string_view name, const Json& status);
  Status CreateEvent(const EventSpec& event);
  // POST /api/v1/namespaces/{ns}/pods/{name}/eviction: a policy/v1 Eviction with `pod_uid` as the
  // deletion's UID precondition (a re-created pod of the same name is not evicted). The API server
  // deletes the pod gracefully when every PodDisruptionBudget covering it allows a disruption
  // (evicted), and answers 429 with a "DisruptionBudget" cause when one does not: that answer is
  // returned at once, not retried, because the caller decides when to ask again (as `kubectl drain`
  // does). Every other answer maps as for any call (a 429 without that cause is throttling, so
  // retried). The pod is never deleted any other way.
  StatusOr<EvictionAnswer> EvictPod(std::string_view ns, std::string_view pod_name, std::string_view pod_uid);

 private:
  struct Response {
    int status = 0;
    std::string body;
  };
  Client(Config config, RetryPolicy policy, const Clock* clock);
  // One request with retries: a response `is_answer` accepts is returned as it is; any other maps
  // to a Status (retried while Unavailable).
  StatusOr<Response> Exchange(std::string_view method, const std::string& path, const std::string& body,
                              std::string_view content_type, const std::function<bool(const Response&)>& is_answer);
  // Exchange answering 2xx only, with the body parsed.
  StatusOr<Json> Call(std::string_view method, const std::string& path, const std::string& body,
                      std::string_view content_type);
  StatusOr<Response> Once(std::string_view method, const std::string& path, const std::string& body,
                          std::string_view content_type, std::chrono::milliseconds timeout);
  std::string BearerToken(bool force_reread);
  Status Init();

  struct Transport;
  Config config_;
  RetryPolicy policy_;
  const Clock* clock_;
  std::unique_ptr<Transport> transport_;
  std::mutex token_mu_;
  std::string cached_token_;
  Clock::TimePoint token_read_at_{};
};

// Maps an HTTP status (and the API server's Status body, if any) to a Status. Exposed for tests
// and for the test API server's clients.
Status StatusFromHttp(int http_status, std::string_view body, std::string_view what);

// "ns/name" for namespaced objects, "name" for cluster-scoped ones: the informer's cache key.
std::string ObjectKey(const Json& object);
std::string ResourceVersionOf(const Json& object);
// The string at `path` (e.g. {"metadata", "name"}), or "" when a step is missing or not an
// object, or the value is not a string. Never throws, whatever the object's shape.
std::string StringAt(const Json& object, std::initializer_list<const char*> path);

}  // namespace gpupack::kube
