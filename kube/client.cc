// Long file: one class, the API client: kubeconfig TLS setup (the only OpenSSL use in kube/) and
// one short method per REST verb the components need.
#include "kube/client.h"

#include <httplib.h>
#include <poll.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/rfc3339.h"

namespace gpupack::kube {
namespace {

constexpr std::string_view kComponent = "kube";

std::string UrlEncode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

void AddParam(std::string& path, std::string_view key, std::string_view value) {
  path += (path.find('?') == std::string::npos) ? '?' : '&';
  path += key;
  path += '=';
  path += UrlEncode(value);
}

std::string PatchContentType(PatchType t) {
  switch (t) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJsonPatch:
      return "application/json-patch+json";
  }
  Die("unknown PatchType");
}

std::chrono::milliseconds Jittered(std::chrono::milliseconds d) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(d.count()) * jitter(rng)));
}

bool IsSuccess(int http_status) { return http_status >= 200 && http_status < 300; }

// The message of the cause with reason "DisruptionBudget" (policyv1.DisruptionBudgetCause) in a 429
// Status: how a PodDisruptionBudget refuses an eviction. nullopt for any other answer, a 429
// without that cause (the API server throttling the client) included.
std::optional<std::string> DisruptionBudgetRefusal(int http_status, const std::string& body) {
  if (http_status != 429) return std::nullopt;
  const Json status = Json::parse(body, nullptr, false);
  if (!status.is_object() || !status.contains("details") || !status["details"].is_object()) return std::nullopt;
  const Json causes = status["details"].value("causes", Json::array());
  if (!causes.is_array()) return std::nullopt;
  for (const Json& cause : causes) {
    if (!cause.is_object() || cause.value("reason", Json()) != "DisruptionBudget") continue;
    for (const Json& message : {cause.value("message", Json()), status.value("message", Json())}) {
      if (message.is_string() && !message.get<std::string>().empty()) return message.get<std::string>();
    }
    return "refused by a PodDisruptionBudget";
  }
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------- Resource

// Paths are built by appending to one string: GCC 12 at -O3 reports a false -Wrestrict on
// `"literal" + std::string` temporaries here.
std::string Resource::ApiPrefix() const {
  std::string p = group.empty() ? "/api/" : "/apis/";
  if (!group.empty()) p.append(group).append("/");
  return p.append(version);
}

std::string Resource::CollectionPath(std::string_view ns) const {
  std::string p = ApiPrefix();
  if (namespaced && !ns.empty()) p.append("/namespaces/").append(UrlEncode(ns));
  return p.append("/").append(plural);
}

std::string Resource::ObjectPath(std::string_view ns, std::string_view name, std::string_view subresource) const {
  std::string p = CollectionPath(ns);
  p.append("/").append(UrlEncode(name));
  if (!subresource.empty()) p.append("/").append(subresource);
  return p;
}

const Resource& PodsResource() {
  static const Resource r{"", "v1", "pods", true};
  return r;
}
const Resource& NodesResource() {
  static const Resource r{"", "v1", "nodes", false};
  return r;
}
const Resource& EventsResource() {
  static const Resource r{"", "v1", "events", true};
  return r;
}
const Resource& LeasesResource() {
  static const Resource r{"coordination.k8s.io", "v1", "leases", true};
  return r;
}
const Resource& GpuNodesResource() {
  static const Resource r{"gpupack.io", "v1alpha1", "gpunodes", false};
  return r;
}

std::string StringAt(const Json& object, std::initializer_list<const char*> path) {
  const Json* cur = &object;
  for (const char* p : path) {
    if (!cur->is_object()) return "";
    auto it = cur->find(p);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

std::string ObjectKey(const Json& object) {
  const Json& md = object.value("metadata", Json::object());
  std::string ns = md.value("namespace", "");
  std::string name = md.value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

std::string ResourceVersionOf(const Json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  const Json& rv = object["metadata"].value("resourceVersion", Json());
  return rv.is_string() ? rv.get<std::string>() : "";
}

Status StatusFromHttp(int http_status, std::string_view body, std::string_view what) {
  if (http_status >= 200 && http_status < 300) return Status::Ok();
  std::string message;
  std::string reason;
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    if (parsed.contains("message") && parsed["message"].is_string()) message = parsed["message"];
    if (parsed.contains("reason") && parsed["reason"].is_string()) reason = parsed["reason"];
  }
  if (message.empty()) message = std::string(body.substr(0, 200));
  std::string full =
      std::string(what) + ": HTTP " + std::to_string(http_status) + (message.empty() ? "" : ": " + message);
  switch (http_status) {
    case 400:
    case 422:
      return Status::InvalidArgument(full);
    case 401:
    case 403:
      return Status::PermissionDenied(full);
    case 404:
      return Status::NotFound(full);
    case 409:
      return reason == "AlreadyExists" ? Status::AlreadyExists(full) : Status::Conflict(full);
    case 410:
      return Status::Gone(full);
    default:
      break;
  }
  if (http_status == 429 || http_status >= 500) return Status::Unavailable(full);
  return Status::Internal("unexpected " + full);
}

// ---------------------------------------------------------------- WatchCanceller

struct WatchCanceller::State {
  std::mutex mu;
  bool cancelled = false;
  httplib::ClientImpl* active = nullptr;
};

WatchCanceller::WatchCanceller() : state_(std::make_shared<State>()) {}
WatchCanceller::~WatchCanceller() = default;

void WatchCanceller::Cancel() {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->cancelled = true;
  if (state_->active != nullptr) state_->active->stop();
}

bool WatchCanceller::cancelled() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->cancelled;
}

void WatchCanceller::Reset() {
  std::lock_guard<std::mutex> l(state_->mu);
  state_->cancelled = false;
}

// ---------------------------------------------------------------- Transport

// Parsed server address and TLS material, and the pool of idle keep-alive connections that calls
// take turns on. An httplib client holds one socket and must not serve two requests at once, so a
// call checks one out for itself and hands it back when its response is read.
struct Client::Transport {
  bool https = false;
  std::string host;
  int port = 0;
  std::vector<X509*> ca_certs;
  X509* client_cert = nullptr;
  EVP_PKEY* client_key = nullptr;

  // One connection of the pool: an httplib client and the socket it opened last.
  struct Conn {
    std::unique_ptr<httplib::ClientImpl> http;
    int fd = -1;
  };
  std::mutex pool_mu;
  std::vector<std::unique_ptr<Conn>> idle;  // GUARDED_BY(pool_mu); most recently used last
  std::atomic<uint64_t> connections_opened{0};

  ~Transport() {
    for (X509* c : ca_certs) X509_free(c);
    if (client_cert != nullptr) X509_free(client_cert);
    if (client_key != nullptr) EVP_PKEY_free(client_key);
  }

  // A new httplib client; every socket it opens is counted (and, with `conn`, remembered).
  std::unique_ptr<httplib::ClientImpl> NewHttp(const Config& config, bool keep_alive, Conn* conn) {
    std::unique_ptr<httplib::ClientImpl> c;
    if (https) {
      auto ssl = client_cert != nullptr ? std::make_unique<httplib::SSLClient>(host, port, client_cert, client_key)
                                        : std::make_unique<httplib::SSLClient>(host, port);
      if (!ca_certs.empty()) {
        X509_STORE* store = X509_STORE_new();
        for (X509* cert : ca_certs) X509_STORE_add_cert(store, cert);
        ssl->set_ca_cert_store(store);  // takes ownership
      }
      ssl->enable_server_certificate_verification(!config.insecure_skip_tls_verify);
      c = std::move(ssl);
    } else {
      c = std::make_unique<httplib::ClientImpl>(host, port);
    }
    c->set_keep_alive(keep_alive);
    c->set_socket_options([this, conn](int fd) {
      connections_opened.fetch_add(1, std::memory_order_relaxed);
      if (conn != nullptr) conn->fd = fd;
    });
    return c;
  }

  static void SetTimeouts(httplib::ClientImpl& c, std::chrono::milliseconds timeout,
                          std::chrono::milliseconds connect_timeout) {
    const auto secs = [](std::chrono::milliseconds d) {
      return std::pair<time_t, time_t>(d.count() / 1000, (d.count() % 1000) * 1000);
    };
    auto [cs, cu] = secs(std::min(timeout, connect_timeout));
    c.set_connection_timeout(cs, cu);
    auto [rs, ru] = secs(timeout);
    c.set_read_timeout(rs, ru);
    c.set_write_timeout(rs, ru);
  }

  // A connection of its own for a watch: never pooled, closed when the watch ends.
  std::unique_ptr<httplib::ClientImpl> Connect(const Config& config, std::chrono::milliseconds timeout,
                                               std::chrono::milliseconds connect_timeout) {
    std::unique_ptr<httplib::ClientImpl> c = NewHttp(config, /*keep_alive=*/false, nullptr);
    SetTimeouts(*c, timeout, connect_timeout);
    return c;
  }

  // True when an idle connection's socket has something to read or has hung up: an idle HTTP/1.1
  // connection receives nothing but the server's close (FIN, or a TLS close_notify first), so such
  // a connection is not worth a request.
  static bool ClosedByServer(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) != 0;
  }

  // An idle connection the server has not closed, or (`fresh`, none idle) a new one, which opens
  // its socket on its first request.
  std::unique_ptr<Conn> Checkout(const Config& config, bool fresh) {
    if (!fresh) {
      std::lock_guard<std::mutex> l(pool_mu);
      while (!idle.empty()) {
        std::unique_ptr<Conn> c = std::move(idle.back());
        idle.pop_back();
        if (!c->http->is_socket_open() || !ClosedByServer(c->fd)) return c;
        // Closed: dropping the client closes our end. The next one may still be good.
      }
    }
    auto c = std::make_unique<Conn>();
    c->http = NewHttp(config, /*keep_alive=*/true, c.get());
    return c;
  }

  // Hands a connection back after a complete response; beyond `max_idle` it is closed instead.
  void Return(std::unique_ptr<Conn> c, int max_idle) {
    if (!c->http->is_socket_open()) return;  // the server said Connection: close
    std::lock_guard<std::mutex> l(pool_mu);
    if (static_cast<int>(idle.size()) < max_idle) idle.push_back(std::move(c));
  }
};

namespace {

Status ParsePemCerts(const std::string& pem, std::vector<X509*>& out, std::string_view what) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(cert);
  BIO_free(bio);
  if (out.empty()) return Status::InvalidArgument(std::string(what) + " contains no PEM certificate");
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------- Client

Client::Client(Config config, RetryPolicy policy, const Clock* clock)
    : config_(std::move(config)), policy_(policy), clock_(clock), transport_(std::make_unique<Transport>()) {}

Client::~Client() = default;

uint64_t Client::connections_opened() const { return transport_->connections_opened.load(std::memory_order_relaxed); }

StatusOr<std::unique_ptr<Client>> Client::Create(Config config, RetryPolicy policy, const Clock* clock) {
  std::unique_ptr<Client> c(new Client(std::move(config), policy, clock));
  GPUPACK_RETURN_IF_ERROR(c->Init());
  return c;
}

Status Client::Init() {
  std::string_view s = config_.server;
  Transport& t = *transport_;
  if (s.rfind("https://", 0) == 0) {
    t.https = true;
    s.remove_prefix(8);
  } else if (s.rfind("http://", 0) == 0) {
    s.remove_prefix(7);
  } else {
    return Status::InvalidArgument("API server URL \"" + config_.server + "\" must start with https:// or http://");
  }
  while (!s.empty() && s.back() == '/') s.remove_suffix(1);
  if (s.find('/') != std::string_view::npos) {
    return Status::InvalidArgument("API server URL \"" + config_.server + "\" must not have a path");
  }
  std::string_view host = s;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {  // [v6]:port
    size_t close = s.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument("API server URL \"" + config_.server + "\" has an unclosed [");
    host = s.substr(1, close - 1);
    if (close + 1 < s.size() && s[close + 1] == ':') port = s.substr(close + 2);
  } else if (size_t colon = s.rfind(':'); colon != std::string_view::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty()) return Status::InvalidArgument("API server URL \"" + config_.server + "\" has no host");
  t.host = std::string(host);
  t.port = t.https ? 443 : 80;
  if (!port.empty()) {
    try {
      size_t used = 0;
      t.port = std::stoi(std::string(port), &used);
      if (used != port.size() || t.port <= 0 || t.port > 65535) throw std::out_of_range("port");
    } catch (const std::exception&) {
      return Status::InvalidArgument("API server URL \"" + config_.server + "\" has a bad port");
    }
  }
  if (!config_.ca_pem.empty()) GPUPACK_RETURN_IF_ERROR(ParsePemCerts(config_.ca_pem, t.ca_certs, "CA bundle"));
  if (!config_.client_cert_pem.empty()) {
    std::vector<X509*> certs;
    GPUPACK_RETURN_IF_ERROR(ParsePemCerts(config_.client_cert_pem, certs, "client certificate"));
    t.client_cert = certs.front();
    for (size_t i = 1; i < certs.size(); ++i) X509_free(certs[i]);
    BIO* bio = BIO_new_mem_buf(config_.client_key_pem.data(), static_cast<int>(config_.client_key_pem.size()));
    t.client_key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (t.client_key == nullptr) return Status::InvalidArgument("client key is not a PEM private key");
  }
  if (!config_.token_file.empty()) {
    std::ifstream in(config_.token_file);
    if (!in) return Status::NotFound("token file " + config_.token_file + " cannot be read");
  }
  return Status::Ok();
}

std::string Client::BearerToken(bool force_reread) {
  if (config_.token_file.empty()) return config_.token;
  std::lock_guard<std::mutex> l(token_mu_);
  const auto now = clock_->Now();
  if (force_reread || cached_token_.empty() || now - token_read_at_ >= policy_.token_reread_period) {
    std::ifstream in(config_.token_file);
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string token = ss.str();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    if (in && !token.empty()) {
      cached_token_ = token;
    } else {
      GPUPACK_LOG(kWarning, kComponent) << "cannot re-read token file " << config_.token_file
                                        << "; keeping the previous token";
    }
    token_read_at_ = now;
  }
  return cached_token_;
}

StatusOr<Client::Response> Client::Once(std::string_view method, const std::string& path, const std::string& body,
                                        std::string_view content_type, std::chrono::milliseconds timeout) {
  httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", "gpupack"}};
  const std::string ct(content_type);
  // A request that met a kept-alive connection the server had just closed is sent once more on a
  // new connection, without counting as an attempt, when that cannot apply it twice: the verb is
  // idempotent (GET, PUT, DELETE), or the request was not written out whole.
  const bool idempotent = method == "GET" || method == "PUT" || method == "DELETE";
  for (bool fresh : {false, true}) {
    std::unique_ptr<Transport::Conn> conn = transport_->Checkout(config_, fresh);
    const bool reused = conn->http->is_socket_open();
    Transport::SetTimeouts(*conn->http, timeout, policy_.connect_timeout);
    httplib::Result res{nullptr, httplib::Error::Unknown};
    for (bool reread : {false, true}) {
      httplib::Headers h = headers;
      const std::string token = BearerToken(reread);
      if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
      httplib::ClientImpl& c = *conn->http;
      res = [&] {
        if (method == "GET") return c.Get(path, h);
        if (method == "POST") return c.Post(path, h, body, ct);
        if (method == "PUT") return c.Put(path, h, body, ct);
        if (method == "PATCH") return c.Patch(path, h, body, ct);
        if (method == "DELETE") return c.Delete(path, h);
        Die("unsupported HTTP method");
      }();
      if (!res || res->status != 401 || reread || config_.token_file.empty()) break;  // else: token rotated?
    }
    if (res) {
      Response out{res->status, res->body};
      transport_->Return(std::move(conn), policy_.idle_connections);
      return out;
    }
    const httplib::Error error = res.error();
    const bool resend = reused && (error == httplib::Error::Write || (error == httplib::Error::Read && idempotent));
    if (!fresh && resend) {
      GPUPACK_LOG(kDebug, kComponent) << method << " " << path << ": kept-alive connection lost ("
                                      << httplib::to_string(error) << "); sending again on a new one";
      continue;
    }
    return Status::Unavailable(std::string(method) + " " + path + ": " + httplib::to_string(error));
  }
  Die("unreachable: reconnect loop");
}

StatusOr<Client::Response> Client::Exchange(std::string_view method, const std::string& path, const std::string& body,
                                            std::string_view content_type,
                                            const std::function<bool(const Response&)>& is_answer) {
  const auto deadline = std::chrono::steady_clock::now() + policy_.call_timeout;
  std::chrono::milliseconds backoff = policy_.initial_backoff;
  const std::string what = std::string(method) + " " + path;
  Status last;
  for (int attempt = 1; attempt <= policy_.max_attempts; ++attempt) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    auto r = Once(method, path, body, content_type, left);
    if (r.ok()) {
      if (is_answer(*r)) return r;
      last = StatusFromHttp(r->status, r->body, what);
    } else {
      last = r.status();
    }
    if (last.code() != StatusCode::kUnavailable) return last;
    if (attempt == policy_.max_attempts) break;
    auto wait = Jittered(backoff);
    const auto left_now =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (wait >= left_now) break;
    GPUPACK_LOG(kDebug, kComponent) << what << " failed (" << last << "); retrying in " << wait.count() << "ms";
    std::this_thread::sleep_for(wait);
    backoff = std::min(backoff * 2, policy_.max_backoff);
  }
  if (last.ok()) return Status::DeadlineExceeded(what + ": call deadline passed");
  return last;
}

StatusOr<Json> Client::Call(std::string_view method, const std::string& path, const std::string& body,
                            std::string_view content_type) {
  GPUPACK_ASSIGN_OR_RETURN(Response r, Exchange(method, path, body, content_type,
                                                [](const Response& response) { return IsSuccess(response.status); }));
  if (r.body.empty()) return Json::object();
  Json parsed = Json::parse(r.body, nullptr, false);
  if (parsed.is_discarded()) return Status::Internal(std::string(method) + " " + path + ": response is not JSON");
  return parsed;
}

StatusOr<Json> Client::Get(const Resource& r, std::string_view ns, std::string_view name) {
  return Call("GET", r.ObjectPath(ns, name), "", "");
}

StatusOr<ListResult> Client::List(const Resource& r, std::string_view ns, const ListOptions& opts) {
  ListResult out;
  std::string cont;
  do {
    std::string path = r.CollectionPath(ns);
    if (!opts.label_selector.empty()) AddParam(path, "labelSelector", opts.label_selector);
    if (!opts.field_selector.empty()) AddParam(path, "fieldSelector", opts.field_selector);
    if (!opts.resource_version.empty()) AddParam(path, "resourceVersion", opts.resource_version);
    if (opts.limit > 0) AddParam(path, "limit", std::to_string(opts.limit));
    if (!cont.empty()) AddParam(path, "continue", cont);
    GPUPACK_ASSIGN_OR_RETURN(Json page, Call("GET", path, "", ""));
    if (!page.contains("items") || !(page["items"].is_array() || page["items"].is_null())) {
      return Status::Internal("GET " + path + ": list response has no items array");
    }
    if (page["items"].is_array()) {
      for (Json& item : page["items"]) out.items.push_back(std::move(item));
    }
    const Json md = page.value("metadata", Json::object());
    out.resource_version = md.value("resourceVersion", "");
    cont = md.value("continue", "");
  } while (!cont.empty());
  return out;
}

StatusOr<Json> Client::Create(const Resource& r, std::string_view ns, const Json& object) {
  return Call("POST", r.CollectionPath(ns), object.dump(), "application/json");
}

StatusOr<Json> Client::Update(const Resource& r, std::string_view ns, const Json& object,
                              std::string_view subresource) {
  const std::string name = object.value("metadata", Json::object()).value("name", "");
  if (name.empty()) return Status::InvalidArgument("update of a " + r.plural + " object without metadata.name");
  return Call("PUT", r.ObjectPath(ns, name, subresource), object.dump(), "application/json");
}

StatusOr<Json> Client::Patch(const Resource& r, std::string_view ns, std::string_view name, PatchType type,
                             const Json& patch, std::string_view subresource) {
  return Call("PATCH", r.ObjectPath(ns, name, subresource), patch.dump(), PatchContentType(type));
}

Status Client::Delete(const Resource& r, std::string_view ns, std::string_view name) {
  return Call("DELETE", r.ObjectPath(ns, name), "", "").status();
}

Status Client::Watch(const Resource& r, std::string_view ns, const WatchOptions& opts,
                     const std::function<bool(const WatchEvent&)>& on_event, WatchCanceller* canceller) {
  std::string path = r.CollectionPath(ns);
  AddParam(path, "watch", "1");
  if (!opts.resource_version.empty()) AddParam(path, "resourceVersion", opts.resource_version);
  if (opts.allow_bookmarks) AddParam(path, "allowWatchBookmarks", "true");
  if (opts.timeout_seconds > 0) AddParam(path, "timeoutSeconds", std::to_string(opts.timeout_seconds));
  if (!opts.label_selector.empty()) AddParam(path, "labelSelector", opts.label_selector);
  if (!opts.field_selector.empty()) AddParam(path, "fieldSelector", opts.field_selector);
  const std::string what = "WATCH " + path;

  auto conn = transport_->Connect(config_, opts.stall_timeout, policy_.connect_timeout);
  if (canceller != nullptr) {
    std::lock_guard<std::mutex> l(canceller->state_->mu);
    if (canceller->state_->cancelled) return Status::Ok();
    canceller->state_->active = conn.get();
  }
  struct Unregister {
    WatchCanceller* c;
    ~Unregister() {
      if (c == nullptr) return;
      std::lock_guard<std::mutex> l(c->state_->mu);
      c->state_->active = nullptr;
    }
  } unregister{canceller};

  httplib::Headers headers{{"Accept", "application/json"}, {"User-Agent", "gpupack"}};
  const std::string token = BearerToken(false);
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);

  int http_status = 0;
  std::string error_body;  // body of a non-200 response
  WatchStreamDecoder decoder(what);
  // httplib's stop() shuts down only a socket whose request is in flight: a Cancel() between the
  // registration above and the request's connect closes nothing, and the watch would then stream
  // until its timeoutSeconds (Informer::Stop blocked that long). So the stream also ends itself at
  // its response headers and at every chunk once cancelled.
  const auto cancelled = [canceller] { return canceller != nullptr && canceller->cancelled(); };
  httplib::Result res = conn->Get(
      path, headers,
      [&](const httplib::Response& response) {
        http_status = response.status;
        return !cancelled();
      },
      [&](const char* data, size_t len) {
        if (cancelled()) return false;
        if (http_status != 200) {
          if (error_body.size() < 64 * 1024) error_body.append(data, len);
          return true;
        }
        return decoder.Feed(std::string_view(data, len), on_event);
      });
  if (decoder.stopped_by_handler()) return Status::Ok();
  if (!decoder.status().ok()) return decoder.status();
  if (cancelled()) return Status::Ok();
  if (http_status == 401) BearerToken(/*force_reread=*/true);  // the next watch uses a rotated token
  if (http_status != 0 && http_status != 200) return StatusFromHttp(http_status, error_body, what);
  if (!res) {
    return Status::Unavailable(what + ": stream ended: " + httplib::to_string(res.error()));
  }
  // A last event without a trailing newline.
  if (!decoder.Finish(on_event)) return decoder.stopped_by_handler() ? Status::Ok() : decoder.status();
  return Status::Ok();
}

// ---------------------------------------------------------------- typed calls

StatusOr<Json> Client::GetPod(std::string_view ns, std::string_view name) { return Get(PodsResource(), ns, name); }

Status Client::CreateBinding(std::string_view ns, std::string_view pod_name, std::string_view pod_uid,
                             std::string_view node_name, const std::map<std::string, std::string>& annotations) {
  Json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", pod_name}, {"namespace", ns}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_name}}},
  };
  if (!pod_uid.empty()) binding["metadata"]["uid"] = pod_uid;
  if (!annotations.empty()) binding["metadata"]["annotations"] = annotations;
  return Call("POST", PodsResource().ObjectPath(ns, pod_name, "binding"), binding.dump(), "application/json").status();
}

StatusOr<Json> Client::PatchNodeStatus(std::string_view node_name, const Json& merge_patch) {
  return Patch(NodesResource(), "", node_name, PatchType::kMerge, merge_patch, "status");
}

StatusOr<Json> Client::GetNode(std::string_view node_name) { return Get(NodesResource(), "", node_name); }

StatusOr<Json> Client::GetGpuNode(std::string_view name) { return Get(GpuNodesResource(), "", name); }

StatusOr<Json> Client::UpsertGpuNodeStatus(std::string_view name, const Json& status) {
  const Resource& r = GpuNodesResource();
  constexpr int kConflictRetries = 5;
  Status last;
  for (int i = 0; i < kConflictRetries; ++i) {
    auto current = Get(r, "", name);
    if (!current.ok() && current.status().code() == StatusCode::kNotFound) {
      Json obj = {{"apiVersion", "gpupack.io/v1alpha1"},
                  {"kind", "GPUNode"},
                  {"metadata", {{"name", name}}},
                  {"status", status}};
      current = Create(r, "", obj);
      if (!current.ok() && current.status().code() == StatusCode::kAlreadyExists) continue;  // raced: re-read
    }
    if (!current.ok()) return current.status();
    Json obj = std::move(current).value();
    obj["status"] = status;
    auto updated = Update(r, "", obj, "status");
    if (updated.ok() || updated.status().code() != StatusCode::kConflict) return updated;
    last = updated.status();
  }
  return last;
}

StatusOr<EvictionAnswer> Client::EvictPod(std::string_view ns, std::string_view pod_name, std::string_view pod_uid) {
  Json eviction = {
      {"apiVersion", "policy/v1"},
      {"kind", "Eviction"},
      {"metadata", {{"name", pod_name}, {"namespace", ns}}},
  };
  if (!pod_uid.empty()) eviction["deleteOptions"] = {{"preconditions", {{"uid", pod_uid}}}};
  GPUPACK_ASSIGN_OR_RETURN(Response r,
                           Exchange("POST", PodsResource().ObjectPath(ns, pod_name, "eviction"), eviction.dump(),
                                    "application/json", [](const Response& response) {
                                      return IsSuccess(response.status) ||
                                             DisruptionBudgetRefusal(response.status, response.body).has_value();
                                    }));
  EvictionAnswer answer;
  answer.evicted = IsSuccess(r.status);
  if (answer.evicted) {
    const Json status = Json::parse(r.body, nullptr, false);
    if (status.is_object() && status.value("message", Json()).is_string()) answer.message = status["message"];
  } else {
    answer.message = *DisruptionBudgetRefusal(r.status, r.body);
  }
  return answer;
}

Status Client::CreateEvent(const EventSpec& event) {
  const auto now = clock_->Now();
  const std::string involved_name = event.involved_object.value("name", "object");
  std::ostringstream name;
  name << involved_name << "." << std::hex << now.time_since_epoch().count();
  const std::string ts = FormatRfc3339(now);
  Json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name.str()}, {"namespace", event.ns}}},
      {"involvedObject", event.involved_object},
      {"reason", event.reason},
      {"message", event.message},
      {"type", event.type},
      {"source", {{"component", event.reporting_component}}},
      {"reportingComponent", event.reporting_component},
      {"firstTimestamp", ts},
      {"lastTimestamp", ts},
      {"count", 1},
  };
  return Create(EventsResource(), event.ns, ev).status();
}

}  // namespace gpupack::kube
