#include "sim/extender_policy.h"

#include <httplib.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "api/annotations.h"
#include "api/extender_types.h"
#include "api/pod_annotations.h"
#include "placement/decision.h"
#include "placement/placement.h"

namespace gpupack::sim {
namespace {

class ExtenderPolicy final : public SimPolicy {
 public:
  ExtenderPolicy(std::string base, std::string prefix, int weight)
      : client_(base), base_(base), prefix_(std::move(prefix)), weight_(weight) {
    client_.set_keep_alive(true);
    // Header and body go out as separate writes; without TCP_NODELAY the body waits for the
    // delayed ACK of the header (~40 ms per request on Linux).
    client_.set_tcp_nodelay(true);
    client_.set_connection_timeout(5);
    client_.set_read_timeout(30);
  }

  Status Start(const ClusterState&, const std::vector<model::Node>& nodes, std::span<const int>) override {
    // Mirror the extender's decision with its default settings: the same module, fed the same
    // pods, refreshed at the same pods (the first time before the first pod, as the extender
    // does at its first filter).
    decision_.emplace(model::PolicyKind::kFgd, placement::PlacementOptions{}, placement::DecisionOptions{});
    nodes_ = nodes;
    RebuildMirror();
    return Status::Ok();
  }

  StatusOr<std::optional<Choice>> Choose(const ClusterState& s, const SimPod& pod, Rng& rng) override {
    // kube-scheduler's own fit first: with no node left it does not call the extender.
    std::vector<std::string> names;
    for (int n = 0; n < static_cast<int>(s.nodes().size()); ++n) {
      if (s.HostFits(n, pod.demand)) names.push_back(s.nodes()[n].name);
    }
    if (names.empty()) return std::optional<Choice>();
    // The extender counts the pod at this filter, before it ranks it (once per UID: not again at
    // the bind).
    if (decision_->Observe(ArrivalRequest(pod))) RebuildMirror();
    api::ExtenderArgs args;
    args.pod = PodJson(*pod.request, pod.name);
    args.node_names = names;
    const std::string body = api::EncodeExtenderArgs(args);

    GPUPACK_ASSIGN_OR_RETURN(std::string filtered_body, Post("/filter", body));
    GPUPACK_ASSIGN_OR_RETURN(api::ExtenderFilterResult filtered, api::DecodeFilterResult(filtered_body));
    if (!filtered.error.empty()) return Status::Unavailable("extender filter error: " + filtered.error);
    for (const auto& [node, reason] : filtered.failed_and_unresolvable_nodes) {
      // The replayed cluster and the extender's disagree: every result would be meaningless.
      if (reason == api::kUnknownNodeReason) {
        return Status::FailedPrecondition("the extender at " + base_ + prefix_ + " does not know node " + node +
                                          " of the replayed cluster; start it on the same cluster (gpupack-sim "
                                          "--write-cluster FILE, then gpupack-extender --standalone-cluster FILE)");
      }
    }
    if (!filtered.node_names.has_value() || filtered.node_names->empty()) return std::optional<Choice>();

    args.node_names = filtered.node_names;
    GPUPACK_ASSIGN_OR_RETURN(std::string prio_body, Post("/prioritize", api::EncodeExtenderArgs(args)));
    GPUPACK_ASSIGN_OR_RETURN(api::HostPriorityList prio, api::DecodeHostPriorityList(prio_body));
    std::map<std::string, int64_t> totals;
    for (const auto& name : *filtered.node_names) totals[name] = 0;
    for (const auto& hp : prio) {
      if (totals.count(hp.host)) totals[hp.host] += hp.score * weight_ * 10;
    }
    // Highest total; ties uniformly at random (kube-scheduler's selectHost reservoir).
    std::string chosen;
    int64_t best = -1;
    int ties = 0;
    for (const auto& name : *filtered.node_names) {
      const int64_t t = totals[name];
      if (t > best) {
        best = t;
        chosen = name;
        ties = 1;
      } else if (t == best && rng.Below(++ties) == 0) {
        chosen = name;
      }
    }
    int node = -1;
    for (int n = 0; n < static_cast<int>(s.nodes().size()); ++n) {
      if (s.nodes()[n].name == chosen) node = n;
    }
    if (node < 0) return Status::Internal("extender returned unknown node \"" + chosen + "\"");

    api::ExtenderBindingArgs bind{pod.name, "default", pod.name, chosen};
    GPUPACK_ASSIGN_OR_RETURN(std::string bind_body, Post("/bind", api::EncodeBindingArgs(bind)));
    GPUPACK_ASSIGN_OR_RETURN(api::ExtenderBindingResult bound, api::DecodeBindingResult(bind_body));
    if (!bound.error.empty()) {
      // A refused bind leaves the pod unscheduled, as kube-scheduler would (one attempt per pod).
      return std::optional<Choice>();
    }
    placement::NodeEvaluation eval = mirror_->Evaluate(nodes_[node], summaries_[node], *pod.request);
    if (!eval.verdict.fits()) {
      return Status::Internal("extender bound " + pod.name + " to " + chosen +
                              " where the simulator's mirror says: " + eval.verdict.Message());
    }
    Choice choice;
    choice.node = node;
    for (const auto& cp : eval.placement.containers) {
      if (!cp.init) choice.slots.insert(choice.slots.end(), cp.device_slots.begin(), cp.device_slots.end());
    }
    pending_ = std::move(eval.placement);
    return std::optional<Choice>(std::move(choice));
  }

  void Committed(const SimPod& pod, const Choice& choice) override {
    Status st = placement::ApplyPlacement(nodes_[choice.node], ArrivalRequest(pod), pending_, mirror_->options());
    GPUPACK_CHECK(st.ok());
    summaries_[choice.node] = mirror_->Summarize(nodes_[choice.node]);
  }

 private:
  // The extender's device choice as of its last policy refresh, rebuilt as it rebuilds.
  void RebuildMirror() {
    mirror_.emplace(decision_->Refresh([&](const std::function<void(const model::Node&)>& visit) {
      for (const model::Node& node : nodes_) visit(node);
    }));
    summaries_.resize(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) summaries_[n] = mirror_->Summarize(nodes_[n]);
  }

  StatusOr<std::string> Post(const std::string& verb, const std::string& body) {
    auto res = client_.Post(prefix_ + verb, body, "application/json");
    if (!res) {
      return Status::Unavailable("cannot reach the extender at " + base_ + prefix_ + verb + ": " +
                                 TransportFailure(res.error()));
    }
    if (res->status != 200) {
      return Status::Unavailable("extender " + verb + ": HTTP " + std::to_string(res->status) + ": " + res->body);
    }
    return res->body;
  }

  // What went wrong, in words, for the httplib errors a replay can meet.
  static std::string TransportFailure(httplib::Error error) {
    switch (error) {
      case httplib::Error::Connection:
        return "connection failed (refused, or no such host: is gpupack-extender running and listening there?)";
      case httplib::Error::ConnectionTimeout:
        return "no connection within 5 s";
      case httplib::Error::Read:
        return "no complete reply within 30 s, or the connection closed while reading it";
      case httplib::Error::Write:
        return "the connection failed while sending the request";
      default:
        return "HTTP client error " + httplib::to_string(error);
    }
  }

  httplib::Client client_;
  std::string base_;  // scheme, host and port, for messages
  std::string prefix_;
  int weight_;
  std::optional<placement::Decision> decision_;
  std::optional<placement::Policy> mirror_;
  std::vector<model::Node> nodes_;
  std::vector<placement::NodeSummary> summaries_;
  model::Placement pending_;
};

}  // namespace

nlohmann::json PodJson(const model::PodRequest& request, const std::string& name) {
  nlohmann::json limits = nlohmann::json::object();
  nlohmann::json requests = nlohmann::json::object();
  requests["cpu"] = std::to_string(request.cpu_milli) + "m";
  requests["memory"] = std::to_string(request.memory_bytes);
  for (const auto& c : request.containers) {
    if (c.init || c.device_count == 0) continue;
    limits[std::string(api::kResourceGpu)] = std::to_string(c.device_count);
    if (c.mem_per_device_mib > 0) {
      limits[std::string(api::kResourceGpuMemory)] = std::to_string(c.mem_per_device_mib * c.device_count) + "Mi";
    }
  }
  nlohmann::json annotations = api::WritePodAnnotations(request);
  nlohmann::json container = {{"name", "main"}, {"image", "sim"}, {"resources", {{"requests", requests}}}};
  if (!limits.empty()) container["resources"]["limits"] = limits;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", name}, {"annotations", annotations}}},
          {"spec", {{"schedulerName", "gpupack"}, {"containers", nlohmann::json::array({container})}}}};
}

StatusOr<std::unique_ptr<SimPolicy>> MakeExtenderPolicy(const std::string& url, int weight) {
  const size_t scheme = url.find("://");
  if (url.rfind("http://", 0) != 0 || scheme == std::string::npos) {
    return Status::InvalidArgument("--extender: \"" + url + "\" is not an http:// URL");
  }
  const size_t path = url.find('/', scheme + 3);
  std::string base = url.substr(0, path);
  std::string prefix = path == std::string::npos ? "" : url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (base.size() <= 7) return Status::InvalidArgument("--extender: \"" + url + "\" has no host");
  return std::unique_ptr<SimPolicy>(new ExtenderPolicy(base, prefix, weight));
}

}  // namespace gpupack::sim
