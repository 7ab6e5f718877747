#include "api/extender_types.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <set>

namespace gpupack::api {

namespace {

using nlohmann::json;

Status Bad(const std::string& where, const std::string& what) { return Status::InvalidArgument(where + ": " + what); }

// Go's encoding/json matches field names case-insensitively; an exact match is tried first.
// Null counts as absent. J is json or const json.
template <typename J>
J* Field(J& obj, std::string_view name) {
  auto it = obj.find(name);
  if (it != obj.end()) return it->is_null() ? nullptr : &*it;
  for (auto i = obj.begin(); i != obj.end(); ++i) {
    if (SameFieldName(i.key(), name)) return i->is_null() ? nullptr : &*i;
  }
  return nullptr;
}

StatusOr<json> ParseObject(std::string_view body, const char* type) {
  // nlohmann reads a NUL byte as the end of its input, so `{}\0garbage` would parse; JSON allows a
  // NUL nowhere (inside a string it must be escaped).
  if (body.find('\0') != std::string_view::npos) return Bad(type, "body is not valid JSON");
  // Go reads the last of two fields matching case-insensitively, a parsed object keeps one: a body
  // naming a top-level field twice (never one kube-scheduler sends) is refused, not guessed at.
  std::vector<std::string> keys;
  std::optional<std::string> twice;
  const json::parser_callback_t note_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::key || depth != 1 || twice) return true;
    const std::string& key = parsed.get_ref<const std::string&>();
    if (std::any_of(keys.begin(), keys.end(), [&](const std::string& seen) { return SameFieldName(seen, key); }))
      twice = key;
    keys.push_back(key);
    return true;
  };
  json doc = json::parse(body, note_key, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad(type, "body is not valid JSON");
  if (!doc.is_object()) return Bad(type, "body must be a JSON object");
  if (twice) return Bad(type, "field \"" + *twice + "\" appears twice");
  return doc;
}

Status ReadString(const json& obj, std::string_view name, const std::string& where, std::string& out) {
  const json* v = Field(obj, name);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return Bad(where + "." + std::string(name), "must be a string");
  out = v->get<std::string>();
  return Status::Ok();
}

// Go refuses 5.0 for an int64; so do we.
Status ReadInt(const json& obj, std::string_view name, const std::string& where, int64_t& out) {
  const json* v = Field(obj, name);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number_integer()) return Bad(where + "." + std::string(name), "must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return Bad(where + "." + std::string(name), "out of int64 range");
  }
  out = v->get<int64_t>();
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ReadNames(const json& arr, const std::string& where) {
  if (!arr.is_array()) return Bad(where, "must be an array of strings");
  std::vector<std::string> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_string()) return Bad(where + "[" + std::to_string(i) + "]", "must be a string");
    out.push_back(arr[i].get<std::string>());
    if (out.back().empty()) return Bad(where + "[" + std::to_string(i) + "]", "empty node name");
  }
  // Sorting views is several times cheaper than a set of 5,000 names.
  std::vector<std::string_view> sorted(out.begin(), out.end());
  std::sort(sorted.begin(), sorted.end());
  auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) return Bad(where, "node \"" + std::string(*twice) + "\" appears twice");
  return out;
}

std::string PodUid(const json& pod) {
  if (!pod.is_object()) return {};
  const json* meta = Field(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return {};
  const json* uid = Field(*meta, "uid");
  return uid != nullptr && uid->is_string() ? uid->get<std::string>() : std::string();
}

StatusOr<WireNode> ReadWireNode(const json& item, const std::string& where) {
  if (!item.is_object()) return Bad(where, "must be a Node object");
  const json* meta = Field(item, "metadata");
  if (meta == nullptr || !meta->is_object()) return Bad(where + ".metadata", "missing or not an object");
  const json* name = Field(*meta, "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return Bad(where + ".metadata.name", "missing, empty or not a string");
  }
  return WireNode{name->get<std::string>(), item.dump(-1, ' ', false, json::error_handler_t::replace)};
}

StatusOr<std::vector<WireNode>> ReadNodeList(const json& list, const std::string& where) {
  if (!list.is_object()) return Bad(where, "must be a NodeList object");
  std::vector<WireNode> out;
  const json* items = Field(list, "items");
  if (items == nullptr) return out;
  if (!items->is_array()) return Bad(where + ".items", "must be an array");
  out.reserve(items->size());
  std::set<std::string> seen;
  for (size_t i = 0; i < items->size(); ++i) {
    GPUPACK_ASSIGN_OR_RETURN(WireNode node, ReadWireNode((*items)[i], where + ".items[" + std::to_string(i) + "]"));
    if (!seen.insert(node.name).second) return Bad(where + ".items", "node \"" + node.name + "\" appears twice");
    out.push_back(std::move(node));
  }
  return out;
}

StatusOr<std::map<std::string, MetaVictims>> ReadVictims(const json& map, const std::string& where, bool meta) {
  if (!map.is_object()) return Bad(where, "must be an object keyed by node name");
  std::map<std::string, MetaVictims> out;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string vwhere = where + "[\"" + it.key() + "\"]";
    MetaVictims victims;
    if (!it->is_null()) {
      if (!it->is_object()) return Bad(vwhere, "must be an object");
      GPUPACK_RETURN_IF_ERROR(ReadInt(*it, "NumPDBViolations", vwhere, victims.num_pdb_violations));
      if (const json* pods = Field(*it, "Pods")) {
        if (!pods->is_array()) return Bad(vwhere + ".Pods", "must be an array");
        for (size_t i = 0; i < pods->size(); ++i) {
          const json& p = (*pods)[i];
          const std::string pwhere = vwhere + ".Pods[" + std::to_string(i) + "]";
          if (p.is_null()) continue;
          if (!p.is_object()) return Bad(pwhere, "must be an object");
          std::string uid;
          if (meta) {
            GPUPACK_RETURN_IF_ERROR(ReadString(p, "UID", pwhere, uid));
          } else {
            uid = PodUid(p);
          }
          if (uid.empty()) return Bad(pwhere, meta ? "UID missing or empty" : "metadata.uid missing or empty");
          victims.pod_uids.push_back(std::move(uid));
        }
      }
    }
    out.emplace(it.key(), std::move(victims));
  }
  return out;
}

json MetaVictimsJson(const std::map<std::string, MetaVictims>& victims) {
  json out = json::object();
  for (const auto& [node, v] : victims) {
    json pods = json::array();
    for (const std::string& uid : v.pod_uids) pods.push_back(json{{"UID", uid}});
    out[node] = json{{"Pods", std::move(pods)}, {"NumPDBViolations", v.num_pdb_violations}};
  }
  return out;
}

// Every dump replaces invalid UTF-8 instead of throwing: a reply must never fail to encode.
// Appends `"Key":` then the value; the encoders build their documents by hand so the field
// order matches Go's (struct order) and large echoed Nodes are not re-parsed.
void Key(std::string& out, std::string_view key) {
  out += '"';
  out += key;
  out += "\":";
}

void AppendNodeList(std::string& out, const std::optional<std::vector<WireNode>>& nodes) {
  if (!nodes) {
    out += "null";
    return;
  }
  out += "{\"metadata\":{},\"items\":[";
  for (size_t i = 0; i < nodes->size(); ++i) {
    if (i > 0) out += ',';
    out += (*nodes)[i].raw;
  }
  out += "]}";
}

// A JSON string literal. Hand-written because building a json value per node name costs an
// allocation each, and a filter reply can list 5,000 names.
// A character JSON takes as it is in a string.
inline bool PlainInJson(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c >= 0x20 && c != '"' && c != '\\';
}

void AppendString(std::string& out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  while (!text.empty()) {
    // Runs of characters that need no escape (all of a node name) go in with one append.
    const size_t run = static_cast<size_t>(
        std::find_if_not(text.begin(), text.end(), [](char ch) { return PlainInJson(ch); }) - text.begin());
    out.append(text.data(), run);
    if (run == text.size()) break;
    const auto c = static_cast<unsigned char>(text[run]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += text[run];
    } else {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
    text.remove_prefix(run + 1);
  }
  out += '"';
}

// Node names and our messages are valid UTF-8 (the decoders refuse anything else), so escaping
// quotes, backslashes and control characters is all JSON needs.
void AppendMessage(std::string& out, std::string_view text) {
  if (text.find('%') == std::string_view::npos) return AppendString(out, text);
  AppendString(out, SchedulerSafeMessage(text));
}

// Node name → message: the messages as AppendMessage writes them.
void AppendMessageMap(std::string& out, const FailedNodesMap& map) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : map) {
    if (!first) out += ',';
    first = false;
    AppendString(out, key);
    out += ':';
    AppendMessage(out, value);
  }
  out += '}';
}

void AppendNames(std::string& out, const std::optional<std::vector<std::string>>& names) {
  if (!names) {
    out += "null";
    return;
  }
  out += '[';
  for (size_t i = 0; i < names->size(); ++i) {
    if (i > 0) out += ',';
    AppendString(out, (*names)[i]);
  }
  out += ']';
}

}  // namespace

StatusOr<ExtenderArgs> DecodeExtenderArgs(std::string_view body) {
  GPUPACK_ASSIGN_OR_RETURN(json doc, ParseObject(body, "ExtenderArgs"));
  ExtenderArgs args;
  if (json* pod = Field(doc, "Pod")) {
    if (!pod->is_object()) return Bad("ExtenderArgs.Pod", "must be an object");
    args.pod = std::move(*pod);
  }
  if (const json* nodes = Field(doc, "Nodes")) {
    GPUPACK_ASSIGN_OR_RETURN(args.nodes, ReadNodeList(*nodes, "ExtenderArgs.Nodes"));
  }
  if (const json* names = Field(doc, "NodeNames")) {
    GPUPACK_ASSIGN_OR_RETURN(args.node_names, ReadNames(*names, "ExtenderArgs.NodeNames"));
  }
  return args;
}

StatusOr<ExtenderBindingArgs> DecodeBindingArgs(std::string_view body) {
  GPUPACK_ASSIGN_OR_RETURN(json doc, ParseObject(body, "ExtenderBindingArgs"));
  ExtenderBindingArgs args;
  const std::string where = "ExtenderBindingArgs";
  GPUPACK_RETURN_IF_ERROR(ReadString(doc, "PodName", where, args.pod_name));
  GPUPACK_RETURN_IF_ERROR(ReadString(doc, "PodNamespace", where, args.pod_namespace));
  GPUPACK_RETURN_IF_ERROR(ReadString(doc, "PodUID", where, args.pod_uid));
  GPUPACK_RETURN_IF_ERROR(ReadString(doc, "Node", where, args.node));
  return args;
}

StatusOr<ExtenderPreemptionArgs> DecodePreemptionArgs(std::string_view body) {
  GPUPACK_ASSIGN_OR_RETURN(json doc, ParseObject(body, "ExtenderPreemptionArgs"));
  ExtenderPreemptionArgs args;
  if (json* pod = Field(doc, "Pod")) {
    if (!pod->is_object()) return Bad("ExtenderPreemptionArgs.Pod", "must be an object");
    args.pod = std::move(*pod);
  }
  if (const json* meta = Field(doc, "NodeNameToMetaVictims")) {
    GPUPACK_ASSIGN_OR_RETURN(args.victims, ReadVictims(*meta, "ExtenderPreemptionArgs.NodeNameToMetaVictims", true));
  } else if (const json* full = Field(doc, "NodeNameToVictims")) {
    GPUPACK_ASSIGN_OR_RETURN(args.victims, ReadVictims(*full, "ExtenderPreemptionArgs.NodeNameToVictims", false));
  }
  return args;
}

std::string SchedulerSafeMessage(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == '%') {
      out += "\xEF\xBC\x85";  // U+FF05 FULLWIDTH PERCENT SIGN
    } else {
      out += c;
    }
  }
  return out;
}

std::string EncodeFilterResult(const ExtenderFilterResult& result) {
  std::string out = "{";
  Key(out, "Nodes");
  AppendNodeList(out, result.nodes);
  out += ',';
  Key(out, "NodeNames");
  AppendNames(out, result.node_names);
  out += ',';
  Key(out, "FailedNodes");
  AppendMessageMap(out, result.failed_nodes);
  out += ',';
  Key(out, "FailedAndUnresolvableNodes");
  AppendMessageMap(out, result.failed_and_unresolvable_nodes);
  out += ',';
  Key(out, "Error");
  AppendMessage(out, result.error);
  out += '}';
  return out;
}

std::string EncodeHostPriorityList(const HostPriorityList& list) {
  std::vector<std::string_view> hosts(list.size());
  std::vector<int64_t> scores(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    hosts[i] = list[i].host;
    scores[i] = list[i].score;
  }
  return EncodeHostPriorityList(hosts, scores);
}

std::string EncodeHostPriorityList(const std::vector<std::string_view>& hosts, const std::vector<int64_t>& scores) {
  // Thousands of entries, and node names need no escaping: each entry is written straight into
  // text sized exactly, {"Host":"<name>","Score":<score>}, with fixed-size copies for the fixed
  // parts and one branch-free scan per name (a name that needs escaping goes through
  // AppendString instead).
  GPUPACK_CHECK(hosts.size() == scores.size());
  static constexpr char kHost[] = "{\"Host\":\"";
  static constexpr char kScore[] = "\",\"Score\":";
  constexpr size_t kHostSize = sizeof(kHost) - 1;
  constexpr size_t kScoreSize = sizeof(kScore) - 1;
  auto digits = [](int64_t score) { return score >= 0 && score < 10 ? size_t{1} : score >= 10 && score < 100 ? 2 : 0; };
  size_t size = 2 + (hosts.empty() ? 0 : hosts.size() - 1);
  for (size_t i = 0; i < hosts.size(); ++i) {
    size += kHostSize + hosts[i].size() + kScoreSize + 1;
    size += digits(scores[i]);  // 0: written with to_chars below, into room made then
  }
  std::string out(size, '\0');
  char* p = out.data();
  *p++ = '[';
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string_view host = hosts[i];
    if (i > 0) *p++ = ',';
    if (!NeedsJsonEscape(host)) {
      std::memcpy(p, kHost, kHostSize);
      p += kHostSize;
      std::memcpy(p, host.data(), host.size());
      p += host.size();
      std::memcpy(p, kScore, kScoreSize);
      p += kScoreSize;
    } else {
      std::string escaped = "{\"Host\":";
      AppendString(escaped, host);
      escaped += ",\"Score\":";
      const size_t at = static_cast<size_t>(p - out.data());
      out.resize(out.size() + escaped.size() - kHostSize - host.size() - kScoreSize);
      p = std::copy(escaped.begin(), escaped.end(), out.data() + at);
    }
    const int64_t score = scores[i];
    if (digits(score) > 0) {
      if (score >= 10) *p++ = static_cast<char>('0' + score / 10);
      *p++ = static_cast<char>('0' + score % 10);
    } else {
      char text[24];
      const size_t n = static_cast<size_t>(std::to_chars(text, text + sizeof(text), score).ptr - text);
      const size_t at = static_cast<size_t>(p - out.data());
      out.resize(out.size() + n);
      p = std::copy(text, text + n, out.data() + at);
    }
    *p++ = '}';
  }
  *p++ = ']';
  GPUPACK_CHECK(p == out.data() + out.size());
  return out;
}

std::string EncodeBindingResult(const ExtenderBindingResult& result) {
  std::string out = "{";
  Key(out, "Error");
  AppendMessage(out, result.error);
  out += '}';
  return out;
}

std::string EncodePreemptionResult(const ExtenderPreemptionResult& result) {
  return "{\"NodeNameToMetaVictims\":" +
         MetaVictimsJson(result.node_name_to_meta_victims).dump(-1, ' ', false, json::error_handler_t::replace) + "}";
}

std::string EncodeExtenderArgs(const ExtenderArgs& args) {
  std::string out = "{";
  Key(out, "Pod");
  out += args.pod.dump(-1, ' ', false, json::error_handler_t::replace);
  out += ',';
  Key(out, "Nodes");
  AppendNodeList(out, args.nodes);
  out += ',';
  Key(out, "NodeNames");
  AppendNames(out, args.node_names);
  out += '}';
  return out;
}

std::string EncodeBindingArgs(const ExtenderBindingArgs& args) {
  std::string out = "{";
  const std::pair<const char*, const std::string*> fields[] = {{"PodName", &args.pod_name},
                                                               {"PodNamespace", &args.pod_namespace},
                                                               {"PodUID", &args.pod_uid},
                                                               {"Node", &args.node}};
  for (size_t i = 0; i < std::size(fields); ++i) {
    if (i > 0) out += ',';
    Key(out, fields[i].first);
    AppendString(out, *fields[i].second);
  }
  out += '}';
  return out;
}

std::string EncodePreemptionArgs(const ExtenderPreemptionArgs& args) {
  return "{\"Pod\":" + args.pod.dump(-1, ' ', false, json::error_handler_t::replace) +
         ",\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":" +
         MetaVictimsJson(args.victims).dump(-1, ' ', false, json::error_handler_t::replace) + "}";
}

StatusOr<ExtenderFilterResult> DecodeFilterResult(std::string_view body) {
  GPUPACK_ASSIGN_OR_RETURN(json doc, ParseObject(body, "ExtenderFilterResult"));
  ExtenderFilterResult result;
  const std::string where = "ExtenderFilterResult";
  if (const json* nodes = Field(doc, "Nodes")) {
    GPUPACK_ASSIGN_OR_RETURN(result.nodes, ReadNodeList(*nodes, where + ".Nodes"));
  }
  if (const json* names = Field(doc, "NodeNames")) {
    GPUPACK_ASSIGN_OR_RETURN(result.node_names, ReadNames(*names, where + ".NodeNames"));
  }
  for (auto [name, out] : {std::pair{"FailedNodes", &result.failed_nodes},
                           std::pair{"FailedAndUnresolvableNodes", &result.failed_and_unresolvable_nodes}}) {
    const json* map = Field(doc, name);
    if (map == nullptr) continue;
    if (!map->is_object()) return Bad(where + "." + name, "must be an object");
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it->is_string()) return Bad(where + "." + name + "[\"" + it.key() + "\"]", "must be a string");
      (*out)[it.key()] = it->get<std::string>();
    }
  }
  GPUPACK_RETURN_IF_ERROR(ReadString(doc, "Error", where, result.error));
  return result;
}

StatusOr<HostPriorityList> DecodeHostPriorityList(std::string_view body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Bad("HostPriorityList", "body is not valid JSON");
  HostPriorityList list;
  if (doc.is_null()) return list;
  if (!doc.is_array()) return Bad("HostPriorityList", "body must be a JSON array");
  for (size_t i = 0; i < doc.size(); ++i) {
    const std::string where = "HostPriorityList[" + std::to_string(i) + "]";
    if (!doc[i].is_object()) return Bad(where, "must be an object");
    HostPriority hp;
    GPUPACK_RETURN_IF_ERROR(ReadString(doc[i], "Host", where, hp.host));
    GPUPACK_RETURN_IF_ERROR(ReadInt(doc[i], "Score", where, hp.score));
    list.push_back(std::move(hp));
  }
  return list;
}

StatusOr<ExtenderBindingResult> DecodeBindingResult(std::string_view body) {
  GPUPACK_ASSIGN_OR_RETURN(json doc, ParseObject(body, "ExtenderBindingResult"));
  ExtenderBindingResult result;
  GPUPACK_RETURN_IF_ERROR(ReadString(doc, "Error", "ExtenderBindingResult", result.error));
  return result;
}

StatusOr<ExtenderPreemptionResult> DecodePreemptionResult(std::string_view body) {
  GPUPACK_ASSIGN_OR_RETURN(json doc, ParseObject(body, "ExtenderPreemptionResult"));
  ExtenderPreemptionResult result;
  if (const json* meta = Field(doc, "NodeNameToMetaVictims")) {
    GPUPACK_ASSIGN_OR_RETURN(result.node_name_to_meta_victims,
                             ReadVictims(*meta, "ExtenderPreemptionResult.NodeNameToMetaVictims", true));
  }
  return result;
}

}  // namespace gpupack::api
