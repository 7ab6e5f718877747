// Long file: the only file that includes Beast, on purpose (its headers stay out of every other
// translation unit); connection handling, limits and metrics of one server.
// Beast's string_view is std::string_view here (this is the only file that includes Beast).
#define BOOST_BEAST_USE_STD_STRING_VIEW

#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "common/log.h"
#include "server/cert_reloader.h"

namespace gpupack::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

Status ParseListenAddress(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(digits) > 65535) {
    return Status::InvalidArgument("listen address \"" + text + "\": expected HOST:PORT");
  }
  *host = colon == 0 ? "0.0.0.0" : text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = std::stoi(digits);
  return Status::Ok();
}

namespace {

// Why a connection ended: the label of gpupack_http_connections_closed_total.
enum class CloseReason { kClient, kIdleTimeout, kHeaderTimeout, kBodyTimeout, kWriteTimeout, kRefused, kDrain, kError };
constexpr const char* kCloseReasonNames[] = {"client",        "idle_timeout", "header_timeout", "body_timeout",
                                             "write_timeout", "refused",      "drain",          "error"};
constexpr size_t kMaxHeaderBytes = 64 << 10;
// After a refusal with the body unread, how long the closing side keeps reading (and discarding)
// so the client sees the reply instead of a reset.
constexpr std::chrono::seconds kLingerTimeout{2};
// A flat_buffer reads at most its free capacity per call (and Beast at most 64 KB): a body is
// read with a buffer of up to this size, so an 80 KB filter body takes two reads, not the twenty
// (each a recvmsg, a timer update and often an epoll wait) that the first read's 4 KB would take.
constexpr size_t kBodyReadBytes = 64 << 10;
// A connection going idle keeps at most this much read buffer (1,000 idle keep-alive connections
// must cost sockets, not body-sized buffers).
constexpr size_t kIdleReadBytes = 4096;

class SessionBase;

// Everything the server shares with its connections.
struct Core {
  static HttpServerOptions WithThreadCounts(HttpServerOptions options) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    if (options.worker_threads <= 0) options.worker_threads = cores;
    if (options.io_threads <= 0) options.io_threads = cores;
    return options;
  }

  static std::vector<std::unique_ptr<net::io_context>> MakeIoContexts(int count) {
    std::vector<std::unique_ptr<net::io_context>> contexts;
    for (int i = 0; i < count; ++i) contexts.push_back(std::make_unique<net::io_context>(1));
    return contexts;
  }

  explicit Core(HttpServerOptions o) : options(WithThreadCounts(std::move(o))) {
    open_ = &prometheus::BuildGauge()
                 .Name("gpupack_http_connections")
                 .Help("HTTP connections open now (idle keep-alive ones included).")
                 .Register(registry)
                 .Add({});
    auto& closed = prometheus::BuildCounter()
                       .Name("gpupack_http_connections_closed_total")
                       .Help(
                           "HTTP connections closed, by reason: client, idle_timeout, header_timeout, "
                           "body_timeout, write_timeout, refused (a reply that ends the connection: 400, 413, "
                           "431), drain, error.")
                       .Register(registry);
    for (size_t i = 0; i < std::size(kCloseReasonNames); ++i)
      closed_[i] = &closed.Add({{"reason", kCloseReasonNames[i]}});
    responses_ = &prometheus::BuildCounter()
                      .Name("gpupack_http_responses_total")
                      .Help("HTTP responses sent, by status code.")
                      .Register(registry);
    handler_exceptions_ = &prometheus::BuildCounter()
                               .Name("gpupack_http_handler_exceptions_total")
                               .Help("Requests whose handler threw; each was answered 500.")
                               .Register(registry)
                               .Add({});
    queued_ = &prometheus::BuildGauge()
                   .Name("gpupack_http_requests_queued")
                   .Help("Requests waiting for a worker now.")
                   .Register(registry)
                   .Add({});
    shed_ = &prometheus::BuildCounter()
                 .Name("gpupack_http_shed_total")
                 .Help("Requests answered 503 unrun: they waited for a worker longer than the queue bound.")
                 .Register(registry)
                 .Add({});
  }

  // The worker pool's queue. Enqueue as a request is posted to it; TakeFromQueue as a worker
  // picks it up, which gives the 503 to answer instead of running it when it waited too long.
  Clock::TimePoint Enqueue() {
    queued_count.fetch_add(1, std::memory_order_relaxed);
    queued_->Increment();
    return options.max_queue_wait.count() > 0 ? clock.Now() : Clock::TimePoint{};
  }

  std::optional<Response> TakeFromQueue(Clock::TimePoint queued_at, const Request& request) {
    queued_count.fetch_sub(1, std::memory_order_relaxed);
    queued_->Decrement();
    if (options.max_queue_wait.count() <= 0) return std::nullopt;
    const Clock::Duration waited = SaturatingElapsed(queued_at, clock.Now());
    if (waited <= options.max_queue_wait) return std::nullopt;
    shed_->Increment();
    const std::string what = request.method + " " + request.path + " waited " +
                             std::to_string(std::chrono::ceil<std::chrono::milliseconds>(waited).count()) +
                             " ms for a worker, more than the bound of " +
                             std::to_string(options.max_queue_wait.count()) + " ms";
    // One line for the first and then every 1,000th: under overload a line per request would
    // add to the load it reports.
    const int64_t shed = shed_count.fetch_add(1, std::memory_order_relaxed) + 1;
    if (shed == 1 || shed % 1000 == 0) {
      GPUPACK_LOG(kWarning, options.component) << "overloaded: " << what << " (" << shed << " shed so far)";
    }
    return Response{
        503, "text/plain", options.component + " overloaded: " + what + "; not run, retry\n", {{"Retry-After", "1"}}};
  }

  // Routing: the handler for (method, path), or a ready-made refusal (404, 405 + Allow).
  struct Route {
    Handler handler;
    RunOn run_on = RunOn::kWorker;
  };

  const Route* Find(const std::string& method, const std::string& path, Response* refusal) const {
    auto it = routes.find(path);
    if (it == routes.end()) {
      refusal->status = 404;
      refusal->body = "no such endpoint: " + method + " " + path + "\n";
      return nullptr;
    }
    auto handler = it->second.find(method);
    if (handler != it->second.end()) return &handler->second;
    std::string allow;
    for (const auto& [known, unused] : it->second) allow += (allow.empty() ? "" : ", ") + known;
    refusal->status = 405;
    refusal->body = "method " + method + " not allowed on " + path + "; allowed: " + allow + "\n";
    refusal->headers.emplace_back("Allow", allow);
    return nullptr;
  }

  // What `produce` (a handler, a probe, the metric sources) answers, or 500 when it throws. An
  // exception must end the request, not the process: escaping a worker or an I/O thread it would
  // reach std::terminate.
  template <class Produce>
  Response Guarded(const Request& request, Produce&& produce) {
    try {
      return produce();
    } catch (const std::exception& e) {
      return HandlerFailed(request, e.what());
    } catch (...) {
      return HandlerFailed(request, "an exception that is not a std::exception");
    }
  }

  Response HandlerFailed(const Request& request, const std::string& what) {
    handler_exceptions_->Increment();
    GPUPACK_LOG(kError, options.component)
        << "the handler of " << request.method << " " << request.path << " threw: " << what;
    return Response{
        500, "text/plain", "internal error in " + request.method + " " + request.path + ": " + what + "\n", {}};
  }

  Response Metrics() const {
    std::vector<prometheus::MetricFamily> families = registry.Collect();
    for (const auto& collect : metric_sources) {
      std::vector<prometheus::MetricFamily> more = collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
    return Response{
        200, "text/plain; version=0.0.4; charset=utf-8", prometheus::TextSerializer().Serialize(families), {}};
  }

  void CountClose(CloseReason reason) { closed_[int(reason)]->Increment(); }
  // Each status code's counter is looked up in the family once (Add takes the family's lock and
  // builds a label map), then incremented through the cached pointer.
  void CountResponse(int status) {
    if (status < 0 || size_t(status) >= std::size(response_counters_)) {
      return responses_->Add({{"code", std::to_string(status)}}).Increment();
    }
    std::atomic<prometheus::Counter*>& slot = response_counters_[status];
    prometheus::Counter* counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      counter = &responses_->Add({{"code", std::to_string(status)}});  // the same counter for the same code
      slot.store(counter, std::memory_order_release);
    }
    counter->Increment();
  }

  void Register(SessionBase* session, std::weak_ptr<SessionBase> weak, net::any_io_executor executor) {
    std::lock_guard lock(sessions_mu);
    sessions.emplace(session, LiveSession{std::move(weak), std::move(executor)});
    open_->Increment();
  }
  void Unregister(SessionBase* session) {
    std::lock_guard lock(sessions_mu);
    if (sessions.erase(session) == 0) return;
    open_->Decrement();
    sessions_cv.notify_all();
  }

  void Accept();
  void OnAccept(error_code ec, tcp::socket socket);
  void BeginDrain();  // on the I/O thread

  HttpServerOptions options;
  const Clock& clock = options.clock != nullptr ? *options.clock : SystemClock::Instance();
  std::map<std::string, std::map<std::string, Route>> routes;  // path -> method -> route
  std::vector<std::function<std::vector<prometheus::MetricFamily>()>> metric_sources;

  // Declared before the I/O context: sessions the context still holds are destroyed with it, and
  // they use these.
  std::unique_ptr<CertReloader> certs;
  std::optional<net::ssl::context> tls;
  prometheus::Registry registry;
  prometheus::Gauge* open_ = nullptr;
  prometheus::Counter* closed_[std::size(kCloseReasonNames)] = {};
  prometheus::Family<prometheus::Counter>* responses_ = nullptr;
  prometheus::Counter* handler_exceptions_ = nullptr;
  prometheus::Gauge* queued_ = nullptr;
  prometheus::Counter* shed_ = nullptr;
  std::atomic<int64_t> queued_count{0};
  std::atomic<int64_t> shed_count{0};
  std::atomic<prometheus::Counter*> response_counters_[600] = {};  // by status code; null until used
  std::mutex sessions_mu;
  std::condition_variable sessions_cv;
  // A connection, reachable from a drain: it may be in destruction (weak fails to lock), and its
  // state may be touched only on its strand.
  struct LiveSession {
    std::weak_ptr<SessionBase> weak;
    net::any_io_executor strand;
  };
  std::unordered_map<SessionBase*, LiveSession> sessions;  // guarded by sessions_mu
  std::atomic<bool> draining{false};

  // One io_context per I/O thread, run by that thread alone, and each connection on one of them
  // (round robin): a connection's completions run on the thread that polled them. With one context
  // shared by all I/O threads, completions were handed between threads, several futex wake-ups and
  // context switches per request.
  std::vector<std::unique_ptr<net::io_context>> io_contexts = MakeIoContexts(options.io_threads);
  size_t next_io_context = 0;                   // on accept_strand
  net::io_context& ioc = *io_contexts.front();  // the acceptor's
  // Keep run() going while a drain has closed the acceptor and a handler's reply is still to come
  // back from a worker.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> keep_running = [this] {
    std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
    for (const auto& context : io_contexts) guards.push_back(net::make_work_guard(*context));
    return guards;
  }();
  // Accepting and draining run on this strand; each connection has a strand of its own.
  net::strand<net::io_context::executor_type> accept_strand = net::make_strand(ioc);
  tcp::acceptor acceptor{accept_strand};
  net::steady_timer accept_retry{accept_strand};
  std::optional<net::thread_pool> workers;
  std::optional<net::thread_pool> waiting;  // only when a route runs RunOn::kWaiting
  std::vector<std::thread> io_threads;
  int port = 0;
  bool started = false;
  bool drained = false;
  std::mutex drain_mu;
};

// One connection. Every member function runs on the connection's strand (one I/O thread at a
// time); a handler runs on a worker and hands its Response back through the strand.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  explicit SessionBase(Core& server) : server_(server) {}
  virtual ~SessionBase() { server_.Unregister(this); }
  // Drain: close now when idle between requests; otherwise the reply in progress ends it.
  virtual void OnDrain() = 0;

 protected:
  Core& server_;
};

template <class Stream>
class Session final : public SessionBase {
 public:
  template <class... Args>
  Session(Core& server, Args&&... args) : SessionBase(server), stream_(std::forward<Args>(args)...) {
    // Asio sets SSL_MODE_RELEASE_BUFFERS, so OpenSSL freed and reallocated its two 17 KB record
    // buffers around every record; with glibc each such allocation also consolidates the heap's
    // small free chunks. A TLS connection keeps its buffers instead (about 34 KB while idle).
    if constexpr (kTls) SSL_clear_mode(stream_.native_handle(), SSL_MODE_RELEASE_BUFFERS);
  }

  // Called once, from the accepting strand.
  void Run() {
    server_.Register(this, weak_from_this(), stream_.get_executor());
    net::dispatch(stream_.get_executor(), [self = Self()] { self->Begin(); });
  }

 private:
  void Begin() {
    if constexpr (kTls) {
      Tcp().expires_after(server_.options.header_timeout);
      stream_.async_handshake(net::ssl::stream_base::server, [self = Self()](error_code ec) {
        if (ec) return self->Close(ec == beast::error::timeout ? CloseReason::kHeaderTimeout : CloseReason::kError);
        self->WaitForRequest();
      });
    } else {
      WaitForRequest();
    }
  }

  void OnDrain() override {
    if (idle_) {
      closing_for_drain_ = true;
      Tcp().cancel();
    }
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }

  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  bool HasBufferedRequestBytes() {
    if (buffer_.size() > 0) return true;
    if constexpr (kTls) return SSL_pending(stream_.native_handle()) > 0;
    return false;
  }

  // Between requests: wait for the first byte under the idle timeout, then for the rest of the
  // headers under the header timeout.
  void WaitForRequest() {
    if (server_.draining) return Close(CloseReason::kDrain);
    if (HasBufferedRequestBytes()) return ReadHeader();
    if (buffer_.capacity() > kIdleReadBytes) buffer_.shrink_to_fit();
    idle_ = true;
    Tcp().expires_after(server_.options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = Self()](error_code ec, size_t n) {
      self->idle_ = false;
      if (self->closing_for_drain_) return self->Close(CloseReason::kDrain);
      if (ec == beast::error::timeout) return self->Close(CloseReason::kIdleTimeout);
      if (ec) return self->Close(CloseReason::kClient);
      self->buffer_.commit(n);
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(uint64_t(server_.options.max_body_bytes));
    Tcp().expires_after(server_.options.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_, [self = Self()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec == beast::error::timeout) return Close(CloseReason::kHeaderTimeout);
    if (ec == http::error::body_limit) return RefuseTooLarge();
    if (ec == http::error::header_limit) {
      return Refuse(431, "request headers larger than " + std::to_string(kMaxHeaderBytes) + " bytes\n");
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) {
      return Close(CloseReason::kClient);
    }
    if (ec) return Refuse(400, "malformed HTTP request: " + ec.message() + "\n");
    const auto& header = parser_->get();
    if (beast::iequals(header[http::field::expect], "100-continue") && !parser_->is_done()) {
      continue_ = http::response<http::empty_body>{http::status::continue_, 11};
      Tcp().expires_after(server_.options.write_timeout);
      http::async_write(stream_, continue_, [self = Self()](error_code ec, size_t) {
        if (ec) return self->Close(ec == beast::error::timeout ? CloseReason::kWriteTimeout : CloseReason::kError);
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return Dispatch();
    if (const auto length = parser_->content_length()) {
      buffer_.reserve(size_t(std::min<uint64_t>(buffer_.size() + *length, kBodyReadBytes)));
    }
    Tcp().expires_after(server_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = Self()](error_code ec, size_t) {
      if (ec == beast::error::timeout) return self->Close(CloseReason::kBodyTimeout);
      if (ec == http::error::body_limit) return self->RefuseTooLarge();
      if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) {
        return self->Close(CloseReason::kClient);
      }
      if (ec) return self->Refuse(400, "malformed HTTP request: " + ec.message() + "\n");
      self->Dispatch();
    });
  }

  void Dispatch() {
    Tcp().expires_never();
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    auto request = std::make_shared<Request>();
    request->method = std::string(message.method_string());
    const std::string_view target = message.target();
    const size_t question = target.find('?');
    request->path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) request->query = std::string(target.substr(question + 1));
    request->content_type = std::string(message[http::field::content_type]);
    request->body = std::move(message.body());

    // The probes answer on the I/O thread, so they answer even while every worker is busy.
    if (request->method == "GET" && (request->path == "/healthz" || request->path == "/readyz")) {
      const Probe& probe = request->path == "/healthz" ? server_.options.health : server_.options.readiness;
      return Write(server_.Guarded(*request, [&probe] {
        const std::string reason = probe ? probe() : "";
        return Response{reason.empty() ? 200 : 503, "text/plain", reason.empty() ? "ok\n" : reason + "\n", {}};
      }));
    }
    Response refusal;
    const Core::Route* route = nullptr;
    const bool builtin = request->path == "/healthz" || request->path == "/readyz" || request->path == "/metrics";
    if (builtin && request->method != "GET") {
      return Write(Response{405,
                            "text/plain",
                            "method " + request->method + " not allowed on " + request->path + "; allowed: GET\n",
                            {{"Allow", "GET"}}});
    }
    if (!builtin) {
      route = server_.Find(request->method, request->path, &refusal);
      if (route == nullptr) return Write(std::move(refusal));
      if (route->run_on == RunOn::kIoThread) {
        return Write(server_.Guarded(*request, [&] { return route->handler(*request); }));
      }
    }
    // Everything else, /metrics included, runs on a worker or, for a route that waits, on the
    // waiting pool.
    const bool waits = route != nullptr && route->run_on == RunOn::kWaiting;
    if (waits) {
      return net::post(*server_.waiting, [self = Self(), request, route] {
        self->Reply(self->server_.Guarded(*request, [&] { return route->handler(*request); }));
      });
    }
    net::post(*server_.workers, [self = Self(), request, route, queued_at = server_.Enqueue()] {
      if (std::optional<Response> shed = self->server_.TakeFromQueue(queued_at, *request)) {
        return self->Reply(std::move(*shed));
      }
      self->Reply(self->server_.Guarded(
          *request, [&] { return route != nullptr ? route->handler(*request) : self->server_.Metrics(); }));
    });
  }

  // From a worker: hands the reply back to the connection's strand.
  void Reply(Response response) {
    net::post(stream_.get_executor(),
              [self = Self(), response = std::move(response)]() mutable { self->Write(std::move(response)); });
  }

  // Sends the handler's reply; the connection stays open when the client wants it and the server
  // is not draining.
  void Write(Response response) {
    const bool keep_alive = keep_alive_ && !server_.draining;
    Send(std::move(response), keep_alive, keep_alive_ ? CloseReason::kDrain : CloseReason::kClient);
  }

  // Sends `response`; without keep-alive the connection then closes for `reason`.
  void Send(Response response, bool keep_alive, CloseReason reason) {
    server_.CountResponse(response.status);
    response_ = {};
    response_.version(11);
    response_.result(unsigned(response.status));
    response_.set(http::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) response_.set(name, value);
    response_.body() = std::move(response.body);
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    Tcp().expires_after(server_.options.write_timeout);
    http::async_write(stream_, response_, [self = Self(), keep_alive, reason](error_code ec, size_t) {
      if (ec) return self->Close(ec == beast::error::timeout ? CloseReason::kWriteTimeout : CloseReason::kError);
      if (!keep_alive) return self->Close(reason);
      self->WaitForRequest();
    });
  }

  // A reply that ends the connection: the rest of the request is not read.
  void Refuse(int status, std::string why) {
    keep_alive_ = false;
    lingering_ = true;
    Send(Response{status, "text/plain", std::move(why), {}}, false, CloseReason::kRefused);
  }

  void RefuseTooLarge() {
    Refuse(413, "request body too large: the limit is " + std::to_string(server_.options.max_body_bytes) + " bytes\n");
  }

  // Closes without waiting for a TLS close_notify (HTTP/1.1 replies are delimited, so clients do
  // not need one). After a refusal the unread rest of the request is drained first, so the close
  // does not turn into a reset that could destroy the reply before the client reads it.
  void Close(CloseReason reason) {
    server_.CountClose(reason);
    error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (!lingering_) return Tcp().close();
    Linger();
  }

  // Reads and drops what the client still sends until it closes or kLingerTimeout passes.
  void Linger() {
    Tcp().expires_after(kLingerTimeout);
    buffer_.clear();
    Tcp().async_read_some(buffer_.prepare(16384), [self = Self()](error_code ec, size_t) {
      if (ec) return self->Tcp().close();
      self->Linger();
    });
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::empty_body> continue_;
  http::response<http::string_body> response_;
  bool keep_alive_ = true;
  bool idle_ = false;
  bool closing_for_drain_ = false;
  bool lingering_ = false;
};

void Core::Accept() {
  net::io_context& context = *io_contexts[next_io_context++ % io_contexts.size()];
  acceptor.async_accept(net::make_strand(context),
                        [this](error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void Core::OnAccept(error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || draining) return;
  if (ec) {
    // Out of file descriptors, typically: the connections already open keep being served; try
    // again shortly rather than spinning.
    GPUPACK_LOG(kWarning, options.component) << "accept failed (retrying in 100 ms): " << ec.message();
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([this](error_code wait_ec) {
      if (!wait_ec && !draining) Accept();
    });
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // replies are single small writes
  if (tls) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, std::move(socket), *tls)->Run();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket))->Run();
  }
  Accept();
}

void Core::BeginDrain() {
  draining = true;
  error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  std::lock_guard lock(sessions_mu);
  for (const auto& [unused, live] : sessions) {
    net::post(live.strand, [weak = live.weak] {
      if (std::shared_ptr<SessionBase> session = weak.lock()) session->OnDrain();
    });
  }
}

}  // namespace

struct HttpServer::Impl final : Core {
  using Core::Core;
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { Drain(); }

void HttpServer::Handle(std::string method, std::string path, Handler handler, RunOn run_on) {
  GPUPACK_CHECK(!impl_->started);
  GPUPACK_CHECK(path != "/healthz" && path != "/readyz" && path != "/metrics");
  impl_->routes[std::move(path)][std::move(method)] = Core::Route{std::move(handler), run_on};
}

void HttpServer::AddMetrics(std::function<std::vector<prometheus::MetricFamily>()> collect) {
  GPUPACK_CHECK(!impl_->started);
  impl_->metric_sources.push_back(std::move(collect));
}

void HttpServer::AddMetrics(const prometheus::Collectable& collectable) {
  AddMetrics([&collectable] { return collectable.Collect(); });
}

int HttpServer::port() const { return impl_->port; }

int64_t HttpServer::queued() const { return impl_->queued_count.load(std::memory_order_relaxed); }

StatusOr<std::string> HttpServer::Start(const std::string& listen) {
  Impl& s = *impl_;
  GPUPACK_CHECK(!s.started);
  std::string host;
  int port = 0;
  GPUPACK_RETURN_IF_ERROR(ParseListenAddress(listen, &host, &port));
  error_code ec;
  net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {  // a host name, such as localhost: its first address
    tcp::resolver resolver(s.ioc);
    auto resolved = resolver.resolve(host, std::to_string(port), ec);
    if (ec || resolved.empty())
      return Status::InvalidArgument("listen address \"" + listen + "\": cannot resolve " + host);
    address = resolved.begin()->endpoint().address();
  }

  if (!s.options.tls_cert_file.empty() || !s.options.tls_key_file.empty()) {
    const Clock& clock = s.options.clock != nullptr ? *s.options.clock : SystemClock::Instance();
    GPUPACK_ASSIGN_OR_RETURN(
        s.certs, CertReloader::Create(s.options.tls_cert_file, s.options.tls_key_file, clock,
                                      std::chrono::duration_cast<Clock::Duration>(s.options.cert_check_interval)));
    s.tls.emplace(net::ssl::context::tls_server);
    SSL_CTX* ctx = s.tls->native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
    s.certs->InstallOn(ctx);
  }

  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::Unavailable("cannot listen on " + listen + ": " + ec.message());
  s.port = s.acceptor.local_endpoint().port();
  s.started = true;
  s.workers.emplace(size_t(s.options.worker_threads));
  for (const auto& [path, methods] : s.routes) {
    for (const auto& [method, route] : methods) {
      if (route.run_on == RunOn::kWaiting && !s.waiting) {
        s.waiting.emplace(size_t(std::max(1, s.options.waiting_threads)));
      }
    }
  }
  s.Accept();
  for (const auto& context : s.io_contexts) s.io_threads.emplace_back([&context] { context->run(); });
  const bool v6 = address.is_v6();
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(s.port);
}

void HttpServer::Drain() {
  Impl& s = *impl_;
  std::lock_guard drain_lock(s.drain_mu);
  if (!s.started || s.drained) return;
  s.drained = true;
  net::post(s.accept_strand, [&s] { s.BeginDrain(); });
  {
    std::unique_lock lock(s.sessions_mu);
    if (!s.sessions_cv.wait_for(lock, s.options.drain_timeout, [&s] { return s.sessions.empty(); })) {
      GPUPACK_LOG(kWarning, s.options.component)
          << s.sessions.size() << " connection(s) still open after the drain timeout: closing them";
    }
  }
  for (const auto& context : s.io_contexts) context->stop();
  for (std::thread& thread : s.io_threads) thread.join();
  s.workers->join();
  if (s.waiting) s.waiting->join();
}

}  // namespace gpupack::server
