// Long file: the in-memory API server, one test double with list, watch, patch, bind and
// resourceVersion semantics that must stay consistent with each other.
#include "testing/test_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/quantity.h"
#include "common/rfc3339.h"

namespace gpupack::e2e {

using Json = nlohmann::json;

namespace {

struct ResourceType {
  std::string group;  // "" = core
  std::string version;
  std::string plural;
  std::string kind;
  bool namespaced;
  bool status_subresource;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
};

const std::vector<ResourceType>& Types() {
  static const std::vector<ResourceType> types = {
      {"", "v1", "pods", "Pod", true, true},
      {"", "v1", "nodes", "Node", false, true},
      {"", "v1", "events", "Event", true, false},
      {"coordination.k8s.io", "v1", "leases", "Lease", true, false},
      {"gpupack.io", "v1alpha1", "gpunodes", "GPUNode", false, true},
      {"", "v1", "resourcequotas", "ResourceQuota", true, true},
      {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, true},
  };
  return types;
}

const ResourceType* TypeOf(const std::string& plural) {
  for (const ResourceType& rt : Types()) {
    if (rt.plural == plural) return &rt;
  }
  Die("test API server: no resource type " + plural);
}

// A parsed request path.
struct Target {
  const ResourceType* type = nullptr;
  std::string ns;           // empty: all namespaces (collections) or cluster-scoped
  std::string name;         // empty: the collection
  std::string subresource;  // "", "status", "binding", "eviction"
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

std::optional<Target> ParsePath(const std::string& path) {
  std::vector<std::string> seg = Split(path, '/');
  if (seg.empty() || !seg[0].empty()) return std::nullopt;
  seg.erase(seg.begin());
  std::string group, version;
  size_t i = 0;
  if (seg.size() >= 2 && seg[0] == "api") {
    version = seg[1];
    i = 2;
  } else if (seg.size() >= 3 && seg[0] == "apis") {
    group = seg[1];
    version = seg[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  Target t;
  if (i + 1 < seg.size() && seg[i] == "namespaces") {
    t.ns = seg[i + 1];
    i += 2;
  }
  if (i >= seg.size()) return std::nullopt;
  const std::string plural = seg[i++];
  for (const ResourceType& rt : Types()) {
    if (rt.group == group && rt.version == version && rt.plural == plural) t.type = &rt;
  }
  if (t.type == nullptr) return std::nullopt;
  if (!t.type->namespaced && !t.ns.empty()) return std::nullopt;
  if (i < seg.size()) t.name = seg[i++];
  if (i < seg.size()) t.subresource = seg[i++];
  if (i < seg.size() || (t.name.empty() && !t.subresource.empty())) return std::nullopt;
  if (!t.subresource.empty() && t.subresource != "status" && t.subresource != "binding" &&
      t.subresource != "eviction") {
    return std::nullopt;
  }
  if (t.subresource == "status" && !t.type->status_subresource) return std::nullopt;
  if ((t.subresource == "binding" || t.subresource == "eviction") && t.type->plural != "pods") return std::nullopt;
  return t;
}

Json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", Json::object()},
          {"status", code < 300 ? "Success" : "Failure"},
          {"message", message},
          {"reason", reason},
          {"code", code}};
}

// Walks a dotted path ("spec.nodeName"); missing → "".
std::string FieldValue(const Json& obj, const std::string& path) {
  const Json* cur = &obj;
  for (const std::string& part : Split(path, '.')) {
    if (!cur->is_object() || !cur->contains(part)) return "";
    cur = &(*cur)[part];
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  if (cur->is_number()) return cur->dump();
  return "";
}

struct Requirement {
  std::string key;
  enum class Op { kEq, kNe, kExists, kNotExists } op;
  std::string value;
};

// Parses "a=b,c!=d" (field) or also "k", "!k" (label). Returns an error message when malformed.
std::optional<std::string> ParseSelector(const std::string& text, bool label, std::vector<Requirement>& out) {
  if (text.empty()) return std::nullopt;
  for (std::string term : Split(text, ',')) {
    Requirement r;
    if (size_t p = term.find("!="); p != std::string::npos) {
      r = {term.substr(0, p), Requirement::Op::kNe, term.substr(p + 2)};
    } else if (size_t q = term.find("=="); q != std::string::npos) {
      r = {term.substr(0, q), Requirement::Op::kEq, term.substr(q + 2)};
    } else if (size_t e = term.find('='); e != std::string::npos) {
      r = {term.substr(0, e), Requirement::Op::kEq, term.substr(e + 1)};
    } else if (label && !term.empty() && term[0] == '!') {
      r = {term.substr(1), Requirement::Op::kNotExists, ""};
    } else if (label && !term.empty() && term.find_first_of(" ()") == std::string::npos) {
      r = {term, Requirement::Op::kExists, ""};
    } else {
      return "unsupported selector term \"" + term +
             "\" (this test server supports =, ==, != and, for labels, k and !k)";
    }
    if (r.key.empty()) return "selector term \"" + term + "\" has no key";
    out.push_back(r);
  }
  return std::nullopt;
}

struct Filter {
  const ResourceType* type = nullptr;
  std::string ns;
  std::vector<Requirement> fields;
  std::vector<Requirement> labels;

  bool Matches(const Json& obj) const {
    if (!ns.empty() && FieldValue(obj, "metadata.namespace") != ns) return false;
    for (const Requirement& r : fields) {
      const std::string v = FieldValue(obj, r.key);
      if (r.op == Requirement::Op::kEq && v != r.value) return false;
      if (r.op == Requirement::Op::kNe && v == r.value) return false;
    }
    const Json labels_obj = obj.value("metadata", Json::object()).value("labels", Json::object());
    for (const Requirement& r : labels) {
      const bool has = labels_obj.is_object() && labels_obj.contains(r.key) && labels_obj[r.key].is_string();
      const std::string v = has ? labels_obj[r.key].get<std::string>() : "";
      switch (r.op) {
        case Requirement::Op::kEq:
          if (!has || v != r.value) return false;
          break;
        case Requirement::Op::kNe:
          if (has && v == r.value) return false;
          break;
        case Requirement::Op::kExists:
          if (!has) return false;
          break;
        case Requirement::Op::kNotExists:
          if (has) return false;
          break;
      }
    }
    return true;
  }
};

struct HistoryEntry {
  int64_t rv;
  const ResourceType* type;
  std::string event;  // ADDED | MODIFIED | DELETED
  Json old_obj;       // null for ADDED
  Json obj;
};

struct Watcher {
  Filter filter;
  bool bookmarks = false;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> queue;  // serialized event lines
  int64_t known_rv = 0;           // every event up to here has been queued (or filtered out)
  bool closed = false;
};

std::string EventLine(const std::string& type, const Json& obj) {
  return Json{{"type", type}, {"object", obj}}.dump() + "\n";
}

// What a watcher with `f` sees of a change old→obj (transitions across the selector become
// ADDED/DELETED, as the real watch cache does).
std::optional<std::string> Transition(const Filter& f, const HistoryEntry& e) {
  if (e.type != f.type) return std::nullopt;
  const bool old_match = !e.old_obj.is_null() && f.Matches(e.old_obj);
  const bool new_match = f.Matches(e.obj);
  if (e.event == "DELETED")
    return old_match || new_match ? std::optional<std::string>(EventLine("DELETED", e.obj)) : std::nullopt;
  if (old_match && new_match) return EventLine(e.event, e.obj);
  if (!old_match && new_match) return EventLine("ADDED", e.obj);
  if (old_match && !new_match) return EventLine("DELETED", e.obj);
  return std::nullopt;
}

std::string NewUid() {
  static std::mt19937_64 rng{std::random_device{}()};
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  std::ostringstream s;
  s << std::hex << rng() << rng();
  std::string h = s.str();
  h.resize(32, '0');
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20, 12);
}

struct Reply {
  int code;
  Json body;
};

Reply Error(int code, const std::string& reason, const std::string& message) {
  return {code, StatusBody(code, reason, message)};
}

}  // namespace

Json Faults::ToJson() const {
  return {{"errorRate", error_rate},
          {"errorAfterCommitRate", error_after_commit_rate},
          {"conflictRate", conflict_rate},
          {"latencyMs", latency_ms},
          {"watchErrorRate", watch_error_rate},
          {"forbiddenRate", forbidden_rate},
          {"pathContains", path_contains}};
}

StatusOr<Faults> Faults::FromJson(const Json& j) {
  if (!j.is_object()) return Status::InvalidArgument("faults: expected a JSON object");
  Faults f;
  try {
    for (const auto& [key, value] : j.items()) {
      if (key == "errorRate")
        f.error_rate = value.get<double>();
      else if (key == "errorAfterCommitRate")
        f.error_after_commit_rate = value.get<double>();
      else if (key == "conflictRate")
        f.conflict_rate = value.get<double>();
      else if (key == "latencyMs")
        f.latency_ms = value.get<int>();
      else if (key == "watchErrorRate")
        f.watch_error_rate = value.get<double>();
      else if (key == "forbiddenRate")
        f.forbidden_rate = value.get<double>();
      else if (key == "pathContains")
        f.path_contains = value.get<std::string>();
      else
        return Status::InvalidArgument("faults: unknown field \"" + key + "\"");
    }
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string("faults: wrong type: ") + e.what());
  }
  for (double r : {f.error_rate, f.error_after_commit_rate, f.conflict_rate, f.watch_error_rate, f.forbidden_rate}) {
    if (r < 0 || r > 1) return Status::InvalidArgument("faults: rates must be within [0,1]");
  }
  if (f.latency_ms < 0) return Status::InvalidArgument("faults: latencyMs must not be negative");
  return f;
}

// httplib's pool with a count of the tasks it has finished: httplib serves each connection as one
// task, to its close, so the count is the connections the server has closed.
class CountingThreadPool final : public httplib::TaskQueue {
 public:
  CountingThreadPool(size_t threads, std::atomic<uint64_t>& finished) : pool_(threads), finished_(finished) {}
  void enqueue(std::function<void()> fn) override {
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      ++finished_;
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;
  std::atomic<uint64_t>& finished_;
};

struct TestApiServer::Impl {
  explicit Impl(TestApiServerOptions o) : options(o) {}

  TestApiServerOptions options;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::atomic<uint64_t> connections_closed = 0;

  mutable std::mutex mu;                                     // store, history, watchers, faults
  std::map<std::string, std::map<std::string, Json>> store;  // plural → key → object
  int64_t rv = 1;                                            // never "0", which means "any" to a watch
  int64_t compacted_rv = 0;                                  // events at or below this RV are gone from the history
  std::deque<HistoryEntry> history;
  std::list<std::shared_ptr<Watcher>> watchers;
  Faults faults;
  std::vector<EvictionRecord> evictions;
  bool stopping = false;
  std::mt19937_64 rng{12345};

  static std::string Key(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }

  bool Roll(double rate) {  // REQUIRES: mu held
    if (rate <= 0) return false;
    return std::uniform_real_distribution<double>(0, 1)(rng) < rate;
  }

  // Records a change and fans it out. REQUIRES: mu held. `obj` already carries the new RV.
  void Commit(const ResourceType* type, const std::string& event, Json old_obj, const Json& obj) {
    HistoryEntry e{rv, type, event, std::move(old_obj), obj};
    for (const auto& w : watchers) {
      std::lock_guard<std::mutex> wl(w->mu);
      if (auto line = Transition(w->filter, e)) w->queue.push_back(std::move(*line));
      w->known_rv = rv;
      w->cv.notify_all();
    }
    history.push_back(std::move(e));
    while (history.size() > options.history_limit) {
      compacted_rv = history.front().rv;
      history.pop_front();
    }
  }

  int64_t NextRv(Json& obj) {  // REQUIRES: mu held
    ++rv;
    obj["metadata"]["resourceVersion"] = std::to_string(rv);
    return rv;
  }

  // ---- verbs (REQUIRE: mu held) ----

  Reply List(const Target& t, const httplib::Request& req) {
    Filter f;
    f.type = t.type;
    f.ns = t.ns;
    if (auto err = ParseSelector(req.get_param_value("fieldSelector"), false, f.fields))
      return Error(400, "BadRequest", *err);
    if (auto err = ParseSelector(req.get_param_value("labelSelector"), true, f.labels))
      return Error(400, "BadRequest", *err);
    Json items = Json::array();
    for (const auto& [key, obj] : store[t.type->plural]) {
      if (f.Matches(obj)) items.push_back(obj);
    }
    // `limit` is accepted and ignored: one page with everything is a valid answer (no continue).
    return {200,
            {{"kind", t.type->kind + "List"},
             {"apiVersion", t.type->ApiVersion()},
             {"metadata", {{"resourceVersion", std::to_string(rv)}}},
             {"items", items}}};
  }

  Reply Get(const Target& t) {
    auto& bucket = store[t.type->plural];
    auto it = bucket.find(Key(t.ns, t.name));
    if (it == bucket.end()) return Error(404, "NotFound", t.type->plural + " \"" + t.name + "\" not found");
    return {200, it->second};
  }

  // A pod's request for one resource as ResourceQuota counts it: Σ app containers (requests, else
  // limits), or the largest init container's if larger. Bytes for quantities such as "8Gi".
  static int64_t PodRequestOf(const Json& pod, const std::string& resource) {
    auto container_request = [&](const Json& c) -> int64_t {
      for (const char* section : {"requests", "limits"}) {
        const Json* map = c.contains("resources") && c["resources"].is_object() && c["resources"].contains(section)
                              ? &c["resources"][section]
                              : nullptr;
        if (map == nullptr || !map->is_object() || !map->contains(resource) || !(*map)[resource].is_string()) continue;
        StatusOr<int64_t> v = ParseBytes((*map)[resource].get<std::string>(), resource);
        return v.ok() ? *v : 0;
      }
      return 0;
    };
    int64_t app = 0, init = 0;
    const Json spec = pod.value("spec", Json::object());
    for (const Json& c : spec.value("containers", Json::array())) app += container_request(c);
    for (const Json& c : spec.value("initContainers", Json::array())) init = std::max(init, container_request(c));
    return std::max(app, init);
  }

  static std::string QuantityText(int64_t bytes) {
    for (const auto& [suffix, unit] : {std::pair{"Gi", int64_t{1} << 30}, std::pair{"Mi", int64_t{1} << 20}}) {
      if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
    }
    return std::to_string(bytes);
  }

  // ResourceQuota admission for a pod create: every "requests.<resource>" in a quota's spec.hard
  // of the pod's namespace must still hold with the pod added to the non-terminal pods there.
  // Refused as the real API server does (403, "exceeded quota: …"). REQUIRES: mu held.
  std::optional<Reply> QuotaAdmission(const std::string& ns, const Json& pod) {
    for (const auto& [qkey, quota] : store["resourcequotas"]) {
      if (quota["metadata"].value("namespace", "") != ns) continue;
      const Json hard = quota.contains("spec") ? quota["spec"].value("hard", Json::object()) : Json::object();
      for (const auto& [name, limit_value] : hard.items()) {
        if (name.rfind("requests.", 0) != 0 || !limit_value.is_string()) continue;
        const std::string resource = name.substr(std::string("requests.").size());
        const int64_t requested = PodRequestOf(pod, resource);
        if (requested == 0) continue;
        StatusOr<int64_t> limit = ParseBytes(limit_value.get<std::string>(), name);
        if (!limit.ok()) continue;
        int64_t used = 0;
        for (const auto& [pkey, other] : store["pods"]) {
          if (other["metadata"].value("namespace", "") != ns) continue;
          const std::string phase = other.contains("status") ? other["status"].value("phase", "") : "";
          if (phase == "Succeeded" || phase == "Failed") continue;
          used += PodRequestOf(other, resource);
        }
        if (used + requested <= *limit) continue;
        return Error(403, "Forbidden",
                     "pods \"" + pod["metadata"].value("name", "") +
                         "\" is forbidden: exceeded quota: " + quota["metadata"].value("name", "") +
                         ", requested: " + name + "=" + QuantityText(requested) + ", used: " + name + "=" +
                         QuantityText(used) + ", limited: " + name + "=" + QuantityText(*limit));
      }
    }
    return std::nullopt;
  }

  Reply Create(const Target& t, Json obj) {
    if (!obj.is_object()) return Error(400, "BadRequest", "body must be a JSON object");
    if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = Json::object();
    Json& md = obj["metadata"];
    std::string name = md.value("name", "");
    if (name.empty() && md.contains("generateName") && md["generateName"].is_string()) {
      name = md["generateName"].get<std::string>() + NewUid().substr(0, 5);
    }
    if (name.empty()) return Error(422, "Invalid", "metadata.name: Required value");
    if (t.type->namespaced) {
      const std::string body_ns = md.value("namespace", "");
      if (!body_ns.empty() && body_ns != t.ns)
        return Error(400, "BadRequest", "the namespace of the object does not match the namespace on the request");
      md["namespace"] = t.ns;
    }
    md["name"] = name;
    auto& bucket = store[t.type->plural];
    const std::string key = Key(t.ns, name);
    if (bucket.count(key)) return Error(409, "AlreadyExists", t.type->plural + " \"" + name + "\" already exists");
    if (t.type->plural == "pods") {
      if (std::optional<Reply> refused = QuotaAdmission(t.ns, obj)) return *refused;
    }
    md["uid"] = NewUid();
    md["creationTimestamp"] = FormatRfc3339(SystemClock::Instance().Now());
    obj["apiVersion"] = t.type->ApiVersion();
    obj["kind"] = t.type->kind;
    if (t.type->plural == "gpunodes") obj.erase("status");  // status subresource: ignored on create
    if (t.type->plural == "pods") obj["status"] = {{"phase", "Pending"}};
    NextRv(obj);
    bucket[key] = obj;
    Commit(t.type, "ADDED", nullptr, obj);
    return {201, obj};
  }

  // Applies a new version of an existing object (update or patch result). Checks the RV
  // precondition and the spec/status split.
  Reply Replace(const Target& t, Json& current, Json next, const std::string& expected_rv) {
    const std::string cur_rv = current["metadata"].value("resourceVersion", "");
    if (!expected_rv.empty() && expected_rv != cur_rv) {
      return Error(
          409, "Conflict",
          "Operation cannot be fulfilled on " + t.type->plural + " \"" + t.name +
              "\": the object has been modified; please apply your changes to the latest version and try again");
    }
    if (!next.is_object()) return Error(400, "BadRequest", "body must be a JSON object");
    if (t.type->status_subresource) {
      if (t.subresource == "status") {
        Json status = next.contains("status") ? next["status"] : Json();
        next = current;
        if (status.is_null())
          next.erase("status");
        else
          next["status"] = status;
      } else if (current.contains("status")) {
        next["status"] = current["status"];
      } else {
        next.erase("status");
      }
    }
    // Identity fields are the server's.
    Json md = next.contains("metadata") && next["metadata"].is_object() ? next["metadata"] : Json::object();
    for (const char* f : {"name", "namespace", "uid", "creationTimestamp"}) {
      if (current["metadata"].contains(f)) md[f] = current["metadata"][f];
    }
    next["metadata"] = md;
    next["apiVersion"] = t.type->ApiVersion();
    next["kind"] = t.type->kind;
    Json old = current;
    NextRv(next);
    current = next;
    Commit(t.type, "MODIFIED", std::move(old), current);
    return {200, current};
  }

  Json* Find(const Target& t) {
    auto& bucket = store[t.type->plural];
    auto it = bucket.find(Key(t.ns, t.name));
    return it == bucket.end() ? nullptr : &it->second;
  }

  Reply NotFound(const Target& t) { return Error(404, "NotFound", t.type->plural + " \"" + t.name + "\" not found"); }

  Reply Update(const Target& t, Json obj) {
    Json* cur = Find(t);
    if (cur == nullptr) return NotFound(t);
    if (!obj.is_object()) return Error(400, "BadRequest", "body must be a JSON object");
    const std::string rv_in = obj.value("metadata", Json::object()).value("resourceVersion", "");
    if (rv_in.empty())
      return Error(422, "Invalid", "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update");
    if (obj["metadata"].value("name", "") != t.name)
      return Error(400, "BadRequest", "the name of the object does not match the name on the URL");
    return Replace(t, *cur, std::move(obj), rv_in);
  }

  Reply Patch(const Target& t, const std::string& content_type, const std::string& body) {
    Json* cur = Find(t);
    if (cur == nullptr) return NotFound(t);
    Json patch = Json::parse(body, nullptr, false);
    if (patch.is_discarded()) return Error(400, "BadRequest", "patch body is not JSON");
    Json next;
    std::string expected_rv;
    try {
      if (content_type.rfind("application/json-patch+json", 0) == 0) {
        next = cur->patch(patch);
      } else if (content_type.rfind("application/merge-patch+json", 0) == 0 ||
                 content_type.rfind("application/strategic-merge-patch+json", 0) == 0) {
        if (!patch.is_object()) return Error(400, "BadRequest", "merge patch must be a JSON object");
        if (t.type->plural == "gpunodes" && content_type.rfind("application/strategic", 0) == 0) {
          return Error(415, "UnsupportedMediaType", "strategic merge patch is not supported on custom resources");
        }
        next = *cur;
        next.merge_patch(patch);
      } else {
        return Error(415, "UnsupportedMediaType", "unsupported patch content type " + content_type);
      }
    } catch (const Json::exception& e) {
      return Error(422, "Invalid", std::string("patch cannot be applied: ") + e.what());
    }
    // A patch that sets metadata.resourceVersion is an optimistic-concurrency precondition.
    const std::string next_rv = next.value("metadata", Json::object()).value("resourceVersion", "");
    const std::string cur_rv = (*cur)["metadata"].value("resourceVersion", "");
    if (next_rv != cur_rv) expected_rv = next_rv;
    return Replace(t, *cur, std::move(next), expected_rv);
  }

  Reply Delete(const Target& t) {
    auto& bucket = store[t.type->plural];
    auto it = bucket.find(Key(t.ns, t.name));
    if (it == bucket.end()) return NotFound(t);
    Json obj = it->second;
    bucket.erase(it);
    NextRv(obj);
    Commit(t.type, "DELETED", obj, obj);
    return {200, StatusBody(200, "", "deleted")};
  }

  Reply Bind(const Target& t, const Json& binding) {
    if (!binding.is_object()) return Error(400, "BadRequest", "Binding must be a JSON object");
    const Json md = binding.value("metadata", Json::object());
    if (md.value("name", "") != t.name)
      return Error(400, "BadRequest", "name in URL does not match name in Binding object");
    const Json target = binding.value("target", Json::object());
    const std::string kind = target.value("kind", "");
    const std::string node = target.value("name", "");
    if (!kind.empty() && kind != "Node") return Error(422, "Invalid", "target.kind: must be empty or Node");
    if (node.empty()) return Error(422, "Invalid", "target.name: Required value");
    Json* pod = Find(t);
    if (pod == nullptr) return NotFound(t);
    const std::string uid = md.value("uid", "");
    if (!uid.empty() && uid != (*pod)["metadata"].value("uid", "")) {
      return Error(
          409, "Conflict",
          "Operation cannot be fulfilled on pods \"" + t.name + "\": Precondition failed: UID in precondition: " + uid);
    }
    if ((*pod)["metadata"].contains("deletionTimestamp")) {
      return Error(409, "Conflict", "pod " + t.name + " is being deleted, cannot be assigned to a host");
    }
    const std::string bound = FieldValue(*pod, "spec.nodeName");
    if (!bound.empty()) {
      return Error(409, "Conflict", "pod " + t.name + " is already assigned to node \"" + bound + "\"");
    }
    Json next = *pod;
    next["spec"]["nodeName"] = node;
    if (md.contains("annotations") && md["annotations"].is_object()) {
      for (const auto& [k, v] : md["annotations"].items()) next["metadata"]["annotations"][k] = v;
    }
    Json cond = {{"type", "PodScheduled"},
                 {"status", "True"},
                 {"lastTransitionTime", FormatRfc3339(SystemClock::Instance().Now())}};
    Json conditions = Json::array();
    if (next["status"].contains("conditions") && next["status"]["conditions"].is_array()) {
      for (const Json& c : next["status"]["conditions"])
        if (c.value("type", "") != "PodScheduled") conditions.push_back(c);
    }
    conditions.push_back(cond);
    next["status"]["conditions"] = conditions;
    Json old = *pod;
    NextRv(next);
    *pod = next;
    Commit(t.type, "MODIFIED", std::move(old), *pod);
    return {201, StatusBody(201, "", "")};
  }

  // The PodDisruptionBudgets of the pod's namespace whose spec.selector.matchLabels the pod's
  // labels satisfy (an empty selector selects every pod, as in policy/v1). REQUIRES: mu held.
  std::vector<Json*> BudgetsOf(const Json& pod) {
    std::vector<Json*> out;
    const std::string ns = FieldValue(pod, "metadata.namespace");
    const Json labels = pod["metadata"].value("labels", Json::object());
    for (auto& [key, pdb] : store["poddisruptionbudgets"]) {
      if (FieldValue(pdb, "metadata.namespace") != ns) continue;
      const Json selector = pdb.contains("spec") ? pdb["spec"].value("selector", Json::object()) : Json::object();
      const Json match = selector.value("matchLabels", Json::object());
      bool selected = match.is_object();
      for (const auto& [k, v] : match.items()) {
        selected = selected && labels.is_object() && labels.contains(k) && labels[k] == v;
      }
      if (selected) out.push_back(&pdb);
    }
    return out;
  }

  // policy/v1 Eviction, as the real subresource decides it: the pod's one PodDisruptionBudget must
  // allow a disruption (status.disruptionsAllowed > 0, which the eviction then spends; the test
  // sets it, there is no disruption controller), else 429 with a DisruptionBudget cause. A pod on a
  // node is then deleted gracefully (deletionTimestamp set, as until its kubelet confirms; nothing
  // here confirms), one on no node at once.
  Reply Evict(const Target& t, const Json& eviction) {
    Reply r = EvictOnce(t, eviction);
    evictions.push_back({t.ns, t.name, eviction, r.code});
    return r;
  }

  Reply EvictOnce(const Target& t, const Json& eviction) {
    if (!eviction.is_object() || eviction.value("kind", "") != "Eviction" ||
        eviction.value("apiVersion", "") != "policy/v1") {
      return Error(400, "BadRequest", "the body of an eviction must be a policy/v1 Eviction");
    }
    const Json md = eviction.value("metadata", Json::object());
    if (md.value("name", "") != t.name) {
      return Error(400, "BadRequest", "name in URL does not match name in Eviction object");
    }
    Json* pod = Find(t);
    if (pod == nullptr) return NotFound(t);
    const std::string uid = FieldValue(eviction, "deleteOptions.preconditions.uid");
    if (!uid.empty() && uid != FieldValue(*pod, "metadata.uid")) {
      return Error(409, "Conflict",
                   "Operation cannot be fulfilled on pods \"" + t.name +
                       "\": Precondition failed: UID in precondition: " + uid +
                       ", UID in object meta: " + FieldValue(*pod, "metadata.uid"));
    }
    if ((*pod)["metadata"].contains("deletionTimestamp")) return {201, StatusBody(201, "", "")};
    std::vector<Json*> budgets = BudgetsOf(*pod);
    if (budgets.size() > 1) {
      return Error(500, "InternalError",
                   "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.");
    }
    if (budgets.size() == 1) {
      Json& pdb = *budgets[0];
      const Json allowed = pdb.contains("status") ? pdb["status"].value("disruptionsAllowed", Json(0)) : Json(0);
      const int64_t left = allowed.is_number_integer() ? allowed.get<int64_t>() : 0;
      const std::string pdb_name = FieldValue(pdb, "metadata.name");
      if (left <= 0) {
        Reply refused =
            Error(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.");
        refused.body["details"] = {
            {"causes", Json::array({Json{{"reason", "DisruptionBudget"},
                                         {"message", "The disruption budget " + pdb_name +
                                                         " does not allow a disruption now (disruptionsAllowed: " +
                                                         std::to_string(left) + ")"}}})},
            {"retryAfterSeconds", 10}};
        return refused;
      }
      Json old = pdb;
      pdb["status"]["disruptionsAllowed"] = left - 1;
      NextRv(pdb);
      Commit(TypeOf("poddisruptionbudgets"), "MODIFIED", std::move(old), pdb);
    }
    if (FieldValue(*pod, "spec.nodeName").empty()) {
      Delete(t);
    } else {
      Json old = *pod;
      const Json grace = (*pod)["spec"].value("terminationGracePeriodSeconds", Json(30));
      (*pod)["metadata"]["deletionTimestamp"] = FormatRfc3339(SystemClock::Instance().Now());
      (*pod)["metadata"]["deletionGracePeriodSeconds"] = grace.is_number_integer() ? grace : Json(30);
      NextRv(*pod);
      Commit(t.type, "MODIFIED", std::move(old), *pod);
    }
    return {201, StatusBody(201, "", "")};
  }

  // ---- HTTP ----

  void Send(httplib::Response& res, const Reply& r) {
    res.status = r.code;
    res.set_content(r.body.dump(), "application/json");
  }

  void Handle(const std::string& method, const httplib::Request& req, httplib::Response& res) {
    std::optional<Target> t = ParsePath(req.path);
    if (!t) return Send(res, Error(404, "NotFound", "the server could not find the requested resource " + req.path));
    const bool is_watch = method == "GET" && t->name.empty() &&
                          (req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true");
    if (is_watch) {
      bool refuse = false;
      {
        std::lock_guard<std::mutex> l(mu);
        const bool targeted = faults.path_contains.empty() || req.path.find(faults.path_contains) != std::string::npos;
        refuse = targeted && Roll(faults.watch_error_rate);
      }
      if (refuse) return Send(res, Error(500, "InternalError", "injected fault: watch refused"));
      return Watch(*t, req, res);
    }
    const bool is_write = method != "GET";
    int latency = 0;
    bool error_after = false;
    {
      std::lock_guard<std::mutex> l(mu);
      const bool targeted = faults.path_contains.empty() || req.path.find(faults.path_contains) != std::string::npos;
      if (targeted) {
        latency = faults.latency_ms;
        if (Roll(faults.forbidden_rate)) {
          Send(res, Error(403, "Forbidden", "injected fault: forbidden"));
          latency = -1;
        } else if (Roll(faults.error_rate)) {
          Send(res, Error(500, "InternalError", "injected fault: internal error"));
          latency = -1;
        } else if (is_write && Roll(faults.conflict_rate)) {
          Send(res, Error(409, "Conflict",
                          "injected fault: the object has been modified; please apply your changes to the latest "
                          "version and try again"));
          latency = -1;
        } else if (is_write) {
          error_after = Roll(faults.error_after_commit_rate);
        }
      }
    }
    if (latency > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency));
    if (latency < 0) return;
    Json body;
    if (method == "POST" || method == "PUT") {
      body = Json::parse(req.body, nullptr, false);
      if (body.is_discarded()) return Send(res, Error(400, "BadRequest", "request body is not valid JSON"));
    }
    Reply r{405, StatusBody(405, "MethodNotAllowed", "method not allowed")};
    {
      std::lock_guard<std::mutex> l(mu);
      if (method == "GET")
        r = t->name.empty() ? List(*t, req) : Get(*t);
      else if (method == "POST" && t->subresource == "binding")
        r = Bind(*t, body);
      else if (method == "POST" && t->subresource == "eviction")
        r = Evict(*t, body);
      else if (method == "POST" && t->name.empty()) {
        if (t->type->namespaced && t->ns.empty())
          r = Error(405, "MethodNotAllowed", "create needs a namespace");
        else
          r = Create(*t, std::move(body));
      } else if (method == "PUT" && !t->name.empty() && t->subresource != "binding" && t->subresource != "eviction")
        r = Update(*t, std::move(body));
      else if (method == "PATCH" && !t->name.empty() && t->subresource != "binding" && t->subresource != "eviction") {
        r = Patch(*t, req.get_header_value("Content-Type"), req.body);
      } else if (method == "DELETE" && !t->name.empty() && t->subresource.empty())
        r = Delete(*t);
    }
    if (error_after && r.code < 300)
      r = Error(500, "InternalError", "injected fault: the write was applied but the response was lost");
    Send(res, r);
  }

  void Watch(const Target& t, const httplib::Request& req, httplib::Response& res) {
    auto w = std::make_shared<Watcher>();
    w->filter.type = t.type;
    w->filter.ns = t.ns;
    if (auto err = ParseSelector(req.get_param_value("fieldSelector"), false, w->filter.fields))
      return Send(res, Error(400, "BadRequest", *err));
    if (auto err = ParseSelector(req.get_param_value("labelSelector"), true, w->filter.labels))
      return Send(res, Error(400, "BadRequest", *err));
    w->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    const std::string rv_param = req.get_param_value("resourceVersion");
    int timeout_s = 1800;
    if (req.has_param("timeoutSeconds")) {
      try {
        timeout_s = std::stoi(req.get_param_value("timeoutSeconds"));
      } catch (const std::exception&) {
        return Send(res, Error(400, "BadRequest", "timeoutSeconds must be an integer"));
      }
    }
    {
      std::lock_guard<std::mutex> l(mu);
      std::lock_guard<std::mutex> wl(w->mu);
      if (rv_param.empty() || rv_param == "0") {
        // "Get State and Start at Most Recent": synthetic ADDED for every matching object.
        for (const auto& [key, obj] : store[t.type->plural]) {
          if (w->filter.Matches(obj)) w->queue.push_back(EventLine("ADDED", obj));
        }
      } else {
        int64_t from = 0;
        try {
          from = std::stoll(rv_param);
        } catch (const std::exception&) {
          return Send(res,
                      Error(400, "BadRequest", "resourceVersion \"" + rv_param + "\" is not valid for this server"));
        }
        if (from < compacted_rv) {
          // In-band, as the watch cache does it.
          w->queue.push_back(EventLine("ERROR", StatusBody(410, "Expired",
                                                           "too old resource version: " + rv_param + " (" +
                                                               std::to_string(compacted_rv + 1) + ")")));
          w->closed = true;
        } else {
          for (const HistoryEntry& e : history) {
            if (e.rv <= from) continue;
            if (auto line = Transition(w->filter, e)) w->queue.push_back(std::move(*line));
          }
        }
      }
      w->known_rv = rv;
      if (!w->closed) watchers.push_back(w);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    const auto bookmark_every = options.bookmark_interval;
    auto last_bookmark = std::chrono::steady_clock::now();
    res.status = 200;
    res.set_chunked_content_provider(
        "application/json",
        [w, deadline, bookmark_every, last_bookmark](size_t, httplib::DataSink& sink) mutable {
          std::unique_lock<std::mutex> wl(w->mu);
          for (;;) {
            while (!w->queue.empty()) {
              std::string line = std::move(w->queue.front());
              w->queue.pop_front();
              wl.unlock();
              if (!sink.write(line.data(), line.size())) return false;
              wl.lock();
            }
            if (w->closed) {
              // ERROR-terminated streams end cleanly; dropped ones end abruptly (no final chunk).
              return false;
            }
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) {
              wl.unlock();
              sink.done();
              return true;
            }
            if (w->bookmarks && now - last_bookmark >= bookmark_every) {
              last_bookmark = now;
              std::string line =
                  EventLine("BOOKMARK", {{"kind", w->filter.type->kind},
                                         {"apiVersion", w->filter.type->ApiVersion()},
                                         {"metadata", {{"resourceVersion", std::to_string(w->known_rv)}}}});
              wl.unlock();
              if (!sink.write(line.data(), line.size())) return false;
              wl.lock();
              continue;
            }
            w->cv.wait_until(wl, std::min(deadline, last_bookmark + bookmark_every));
          }
        },
        [this, w](bool) {
          std::lock_guard<std::mutex> l(mu);
          watchers.remove(w);
        });
  }
};

TestApiServer::TestApiServer(TestApiServerOptions options) : impl_(std::make_unique<Impl>(options)) {}

TestApiServer::~TestApiServer() { Stop(); }

StatusOr<int> TestApiServer::Start(const std::string& host, int port) {
  Impl* impl = impl_.get();
  GPUPACK_CHECK(!impl->thread.joinable());
  const int threads = impl->options.worker_threads;
  impl->server.new_task_queue = [impl, threads] {
    return new CountingThreadPool(static_cast<size_t>(threads), impl->connections_closed);
  };
  impl->server.set_keep_alive_max_count(100);
  impl->server.set_keep_alive_timeout(impl->options.keep_alive_timeout.count());
  for (const char* m : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    const std::string method = m;
    auto handler = [impl, method](const httplib::Request& req, httplib::Response& res) {
      impl->Handle(method, req, res);
    };
    if (method == "GET") impl->server.Get(R"(/(api|apis)/.*)", handler);
    if (method == "POST") impl->server.Post(R"(/(api|apis)/.*)", handler);
    if (method == "PUT") impl->server.Put(R"(/(api|apis)/.*)", handler);
    if (method == "PATCH") impl->server.Patch(R"(/(api|apis)/.*)", handler);
    if (method == "DELETE") impl->server.Delete(R"(/(api|apis)/.*)", handler);
  }
  impl->server.Get("/healthz",
                   [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
  impl->server.Get("/admin/faults", [impl](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> l(impl->mu);
    res.set_content(impl->faults.ToJson().dump(), "application/json");
  });
  impl->server.Post("/admin/faults", [this](const httplib::Request& req, httplib::Response& res) {
    auto f = Faults::FromJson(Json::parse(req.body, nullptr, false));
    if (!f.ok()) {
      res.status = 400;
      res.set_content(f.status().message(), "text/plain");
      return;
    }
    SetFaults(*f);
    res.set_content("{}", "application/json");
  });
  impl->server.Post("/admin/drop-watches", [this](const httplib::Request&, httplib::Response& res) {
    DropWatches();
    res.set_content("{}", "application/json");
  });
  impl->server.Post("/admin/compact", [this](const httplib::Request&, httplib::Response& res) {
    CompactHistory();
    res.set_content("{}", "application/json");
  });
  impl->server.Get("/admin/evictions", [this](const httplib::Request&, httplib::Response& res) {
    Json out = Json::array();
    for (const EvictionRecord& e : evictions()) {
      out.push_back({{"namespace", e.ns}, {"pod", e.pod}, {"body", e.body}, {"code", e.code}});
    }
    res.set_content(out.dump(), "application/json");
  });
  impl->server.Get("/admin/stats", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Json{{"resourceVersion", resource_version()}, {"openWatches", open_watches()}}.dump(),
                    "application/json");
  });
  const int bound =
      port == 0 ? impl->server.bind_to_any_port(host) : (impl->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return Status::Unavailable("test API server cannot listen on " + host + ":" + std::to_string(port));
  impl->port = bound;
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  // stop() is a no-op until the server runs, so a Stop() right after Start() must not race it.
  while (!impl->server.is_running()) std::this_thread::yield();
  return bound;
}

void TestApiServer::Stop() {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  DropWatches();
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string TestApiServer::url() const { return "http://127.0.0.1:" + std::to_string(impl_->port); }

void TestApiServer::SetFaults(const Faults& faults) {
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->faults = faults;
}

void TestApiServer::DropWatches() {
  std::lock_guard<std::mutex> l(impl_->mu);
  for (const auto& w : impl_->watchers) {
    std::lock_guard<std::mutex> wl(w->mu);
    w->closed = true;
    w->cv.notify_all();
  }
  impl_->watchers.clear();
}

void TestApiServer::CompactHistory() {
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->compacted_rv = impl_->rv;
  impl_->history.clear();
}

int64_t TestApiServer::resource_version() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->rv;
}

std::vector<EvictionRecord> TestApiServer::evictions() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->evictions;
}

int TestApiServer::open_watches() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return static_cast<int>(impl_->watchers.size());
}

uint64_t TestApiServer::connections_closed() const { return impl_->connections_closed.load(); }

Status WriteKubeconfig(const std::string& path, const std::string& server_url) {
  std::ofstream out(path);
  if (!out) return Status::Unavailable("cannot write kubeconfig " + path);
  out << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
      << "clusters:\n- name: test\n  cluster:\n    server: " << server_url << "\n"
      << "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\n"
      << "users:\n- name: test\n  user: {}\n";
  out.close();
  if (!out) return Status::Unavailable("cannot write kubeconfig " + path);
  return Status::Ok();
}

}  // namespace gpupack::e2e
