// TestApiServer: a small in-memory Kubernetes API server for tests. It speaks the real paths and
// JSON of the few resources gpupack uses, over plain HTTP on 127.0.0.1, so that the real binaries
// (extender, agent) and the kube client can be exercised end to end without a cluster.
//
// Covered (see docs/e2e.md for the exact list and what is NOT covered):
//   core/v1 pods (+ binding, status, eviction), nodes (+ status), events; coordination.k8s.io/v1
//   leases; policy/v1 poddisruptionbudgets (+ status); gpupack.io/v1alpha1 gpunodes (+ status);
//   core/v1 resourcequotas, whose spec.hard
//   "requests.<resource>" entries are enforced when a pod is created (403 "exceeded quota: …",
//   as the real quota admission answers; status.used is not maintained). Verbs: get, list, watch, create, update (PUT),
//   patch (merge, strategic-merge treated as merge, JSON patch), delete.
//   A global resourceVersion counter; watches resume from a resourceVersion, send bookmarks when
//   asked, and get an in-band 410 ERROR event when the RV is older than the bounded history;
//   PUT with a stale resourceVersion and PATCH that sets a stale one → 409; the status
//   subresource separates spec and status writes; Binding sets spec.nodeName, merges the
//   Binding's annotations into the pod and fails 409 if the pod is bound or its UID differs.
//   An Eviction answers 429 with a DisruptionBudget cause when the pod's PodDisruptionBudget
//   (matchLabels) has status.disruptionsAllowed 0, which the test sets (no disruption controller),
//   else spends one and deletes the pod: gracefully (deletionTimestamp) when it is on a node.
//   Field selectors (=, ==, != on any dotted path) and label selectors (k=v, k!=v, k, !k).
// Faults (admin API or SetFaults): a fraction of calls answered 500 before (or after) applying,
// or 403 (as RBAC would), a fraction of writes answered 409, added latency, and dropping every open watch at once.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace gpupack::e2e {

struct Faults {
  double error_rate = 0;               // non-watch calls answered 500 without applying
  double error_after_commit_rate = 0;  // writes applied, then answered 500 (a lost response)
  double conflict_rate = 0;            // writes answered 409 without applying
  int latency_ms = 0;                  // added before every non-watch call
  double watch_error_rate = 0;         // watch requests answered 500
  double forbidden_rate = 0;           // non-watch calls answered 403 Forbidden, as RBAC would
  std::string path_contains;           // faults apply only to paths containing this ("" = all)

  nlohmann::json ToJson() const;
  static StatusOr<Faults> FromJson(const nlohmann::json& j);
};

// One eviction request as it arrived, and the HTTP status it was answered with.
struct EvictionRecord {
  std::string ns, pod;  // from the URL
  nlohmann::json body;
  int code = 0;
};

struct TestApiServerOptions {
  size_t history_limit = 2000;  // watch events kept for resumption; older RVs get 410
  std::chrono::milliseconds bookmark_interval{1000};
  // Each open watch, and each open keep-alive connection (clients keep a few idle), holds one.
  int worker_threads = 256;
  // An idle keep-alive connection is closed after this long (httplib counts whole seconds).
  std::chrono::seconds keep_alive_timeout{2};
};

class TestApiServer {
 public:
  explicit TestApiServer(TestApiServerOptions options = {});
  ~TestApiServer();  // Stops.
  TestApiServer(const TestApiServer&) = delete;
  TestApiServer& operator=(const TestApiServer&) = delete;

  // Binds host:port (port 0 = any free port) and serves on a background thread. Returns the
  // bound port. REQUIRES: not started.
  StatusOr<int> Start(const std::string& host = "127.0.0.1", int port = 0);
  // Ends every watch and stops serving; idempotent.
  void Stop();
  // "http://127.0.0.1:PORT".
  std::string url() const;

  void SetFaults(const Faults& faults);
  // Closes every open watch stream abruptly (clients see a broken stream and must resume).
  void DropWatches();
  // Forgets the whole event history: every resume from an older RV gets 410 Gone.
  void CompactHistory();
  // Current global resourceVersion.
  int64_t resource_version() const;
  // Number of watch streams currently open.
  int open_watches() const;
  // Every eviction request so far, in order (also GET /admin/evictions).
  std::vector<EvictionRecord> evictions() const;
  // Connections the server has closed so far, for whatever reason (a keep-alive connection left
  // idle past keep_alive_timeout, the client's close, Stop).
  uint64_t connections_closed() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Writes a kubeconfig for `server_url` (no auth) to `path`.
Status WriteKubeconfig(const std::string& path, const std::string& server_url);

}  // namespace gpupack::e2e
