// Long file: the tests of one component (the HTTP server), each a socket-level scenario.
// The server over real sockets on loopback (port 0): raw sockets where the test needs to control
// bytes and timing (slow headers, idle connections), httplib clients elsewhere. A deadline under
// test is set to a few hundred milliseconds, and the test asserts what its passing does (the
// connection closes, the close is counted with its reason), never how long anything took. Every
// wait for the server is bounded far beyond the deadlines, so a loaded machine slows a test down
// but does not fail it.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "server/test_certs.h"
#include "testing/eventually.h"
#include "testing/fake_clock.h"
#include "testing/loopback.h"
#include "testing/temp_dir.h"

namespace gpupack::server {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// A blocking TCP connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ConnectLoopback(port);
    connected_ = fd_ >= 0;
  }
  ~RawConnection() {
    if (connected_) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  void Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += size_t(n);
    }
  }
  // Reads one response (headers, then Content-Length bytes of body) within `timeout`; "" when
  // the connection closed or the time ran out first.
  std::string ReadResponse(milliseconds timeout = milliseconds(10000)) {
    const auto deadline = SteadyClock::now() + timeout;
    for (;;) {
      const size_t end = pending_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = 0;
        const size_t cl = Lower(pending_.substr(0, end)).find("content-length: ");
        if (cl != std::string::npos) length = std::stoul(pending_.substr(cl + 16));
        if (pending_.size() >= end + 4 + length) {
          std::string response = pending_.substr(0, end + 4 + length);
          pending_.erase(0, end + 4 + length);
          return response;
        }
      }
      if (!ReadSome(deadline)) return "";
    }
  }
  // True when the server closes the connection (EOF or reset) within `timeout`, discarding
  // whatever it sends first.
  bool ClosedWithin(milliseconds timeout) {
    const auto deadline = SteadyClock::now() + timeout;
    while (ReadSome(deadline)) pending_.clear();
    return closed_;
  }

 private:
  static std::string Lower(std::string text) {
    for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
    return text;
  }
  // Appends what arrives before `deadline`; false on EOF, error or time out.
  bool ReadSome(SteadyClock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, int(left)) <= 0) return false;
    char buffer[16384];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    pending_.append(buffer, size_t(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string pending_;
};

std::string Post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string Get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n"; }

// An echo route: POST /echo answers 200 with "<content type>|<body size>".
Handler Echo() {
  return [](const Request& req) {
    return Response{200, "text/plain", req.content_type + "|" + std::to_string(req.body.size()), {}};
  };
}

HttpServerOptions Quick() {
  HttpServerOptions o;
  o.component = "test";
  o.worker_threads = 1;
  o.idle_timeout = milliseconds(5000);
  o.header_timeout = milliseconds(5000);
  o.body_timeout = milliseconds(5000);
  o.drain_timeout = milliseconds(5000);
  return o;
}

std::unique_ptr<HttpServer> StartEcho(HttpServerOptions options) {
  auto server = std::make_unique<HttpServer>(std::move(options));
  server->Handle("POST", "/echo", Echo());
  server->Handle("PUT", "/echo", Echo());
  StatusOr<std::string> address = server->Start("127.0.0.1:0");
  GPUPACK_CHECK(address.ok());
  return server;
}

std::string MetricsOf(const HttpServer& server) {
  httplib::Client client("127.0.0.1", server.port());
  httplib::Result res = client.Get("/metrics");
  return res ? res->body : "";
}

// Whether /metrics comes to show `sample` (builders::Eventually's bound). A client sees a
// connection closed before the server has finished counting the close, so counters of closes are
// read until they settle.
bool MetricsEventuallyShow(const HttpServer& server, std::string_view sample) {
  return builders::Eventually([&] { return MetricsOf(server).find(sample) != std::string::npos; });
}

TEST(HttpServer, PortZeroReportsTheBoundAddress) {
  HttpServer server(Quick());
  StatusOr<std::string> address = server.Start("127.0.0.1:0");
  ASSERT_TRUE(address.ok()) << address.status();
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(*address, "127.0.0.1:" + std::to_string(server.port()));
}

TEST(HttpServer, BadOrUnbindableAddressesAreClearErrors) {
  HttpServer malformed(Quick());
  StatusOr<std::string> a = malformed.Start("127.0.0.1");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  HttpServer foreign(Quick());
  // TEST-NET-3: never a local address.
  StatusOr<std::string> b = foreign.Start("203.0.113.1:0");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("cannot listen on 203.0.113.1:0"), std::string::npos) << b.status();
}

TEST(HttpServer, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  auto server = StartEcho(Quick());
  httplib::Client client("127.0.0.1", server->port());
  httplib::Result missing = client.Post("/nope", "{}", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, "no such endpoint: POST /nope\n");
  httplib::Result wrong = client.Get("/echo");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST, PUT");
  EXPECT_EQ(wrong->body, "method GET not allowed on /echo; allowed: POST, PUT\n");
  httplib::Result health_post = client.Post("/healthz", "", "text/plain");
  ASSERT_TRUE(health_post);
  EXPECT_EQ(health_post->status, 405);
  EXPECT_EQ(health_post->get_header_value("Allow"), "GET");
  httplib::Result query = client.Post("/echo?x=1", "abc", "text/plain");
  ASSERT_TRUE(query);
  EXPECT_EQ(query->body, "text/plain|3") << "the query string is not part of the path";
}

// curl -d @file sends application/x-www-form-urlencoded; a 10 KB JSON body must
// reach the handler whole, whatever the content type says.
TEST(HttpServer, BodiesReachTheHandlerWholeWhateverTheirContentType) {
  auto server = StartEcho(Quick());
  const std::string body(10 * 1024, 'x');
  for (const char* type : {"application/x-www-form-urlencoded", "application/json", "text/plain; charset=utf-8",
                           "multipart/form-data; boundary=zz"}) {
    RawConnection c(server->port());
    c.Send(Post("/echo", body, "Content-Type: " + std::string(type) + "\r\n"));
    const std::string response = c.ReadResponse();
    EXPECT_EQ(response.substr(0, 15), "HTTP/1.1 200 OK") << type << "\n" << response;
    EXPECT_NE(response.find(std::string(type) + "|10240"), std::string::npos) << response;
  }
  RawConnection untyped(server->port());
  untyped.Send(Post("/echo", body));
  EXPECT_NE(untyped.ReadResponse().find("\r\n\r\n|10240"), std::string::npos);
}

TEST(HttpServer, ExpectContinueGetsA100BeforeTheBody) {
  auto server = StartEcho(Quick());
  RawConnection c(server->port());
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.ReadResponse(), "HTTP/1.1 100 Continue\r\n\r\n");
  c.Send("abcd");
  EXPECT_NE(c.ReadResponse().find("|4"), std::string::npos);
}

TEST(HttpServer, OversizeBodiesGet413NamingTheLimit) {
  HttpServerOptions options = Quick();
  options.max_body_bytes = 1000;
  auto server = StartEcho(options);
  {
    RawConnection c(server->port());
    c.Send(Post("/echo", std::string(1000, 'a')));
    EXPECT_NE(c.ReadResponse().find("|1000"), std::string::npos) << "exactly the limit is fine";
  }
  {  // Declared too large: refused before a byte of the body is read.
    RawConnection c(server->port());
    c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    const std::string response = c.ReadResponse();
    EXPECT_EQ(response.substr(0, 12), "HTTP/1.1 413") << response;
    EXPECT_NE(response.find("request body too large: the limit is 1000 bytes\n"), std::string::npos) << response;
    EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  }
  {  // Chunked, found too large while reading.
    RawConnection c(server->port());
    c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string("800\r\n") +
           std::string(0x800, 'b') + "\r\n0\r\n\r\n");
    EXPECT_EQ(c.ReadResponse().substr(0, 12), "HTTP/1.1 413");
  }
  httplib::Client client("127.0.0.1", server->port());
  client.set_keep_alive(true);
  httplib::Result big = client.Post("/echo", std::string(5000, 'c'), "application/json");
  ASSERT_TRUE(big) << "an httplib client sees the 413, not a reset: " << httplib::to_string(big.error());
  EXPECT_EQ(big->status, 413);
}

TEST(HttpServer, KeepAliveCarriesManyRequestsOnOneConnection) {
  auto server = StartEcho(Quick());
  RawConnection c(server->port());
  for (int i = 0; i < 5; ++i) {
    c.Send(Post("/echo", std::string(size_t(i), 'x')));
    const std::string response = c.ReadResponse();
    EXPECT_NE(response.find("|" + std::to_string(i)), std::string::npos) << response;
    EXPECT_EQ(response.find("Connection: close"), std::string::npos) << response;
  }
  // Two pipelined requests in one write are both answered, in order.
  c.Send(Post("/echo", "1") + Post("/echo", "22"));
  EXPECT_NE(c.ReadResponse().find("|1"), std::string::npos);
  EXPECT_NE(c.ReadResponse().find("|2"), std::string::npos);
  EXPECT_NE(MetricsOf(*server).find("gpupack_http_connections 2"), std::string::npos)
      << "this connection and the scrape's";
}

TEST(HttpServer, IdleKeptAliveConnectionsCloseAfterTheIdleTimeout) {
  HttpServerOptions options = Quick();
  options.idle_timeout = milliseconds(300);
  auto server = StartEcho(options);
  RawConnection c(server->port());
  c.Send(Post("/echo", "x"));
  ASSERT_NE(c.ReadResponse().find("|1"), std::string::npos);
  EXPECT_TRUE(c.ClosedWithin(milliseconds(10000)));
  // Closed by the idle timer, not for any other reason.
  EXPECT_TRUE(MetricsEventuallyShow(*server, R"(gpupack_http_connections_closed_total{reason="idle_timeout"} 1)"));
}

TEST(HttpServer, SlowHeadersAreCutAtTheHeaderDeadline) {
  HttpServerOptions options = Quick();
  options.header_timeout = milliseconds(300);
  auto server = StartEcho(options);
  RawConnection c(server->port());
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\n");  // ... and the rest never comes
  EXPECT_TRUE(c.ClosedWithin(milliseconds(10000)));
  // Trickling a byte now and then does not extend the deadline: a deadline that each byte moved
  // would keep this connection open for good.
  RawConnection trickle(server->port());
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    trickle.Send("X");
    closed = trickle.ClosedWithin(milliseconds(100));
  }
  EXPECT_TRUE(closed) << "still open after 100 bytes, one each 100 ms, against a 300 ms deadline";
  EXPECT_TRUE(MetricsEventuallyShow(*server, R"(gpupack_http_connections_closed_total{reason="header_timeout"} 2)"));
}

TEST(HttpServer, SlowBodiesAreCutAtTheBodyDeadline) {
  HttpServerOptions options = Quick();
  options.body_timeout = milliseconds(300);
  auto server = StartEcho(options);
  RawConnection c(server->port());
  c.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly ten b");
  EXPECT_TRUE(c.ClosedWithin(milliseconds(10000)));
  EXPECT_TRUE(MetricsEventuallyShow(*server, R"(gpupack_http_connections_closed_total{reason="body_timeout"} 1)"));
}

// The stall of a thread-per-connection server: a few idle keep-alive connections starved the
// next request. Here 100 idle connections (each served once, then kept alive) and 20 that
// never sent a byte, with idle and header deadlines of an hour, so that none of them is ever let
// go: a new client on a single worker thread is answered all the same, and they all stay usable.
TEST(HttpServer, ManyIdleKeepAliveConnectionsDoNotDelayTheNextRequest) {
  HttpServerOptions options = Quick();  // one worker
  options.idle_timeout = std::chrono::hours(1);
  options.header_timeout = std::chrono::hours(1);
  auto server = StartEcho(options);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server->port()));
    idle.back()->Send(Post("/echo", "x"));
    ASSERT_NE(idle.back()->ReadResponse().find("|1"), std::string::npos);
  }
  for (int i = 0; i < 20; ++i) idle.push_back(std::make_unique<RawConnection>(server->port()));
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(30);  // a bound on the wait, not on the server: it would otherwise wait an hour
  httplib::Result res = client.Post("/echo", "hello", "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->body, "application/json|5");
  for (auto& c : idle) {  // and they are all still usable
    c->Send(Post("/echo", "yy"));
    EXPECT_NE(c->ReadResponse().find("|2"), std::string::npos);
  }
}

// Workers busy (one worker, held by a slow request): the probes and a RunOn::kIoThread route
// still answer; a worker route waits its turn.
TEST(HttpServer, IoThreadRoutesAndProbesAnswerWhileEveryWorkerIsBusy) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  std::atomic<bool> slow_returned = false, queued_ran_before = false;
  HttpServer server(Quick());  // one worker
  server.Handle("POST", "/slow", [&](const Request&) {
    entered.set_value();
    released.wait();
    slow_returned = true;
    return Response{200, "text/plain", "slow", {}};
  });
  server.Handle("POST", "/fast", Echo(), RunOn::kIoThread);
  server.Handle("POST", "/queued", [&](const Request& req) {
    queued_ran_before = !slow_returned;
    return Echo()(req);
  });
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  RawConnection busy(server.port());
  busy.Send(Post("/slow", ""));
  entered.get_future().wait();
  RawConnection other(server.port());
  other.Send(Post("/fast", "abc"));
  EXPECT_NE(other.ReadResponse().find("|3"), std::string::npos);
  other.Send(Get("/healthz"));
  EXPECT_NE(other.ReadResponse().find("ok\n"), std::string::npos);
  other.Send(Post("/queued", "abcd"));
  release.set_value();
  EXPECT_NE(busy.ReadResponse().find("slow"), std::string::npos);
  EXPECT_NE(other.ReadResponse().find("|4"), std::string::npos);
  EXPECT_FALSE(queued_ran_before) << "a worker route ran while the only worker was busy";
}

TEST(HttpServer, WaitingRoutesHoldNoWorker) {
  // Three waits at once on a pool of three, while the one worker stays free for /echo.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> waiting = 0;
  HttpServerOptions options = Quick();  // one worker
  options.waiting_threads = 3;
  HttpServer server(options);
  server.Handle(
      "POST", "/wait",
      [&](const Request&) {
        ++waiting;
        released.wait();
        return Response{200, "text/plain", "waited", {}};
      },
      RunOn::kWaiting);
  server.Handle("POST", "/echo", Echo());
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  std::vector<std::unique_ptr<RawConnection>> waits;
  for (int i = 0; i < 3; ++i) {
    waits.push_back(std::make_unique<RawConnection>(server.port()));
    waits.back()->Send(Post("/wait", ""));
  }
  ASSERT_TRUE(builders::Eventually([&] { return waiting == 3; })) << "the three waits run at once";
  RawConnection other(server.port());
  other.Send(Post("/echo", "abc"));
  EXPECT_NE(other.ReadResponse().find("|3"), std::string::npos) << "the worker is free while all three wait";
  release.set_value();
  for (auto& c : waits) EXPECT_NE(c->ReadResponse().find("waited"), std::string::npos);
}

// One worker, held by /slow; two /echo requests queue behind it. The bound is 1 s on the fake
// clock: the first waits 1 s exactly (not more than the bound) and runs, then the clock moves
// 1.5 s on while the second still waits, so it has waited 2.5 s > 1 s and is answered 503 unrun.
// Waiting-pool routes are never shed, however long the clock says they waited.
TEST(HttpServer, ARequestQueuedPastTheBoundIsShedWith503AndRetryAfter) {
  FakeClock clock;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  std::atomic<int> echoes_run = 0;
  HttpServerOptions options = Quick();  // one worker
  options.clock = &clock;
  options.max_queue_wait = milliseconds(1000);
  options.waiting_threads = 1;
  HttpServer server(options);
  server.Handle("POST", "/slow", [&](const Request&) {
    entered.set_value();
    released.wait();
    return Response{200, "text/plain", "slow", {}};
  });
  server.Handle("POST", "/echo", [&](const Request& req) {
    ++echoes_run;
    if (echoes_run == 1) clock.Advance(milliseconds(1500));  // while the second is still queued
    return Echo()(req);
  });
  server.Handle("POST", "/wait", Echo(), RunOn::kWaiting);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  RawConnection busy(server.port());
  busy.Send(Post("/slow", ""));
  entered.get_future().wait();
  RawConnection first(server.port()), second(server.port());
  first.Send(Post("/echo", "a"));
  ASSERT_TRUE(builders::Eventually([&] { return server.queued() == 1; }));
  second.Send(Post("/echo", "bb"));
  ASSERT_TRUE(builders::Eventually([&] { return server.queued() == 2; }));
  clock.Advance(milliseconds(1000));
  RawConnection bind(server.port());
  bind.Send(Post("/wait", "ccc"));
  EXPECT_NE(bind.ReadResponse().find("|3"), std::string::npos) << "the waiting pool is not shed";
  release.set_value();
  EXPECT_NE(busy.ReadResponse().find("slow"), std::string::npos);
  EXPECT_NE(first.ReadResponse().find("|1"), std::string::npos) << "1000 ms is within the bound";
  const std::string shed = second.ReadResponse();
  EXPECT_NE(shed.find("HTTP/1.1 503"), std::string::npos) << shed;
  EXPECT_NE(shed.find("Retry-After: 1"), std::string::npos) << shed;
  EXPECT_NE(shed.find("test overloaded: POST /echo waited 2500 ms for a worker, more than the bound of 1000 ms"),
            std::string::npos)
      << shed;
  EXPECT_EQ(echoes_run, 1) << "the shed request's handler never ran";
  EXPECT_EQ(server.queued(), 0);
  const std::string metrics = MetricsOf(server);
  EXPECT_NE(metrics.find("gpupack_http_shed_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpupack_http_requests_queued 0"), std::string::npos) << metrics;
}

TEST(HttpServer, ProbesAndMetrics) {
  std::string unhealthy;
  std::string not_ready = "not synced yet";
  HttpServerOptions options = Quick();
  options.health = [&] { return unhealthy; };
  options.readiness = [&] { return not_ready; };
  HttpServer server(options);
  prometheus::Registry registry;
  prometheus::BuildCounter().Name("test_things_total").Help("Things.").Register(registry).Add({}).Increment(3);
  server.AddMetrics(registry);
  server.AddMetrics([] {
    prometheus::MetricFamily family;
    family.name = "test_computed";
    family.help = "Computed at scrape time.";
    family.type = prometheus::MetricType::Gauge;
    family.metric.emplace_back().gauge.value = 7;
    return std::vector<prometheus::MetricFamily>{family};
  });
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Get("/healthz")->body, "ok\n");
  httplib::Result ready = client.Get("/readyz");
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body, "not synced yet\n");
  not_ready = "";
  EXPECT_EQ(client.Get("/readyz")->status, 200);
  unhealthy = "loop stalled";
  EXPECT_EQ(client.Get("/healthz")->status, 503);
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics->body.find("# TYPE test_things_total counter\ntest_things_total 3\n"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("test_computed 7\n"), std::string::npos);
  EXPECT_NE(metrics->body.find("gpupack_http_responses_total{code=\"503\"} 2"), std::string::npos) << metrics->body;
}

// A handler that throws, on a worker or on an I/O thread, a std::exception or anything else:
// its request gets 500 naming the failure, the throw is counted, and the same connection and
// server go on serving.
TEST(HttpServer, AThrowingHandlerGets500AndTheServerCarriesOn) {
  HttpServer server(Quick());
  server.Handle("POST", "/echo", Echo());
  server.Handle("POST", "/std", [](const Request&) -> Response { throw std::runtime_error("the disk is gone"); });
  server.Handle("POST", "/other", [](const Request&) -> Response { throw 42; });
  server.Handle(
      "POST", "/io", [](const Request&) -> Response { throw std::logic_error("bad state"); }, RunOn::kIoThread);
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  RawConnection c(server.port());
  c.Send(Post("/std", ""));
  std::string response = c.ReadResponse();
  EXPECT_EQ(response.substr(0, 12), "HTTP/1.1 500") << response;
  EXPECT_NE(response.find("internal error in POST /std: the disk is gone\n"), std::string::npos) << response;
  c.Send(Post("/other", ""));
  response = c.ReadResponse();
  EXPECT_EQ(response.substr(0, 12), "HTTP/1.1 500") << response;
  EXPECT_NE(response.find("internal error in POST /other: an exception that is not a std::exception\n"),
            std::string::npos)
      << response;
  c.Send(Post("/io", ""));
  EXPECT_NE(c.ReadResponse().find("internal error in POST /io: bad state\n"), std::string::npos);
  c.Send(Post("/echo", "abc"));
  response = c.ReadResponse();
  EXPECT_EQ(response.substr(0, 15), "HTTP/1.1 200 OK") << response;
  EXPECT_NE(response.find("|3"), std::string::npos) << response;
  const std::string metrics = MetricsOf(server);
  EXPECT_NE(metrics.find("gpupack_http_handler_exceptions_total 3\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpupack_http_responses_total{code=\"500\"} 3"), std::string::npos) << metrics;
}

TEST(HttpServer, DrainFinishesInFlightRequestsAndClosesIdleOnes) {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  HttpServerOptions options = Quick();
  options.drain_timeout = std::chrono::hours(1);  // so that Drain ends only when the request does
  HttpServer server(options);
  server.Handle("POST", "/slow", [&](const Request&) {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return Response{200, "text/plain", "finished", {}};
  });
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  const int port = server.port();
  RawConnection idle(port);
  idle.Send(Get("/healthz"));
  ASSERT_NE(idle.ReadResponse().find("ok"), std::string::npos);
  RawConnection busy(port);
  busy.Send(Post("/slow", ""));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return entered; }));
  }
  std::atomic<bool> drain_returned = false;
  std::future<void> drained = std::async(std::launch::async, [&] {
    server.Drain();
    drain_returned = true;
  });
  EXPECT_TRUE(idle.ClosedWithin(milliseconds(10000))) << "idle connections close at once";
  RawConnection late(port);
  EXPECT_TRUE(!late.connected() || late.ClosedWithin(milliseconds(10000))) << "no longer accepting";
  // Drain has closed the idle connection and stopped accepting, and still waits for the request
  // in flight.
  EXPECT_FALSE(drain_returned);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  const std::string response = busy.ReadResponse();
  EXPECT_NE(response.find("finished"), std::string::npos) << response;
  EXPECT_NE(response.find("Connection: close"), std::string::npos) << response;
  EXPECT_EQ(drained.wait_for(std::chrono::seconds(30)), std::future_status::ready);
}

// A fresh TLS connection that trusts only `ca_file`: the body of /echo, or "" when the handshake
// did not verify.
std::string EchoTrusting(int port, const std::string& ca_file) {
  httplib::SSLClient client("127.0.0.1", port);
  client.set_ca_cert_path(ca_file.c_str());
  client.enable_server_certificate_verification(true);
  client.set_connection_timeout(5);
  httplib::Result res = client.Post("/echo", "abc", "text/plain");
  return res && res->status == 200 ? res->body : "";
}

TEST(HttpServer, TlsServesARotatedCertificateWithoutRestart) {
  TempDir dir;
  FakeClock clock;
  PemPair first = MakeSelfSignedCert("first");
  PemPair second = MakeSelfSignedCert("second");
  WriteFileAtomically(dir.File("tls.crt"), first.cert_pem);
  WriteFileAtomically(dir.File("tls.key"), first.key_pem);
  WriteFileAtomically(dir.File("first.crt"), first.cert_pem);
  WriteFileAtomically(dir.File("second.crt"), second.cert_pem);
  HttpServerOptions options = Quick();
  options.tls_cert_file = dir.File("tls.crt");
  options.tls_key_file = dir.File("tls.key");
  options.cert_check_interval = std::chrono::seconds(10);
  options.clock = &clock;
  auto server = StartEcho(options);
  EXPECT_EQ(EchoTrusting(server->port(), dir.File("first.crt")), "text/plain|3");
  EXPECT_EQ(EchoTrusting(server->port(), dir.File("second.crt")), "");

  WriteFileAtomically(dir.File("tls.crt"), second.cert_pem);
  WriteFileAtomically(dir.File("tls.key"), second.key_pem);
  clock.Advance(std::chrono::seconds(9));
  EXPECT_NE(EchoTrusting(server->port(), dir.File("first.crt")), "") << "not looked at within the interval";
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(EchoTrusting(server->port(), dir.File("second.crt")), "text/plain|3");
  EXPECT_EQ(EchoTrusting(server->port(), dir.File("first.crt")), "");

  // A half-written rotation (a new certificate with the old key) is not taken into service.
  PemPair third = MakeSelfSignedCert("third");
  WriteFileAtomically(dir.File("tls.crt"), third.cert_pem);
  clock.Advance(std::chrono::seconds(10));
  EXPECT_NE(EchoTrusting(server->port(), dir.File("second.crt")), "");

  // Plain HTTP to the TLS port gets no answer.
  httplib::Client plain("127.0.0.1", server->port());
  plain.set_read_timeout(5);
  httplib::Result cleartext = plain.Get("/healthz");
  EXPECT_TRUE(!cleartext || cleartext->status != 200);
}

TEST(HttpServer, TlsKeepAliveAndDrain) {
  TempDir dir;
  PemPair pair = MakeSelfSignedCert("keep");
  WriteFileAtomically(dir.File("tls.crt"), pair.cert_pem);
  WriteFileAtomically(dir.File("tls.key"), pair.key_pem);
  HttpServerOptions options = Quick();
  options.tls_cert_file = dir.File("tls.crt");
  options.tls_key_file = dir.File("tls.key");
  // Deadlines of an hour: Drain returns only because it closes the idle connection at once.
  options.idle_timeout = std::chrono::hours(1);
  options.drain_timeout = std::chrono::hours(1);
  auto server = StartEcho(options);
  httplib::SSLClient client("127.0.0.1", server->port());
  client.set_ca_cert_path(dir.File("tls.crt").c_str());
  client.enable_server_certificate_verification(true);
  client.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) {
    httplib::Result res = client.Post("/echo", std::string(size_t(i), 'z'), "application/json");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->body, "application/json|" + std::to_string(i));
  }
  std::future<void> drained = std::async(std::launch::async, [&] { server->Drain(); });
  EXPECT_EQ(drained.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the kept-alive TLS connection is idle: Drain closes it rather than waiting for it";
}

TEST(HttpServer, RefusesToStartWithAnUnusableCertificate) {
  TempDir dir;
  PemPair pair = MakeSelfSignedCert("x");
  PemPair other = MakeSelfSignedCert("y");
  WriteFileAtomically(dir.File("tls.crt"), pair.cert_pem);
  WriteFileAtomically(dir.File("tls.key"), other.key_pem);
  HttpServerOptions options = Quick();
  options.tls_cert_file = dir.File("tls.crt");
  options.tls_key_file = dir.File("tls.key");
  HttpServer mismatched(options);
  StatusOr<std::string> started = mismatched.Start("127.0.0.1:0");
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("does not belong"), std::string::npos) << started.status();
  options.tls_cert_file = dir.File("missing.crt");
  HttpServer missing(options);
  EXPECT_EQ(missing.Start("127.0.0.1:0").status().code(), StatusCode::kNotFound);
}

TEST(ListenAddress, Parses) {
  std::string host;
  int port = -1;
  ASSERT_TRUE(ParseListenAddress("127.0.0.1:0", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(ParseListenAddress("[::1]:8888", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  ASSERT_TRUE(ParseListenAddress(":8888", &host, &port).ok());
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 8888);
  EXPECT_FALSE(ParseListenAddress("localhost", &host, &port).ok());
  EXPECT_FALSE(ParseListenAddress("h:99999", &host, &port).ok());
  EXPECT_FALSE(ParseListenAddress("h:", &host, &port).ok());
}

}  // namespace
}  // namespace gpupack::server
