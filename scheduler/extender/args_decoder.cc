#include "scheduler/extender/args_decoder.h"

#include <simdjson.h>

#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace gpupack::extender {

namespace {

namespace od = simdjson::ondemand;

// True when the value is JSON null (and consumes it).
bool IsNull(od::value& value) {
  bool null = false;
  return !value.is_null().get(null) && null;
}

// Reads a value the decoder has no use for to its end, checking it: the on-demand parser checks
// only what is read, and skips a value by counting brackets, so a body the reference decoder
// refuses (`{"x":tru}`, `{"":"":}}`) would pass. False when the value is malformed or is one the
// two parsers may judge differently (a number past double's range, a NUL byte, which nlohmann
// takes for the end of its input): the caller then leaves the body to api::DecodeExtenderArgs.
bool ReadThrough(od::value value) {
  if (value.raw_json_token().find('\0') != std::string_view::npos) return false;
  od::json_type type;
  if (value.type().get(type)) return false;
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (value.get_object().get(object)) return false;
      for (auto field : object) {
        std::string_view key;
        if (field.unescaped_key().get(key) || !ReadThrough(field.value())) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (value.get_array().get(array)) return false;
      for (auto element : array) {
        od::value item;
        if (element.get(item) || !ReadThrough(item)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view text;
      return !value.get_string().get(text);
    }
    case od::json_type::number: {
      od::number number;
      return !value.get_number().get(number);
    }
    case od::json_type::boolean: {
      bool flag;
      return !value.get_bool().get(flag);
    }
    case od::json_type::null:
      return IsNull(value);
  }
  return false;
}

// A hash of a node name for Duplicate's table: 8 bytes per multiply, inline. std::hash (a
// library call, 4 bytes per step) was half of Duplicate's time on 5,000 names.
uint64_t HashName(std::string_view name) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  uint64_t h = name.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= name.size(); i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, name.data() + i, 8);
    h = (h ^ chunk) * kMul;
  }
  if (i < name.size()) {
    // The last 8 bytes (overlapping the loop's), or the few there are: fixed-size loads.
    uint64_t tail = 0;
    if (name.size() >= 8) {
      std::memcpy(&tail, name.data() + name.size() - 8, 8);
    } else {
      for (; i < name.size(); ++i) tail = (tail << 8) | static_cast<unsigned char>(name[i]);
    }
    h = (h ^ tail) * kMul;
  }
  // Finalise (murmur3's fmix64): a multiplication carries only upward, so without this the low
  // bits (the table slot) would hardly see the names' last characters.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

// A name that appears twice in `names`, if any. A flat hash set (linear probing over a
// power-of-two table at most half full): linear in the names, where sorting them cost a fifth of
// a 5,000-node filter (names share long prefixes, so every comparison is a memcmp). A slot holds
// an index into `names` and the hash's high half, which turns away all but true duplicates
// without reading the names (at 20,000 names each read was a cache miss).
std::optional<std::string_view> Duplicate(const std::vector<std::string_view>& names) {
  constexpr uint32_t kEmpty = std::numeric_limits<uint32_t>::max();
  GPUPACK_CHECK(names.size() < kEmpty);  // a request body is far smaller than 4 G names
  struct Slot {
    uint32_t index = kEmpty;
    uint32_t tag = 0;  // the hash's high 32 bits
  };
  size_t size = 16;
  while (size < 2 * names.size()) size *= 2;
  // Reused by the thread: a 5,000-name table is 128 KB, which malloc would map and unmap (and
  // the kernel fault in) on every call.
  thread_local std::vector<Slot> slots;
  slots.assign(size, Slot{});
  for (uint32_t n = 0; n < names.size(); ++n) {
    const std::string_view name = names[n];
    const uint64_t hash = HashName(name);
    const auto tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = hash & (size - 1);; i = (i + 1) & (size - 1)) {
      Slot& slot = slots[i];
      if (slot.index == kEmpty) {
        slot = Slot{n, tag};
        break;
      }
      if (slot.tag == tag && names[slot.index] == name) return name;
    }
  }
  return std::nullopt;
}

// metadata.name of one Node object's text, using a second parser (the first is mid-document);
// nullopt when the node is not plainly well-formed (the reference decoder then reads the body).
// Every field is read (ReadThrough), since the node's text is echoed to kube-scheduler as sent.
// A second metadata or name is left to the reference decoder too: its parsed object keeps one.
std::optional<std::string> NodeName(std::string_view raw) {
  thread_local od::parser parser;
  simdjson::padded_string padded(raw);
  od::document doc;
  od::object node;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(node)) return std::nullopt;
  std::optional<std::string> name;
  bool has_metadata = false;
  for (auto field : node) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return std::nullopt;
    if (!api::SameFieldName(key, "metadata")) {
      if (!ReadThrough(field.value())) return std::nullopt;
      continue;
    }
    od::object metadata;
    if (has_metadata || field.value().get_object().get(metadata)) return std::nullopt;
    has_metadata = true;
    for (auto meta_field : metadata) {
      std::string_view meta_key;
      if (meta_field.unescaped_key().get(meta_key)) return std::nullopt;
      if (!api::SameFieldName(meta_key, "name")) {
        if (!ReadThrough(meta_field.value())) return std::nullopt;
        continue;
      }
      std::string_view text;
      if (name || meta_field.value().get_string().get(text) || text.empty()) return std::nullopt;
      name.emplace(text);
    }
  }
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) return std::nullopt;
  return name;
}

// The Nodes field (a NodeList); false when the fast reading cannot vouch for it.
bool ReadNodes(od::value& value, std::vector<api::WireNode>& out) {
  od::object list;
  if (value.get_object().get(list)) return false;
  bool has_items = false;
  for (auto field : list) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    if (!api::SameFieldName(key, "items")) {
      if (!ReadThrough(field.value())) return false;
      continue;
    }
    if (has_items) return false;  // which one counts is the reference decoder's to say
    has_items = true;
    od::value items_value = field.value();
    if (IsNull(items_value)) continue;
    od::array items;
    if (items_value.get_array().get(items)) return false;
    for (auto item : items) {
      od::object node;
      std::string_view raw;
      if (item.get_object().get(node) || node.raw_json().get(raw)) return false;
      std::optional<std::string> name = NodeName(raw);
      if (!name) return false;
      out.push_back({*std::move(name), std::string(raw)});
    }
  }
  std::vector<std::string_view> names;
  names.reserve(out.size());
  for (const api::WireNode& node : out) names.push_back(node.name);
  return !Duplicate(names);
}

bool JsonSpace(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }

// Reads `raw`, the text of the NodeNames array, when it is what a scheduler sends: strings with
// no escape and no control character, separated as JSON requires. Returns false for anything
// else (an escape, an empty name, a wrong separator, a non-string), which the general path then
// reads. The text between two quotes is then the name itself.
bool ScanPlainNames(std::string_view raw, std::vector<std::string_view>& out) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < raw.size() && JsonSpace(raw[i])) ++i;
  };
  auto at = [&](char ch) { return i < raw.size() && raw[i] == ch; };
  if (!at('[')) return false;
  ++i;
  skip_space();
  if (!at(']')) {
    out.reserve(raw.size() / 16);
    while (true) {
      if (!at('"')) return false;
      const size_t start = ++i;
      const void* quote = std::memchr(raw.data() + start, '"', raw.size() - start);
      if (quote == nullptr) return false;
      i = static_cast<size_t>(static_cast<const char*>(quote) - raw.data());
      const std::string_view name = raw.substr(start, i - start);
      if (name.empty() || api::NeedsJsonEscape(name)) return false;
      out.push_back(name);
      ++i;
      skip_space();
      if (!at(',')) break;
      ++i;
      skip_space();
    }
    if (!at(']')) return false;
  }
  ++i;
  skip_space();
  return i == raw.size();
}

// Whether the names in `raw` (a NodeNames array's text) are known to be distinct: the scheduler
// sends the same list call after call, so each thread remembers the last list it checked and
// compares text (a memcmp) instead of hashing every name again.
class CheckedNames {
 public:
  static bool Known(std::string_view raw) { return Last() == raw; }
  static void Remember(std::string_view raw) { Last().assign(raw); }

 private:
  static std::string& Last() {
    thread_local std::string last;
    return last;
  }
};

// The NodeNames field; false when the fast reading cannot vouch for it. A name is viewed where
// it lies in the padded body; only one with an escape is unescaped into `unescaped` (stage 1 of
// the parser has already refused invalid UTF-8 and unescaped control characters, so a name
// without a backslash reads the same raw as decoded).
bool ReadNames(od::value& value, std::vector<std::string_view>& out, std::deque<std::string>& unescaped) {
  od::array names;
  std::string_view raw;
  if (value.get_array().get(names) || names.raw_json().get(raw)) return false;
  if (ScanPlainNames(raw, out)) {
    if (CheckedNames::Known(raw)) return true;
    if (Duplicate(out)) return false;
    CheckedNames::Remember(raw);
    return true;
  }
  out.clear();
  bool unused;
  if (names.reset().get(unused)) return false;
  // Thousands of names: one allocation instead of a dozen growths (counting scans the array's
  // structure, not its strings, and rewinds it).
  size_t count = 0;
  if (names.count_elements().get(count)) return false;
  out.reserve(count);
  for (auto element : names) {
    std::string_view token;
    if (element.raw_json_token().get(token)) return false;
    while (!token.empty() && JsonSpace(token.back())) token.remove_suffix(1);
    if (token.size() < 2 || token.front() != '"' || token.back() != '"') return false;
    // Read as a string even without an escape: the parser skips a value left unread by counting
    // brackets, and would pass `["a":}]`. The view stays on the body (the parser's own copy of
    // a string lives only until its next document).
    std::string_view decoded;
    if (element.get_string().get(decoded)) return false;
    std::string_view name = token.substr(1, token.size() - 2);
    if (name.find('\\') != std::string_view::npos) name = unescaped.emplace_back(decoded);
    if (name.empty()) return false;
    out.push_back(name);
  }
  return !Duplicate(out);
}

// The fast reading: true when it read the whole body and can vouch that the reference decoder
// would read the same values from it.
bool ReadArgs(std::string_view body, DecodedArgs& out) {
  thread_local od::parser parser;
  out.text.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  out.text.assign(body);
  od::document doc;
  od::object top;
  if (parser.iterate(simdjson::padded_string_view(out.text.data(), out.text.size(), out.text.capacity())).get(doc) ||
      doc.get_object().get(top)) {
    return false;
  }
  // A field named twice (the reference decoder refuses it). Keys stay valid in the parser's
  // string buffer for the document; a body has a handful.
  std::vector<std::string_view> keys;
  for (auto field : top) {
    std::string_view key;
    od::value value;
    if (field.unescaped_key().get(key) || field.value().get(value)) return false;
    for (std::string_view seen : keys) {
      if (api::SameFieldName(seen, key)) return false;
    }
    keys.push_back(key);
    if (api::SameFieldName(key, "Pod")) {
      if (IsNull(value)) continue;
      od::object pod;
      std::string_view raw;
      if (value.get_object().get(pod) || pod.raw_json().get(raw)) return false;
      out.pod = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
      if (out.pod.is_discarded()) return false;
    } else if (api::SameFieldName(key, "Nodes")) {
      if (IsNull(value)) continue;
      out.nodes.emplace();
      if (!ReadNodes(value, *out.nodes)) return false;
    } else if (api::SameFieldName(key, "NodeNames")) {
      if (IsNull(value)) continue;
      out.node_names.emplace();
      if (!ReadNames(value, *out.node_names, out.unescaped)) return false;
    } else if (!ReadThrough(value)) {
      return false;
    }
  }
  // The on-demand parser reads lazily: make sure the whole body was one well-formed document.
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) return false;
  // A NUL byte after the object (`{}\0`) also reads as the end of the document; JSON allows only
  // whitespace there (api::DecodeExtenderArgs refuses a NUL anywhere).
  size_t end = body.size();
  while (end > 0 && JsonSpace(body[end - 1])) --end;
  return end > 0 && body[end - 1] == '}';
}

// A body the fast reading could not vouch for, decoded by the reference decoder, which gives the
// verdict and names what is wrong (such a body is never one kube-scheduler sends, so reading it
// twice costs nothing that matters); names are kept in `unescaped`.
Status ReadArgsByReference(std::string_view body, DecodedArgs& out) {
  out.pod = nullptr;
  out.nodes.reset();
  out.node_names.reset();
  out.unescaped.clear();
  GPUPACK_ASSIGN_OR_RETURN(api::ExtenderArgs args, api::DecodeExtenderArgs(body));
  out.pod = std::move(args.pod);
  out.nodes = std::move(args.nodes);
  if (args.node_names) {
    out.node_names.emplace();
    for (std::string& name : *args.node_names) out.node_names->push_back(out.unescaped.emplace_back(std::move(name)));
  }
  return Status::Ok();
}

}  // namespace

Status DecodeExtenderArgsInto(std::string_view body, DecodedArgs& out) {
  return ReadArgs(body, out) ? Status::Ok() : ReadArgsByReference(body, out);
}

const std::vector<std::string_view>& DecodedArgs::AskedNames(std::vector<std::string_view>& storage) const {
  if (node_names) return *node_names;
  storage.clear();
  if (nodes) {
    storage.reserve(nodes->size());
    for (const api::WireNode& node : *nodes) storage.push_back(node.name);
  }
  return storage;
}

StatusOr<api::ExtenderArgs> DecodeExtenderArgsFast(std::string_view body) {
  DecodedArgs decoded;
  GPUPACK_RETURN_IF_ERROR(DecodeExtenderArgsInto(body, decoded));
  api::ExtenderArgs args;
  args.pod = std::move(decoded.pod);
  args.nodes = std::move(decoded.nodes);
  if (decoded.node_names) args.node_names.emplace(decoded.node_names->begin(), decoded.node_names->end());
  return args;
}

}  // namespace gpupack::extender
