// Long file: every behaviour of the one Client (calls, retries, keep-alive, watches, tokens) against
// the same fixture and retry helpers; split with the client if it splits.
#include "kube/client.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/eventually.h"
#include "testing/fake_clock.h"
#include "testing/test_apiserver.h"

namespace gpupack::kube {
namespace {

RetryPolicy FastRetries() {
  RetryPolicy p;
  p.max_attempts = 3;
  p.initial_backoff = std::chrono::milliseconds(1);
  p.max_backoff = std::chrono::milliseconds(2);
  p.call_timeout = std::chrono::milliseconds(5000);
  return p;
}

StatusOr<std::unique_ptr<Client>> ClientOf(const std::string& url, const RetryPolicy& p) {
  Config c;
  c.server = url;
  return Client::Create(c, p);
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    Config c;
    c.server = server_.url();
    auto client = Client::Create(c, FastRetries());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
  }

  Json Pod(const std::string& name, const std::string& node = "") {
    Json p = {{"metadata", {{"name", name}, {"labels", {{"app", "x"}}}}},
              {"spec", {{"containers", Json::array({{{"name", "main"}}})}}}};
    if (!node.empty()) p["spec"]["nodeName"] = node;
    return p;
  }

  e2e::TestApiServer server_;
  std::unique_ptr<Client> client_;
};

TEST(StatusFromHttpTest, MapsCodes) {
  EXPECT_TRUE(StatusFromHttp(201, "", "x").ok());
  EXPECT_EQ(StatusFromHttp(409, R"({"reason":"Conflict","message":"m"})", "x").code(), StatusCode::kConflict);
  EXPECT_EQ(StatusFromHttp(409, R"({"reason":"AlreadyExists"})", "x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(StatusFromHttp(410, "", "x").code(), StatusCode::kGone);
  EXPECT_EQ(StatusFromHttp(401, "", "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromHttp(403, "", "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromHttp(404, "", "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(StatusFromHttp(422, "", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromHttp(503, "", "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromHttp(429, "", "x").code(), StatusCode::kUnavailable);
  // The server's message is carried.
  EXPECT_NE(
      StatusFromHttp(409, R"({"message":"pod p is already assigned"})", "POST /b").message().find("already assigned"),
      std::string::npos);
}

TEST(ResourceTest, Paths) {
  EXPECT_EQ(PodsResource().CollectionPath(""), "/api/v1/pods");
  EXPECT_EQ(PodsResource().ObjectPath("ml", "p", "binding"), "/api/v1/namespaces/ml/pods/p/binding");
  EXPECT_EQ(GpuNodesResource().ObjectPath("", "n1", "status"), "/apis/gpupack.io/v1alpha1/gpunodes/n1/status");
  EXPECT_EQ(LeasesResource().CollectionPath("kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
}

TEST(ClientCreateTest, RejectsBadServerUrls) {
  for (const char* url : {"ftp://x", "https://", "http://h:notaport", "http://h:1/path"}) {
    Config c;
    c.server = url;
    EXPECT_EQ(Client::Create(c).status().code(), StatusCode::kInvalidArgument) << url;
  }
  Config c;
  c.server = "https://h";
  c.ca_pem = "not a pem";
  EXPECT_EQ(Client::Create(c).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, CreateGetListWithSelectors) {
  ASSERT_TRUE(client_->Create(PodsResource(), "a", Pod("p1", "n1")).ok());
  ASSERT_TRUE(client_->Create(PodsResource(), "b", Pod("p2")).ok());
  EXPECT_EQ(client_->Create(PodsResource(), "a", Pod("p1")).status().code(), StatusCode::kAlreadyExists);

  auto got = client_->GetPod("a", "p1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["spec"]["nodeName"], "n1");
  EXPECT_EQ(client_->GetPod("a", "nope").status().code(), StatusCode::kNotFound);

  auto all = client_->List(PodsResource(), "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->items.size(), 2u);
  EXPECT_EQ(all->resource_version, std::to_string(server_.resource_version()));

  ListOptions on_n1;
  on_n1.field_selector = "spec.nodeName=n1";
  auto bound = client_->List(PodsResource(), "", on_n1);
  ASSERT_TRUE(bound.ok());
  ASSERT_EQ(bound->items.size(), 1u);
  EXPECT_EQ(ObjectKey(bound->items[0]), "a/p1");

  ListOptions unbound;
  unbound.field_selector = "spec.nodeName=";
  unbound.label_selector = "app=x";
  auto u = client_->List(PodsResource(), "", unbound);
  ASSERT_TRUE(u.ok());
  ASSERT_EQ(u->items.size(), 1u);
  EXPECT_EQ(ObjectKey(u->items[0]), "b/p2");

  auto in_b = client_->List(PodsResource(), "b");
  ASSERT_TRUE(in_b.ok());
  EXPECT_EQ(in_b->items.size(), 1u);
}

TEST_F(ClientTest, BindingSetsNodeAndAnnotationsAtomicallyAndOnlyOnce) {
  auto created = client_->Create(PodsResource(), "ml", Pod("train"));
  ASSERT_TRUE(created.ok());
  const std::string uid = (*created)["metadata"]["uid"];

  EXPECT_EQ(client_->CreateBinding("ml", "train", "other-uid", "n1", {}).code(), StatusCode::kConflict);
  ASSERT_TRUE(client_->CreateBinding("ml", "train", uid, "n1", {{"gpupack.io/allocation", "{}"}}).ok());
  auto pod = client_->GetPod("ml", "train");
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ((*pod)["spec"]["nodeName"], "n1");
  EXPECT_EQ((*pod)["metadata"]["annotations"]["gpupack.io/allocation"], "{}");

  Status again = client_->CreateBinding("ml", "train", uid, "n2", {});
  EXPECT_EQ(again.code(), StatusCode::kConflict);
  EXPECT_NE(again.message().find("already assigned"), std::string::npos) << again;
  EXPECT_EQ(client_->CreateBinding("ml", "ghost", "", "n1", {}).code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, StaleUpdateConflicts) {
  auto created = client_->Create(LeasesResource(), "kube-system",
                                 {{"metadata", {{"name", "l"}}}, {"spec", {{"holderIdentity", "a"}}}});
  ASSERT_TRUE(created.ok());
  Json first = *created;
  first["spec"]["holderIdentity"] = "b";
  auto updated = client_->Update(LeasesResource(), "kube-system", first);
  ASSERT_TRUE(updated.ok()) << updated.status();
  Json stale = *created;  // old resourceVersion
  stale["spec"]["holderIdentity"] = "c";
  EXPECT_EQ(client_->Update(LeasesResource(), "kube-system", stale).status().code(), StatusCode::kConflict);
  auto now = client_->Get(LeasesResource(), "kube-system", "l");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)["spec"]["holderIdentity"], "b");
}

TEST_F(ClientTest, PatchNodeStatusMergesCapacity) {
  ASSERT_TRUE(
      client_->Create(NodesResource(), "", {{"metadata", {{"name", "n1"}}}, {"spec", {{"podCIDR", "10.0.0.0/24"}}}})
          .ok());
  auto patched = client_->PatchNodeStatus("n1", {{"status", {{"capacity", {{"gpupack.io/gpu-memory", "81920Mi"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  auto patched2 = client_->PatchNodeStatus("n1", {{"status", {{"capacity", {{"gpupack.io/gpu", "16"}}}}}});
  ASSERT_TRUE(patched2.ok());
  auto node = client_->GetNode("n1");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ((*node)["status"]["capacity"]["gpupack.io/gpu-memory"], "81920Mi");
  EXPECT_EQ((*node)["status"]["capacity"]["gpupack.io/gpu"], "16");
  EXPECT_EQ((*node)["spec"]["podCIDR"], "10.0.0.0/24");
}

TEST_F(ClientTest, UpsertGpuNodeStatusCreatesThenUpdates) {
  auto first = client_->UpsertGpuNodeStatus("n1", {{"heartbeatTime", "2026-11-29T10:00:00Z"}});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = client_->UpsertGpuNodeStatus("n1", {{"heartbeatTime", "2026-11-29T10:00:30Z"}});
  ASSERT_TRUE(second.ok()) << second.status();
  auto got = client_->GetGpuNode("n1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["status"]["heartbeatTime"], "2026-11-29T10:00:30Z");
  EXPECT_EQ((*got)["kind"], "GPUNode");
}

TEST_F(ClientTest, CreateEvent) {
  EventSpec ev;
  ev.ns = "ml";
  ev.involved_object = {{"kind", "Pod"}, {"namespace", "ml"}, {"name", "train"}, {"uid", "u1"}};
  ev.reason = "GpupackAssigned";
  ev.message = "GPU-1 8192MiB";
  ASSERT_TRUE(client_->CreateEvent(ev).ok());
  auto events = client_->List(EventsResource(), "ml");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->items.size(), 1u);
  EXPECT_EQ(events->items[0]["reason"], "GpupackAssigned");
  EXPECT_EQ(events->items[0]["involvedObject"]["name"], "train");
}

TEST_F(ClientTest, EvictPodPostsAPolicyV1EvictionWithTheUidPrecondition) {
  auto created = client_->Create(PodsResource(), "ml", Pod("stray", "n1"));
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string uid = (*created)["metadata"]["uid"];
  auto answer = client_->EvictPod("ml", "stray", uid);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(answer->evicted);
  ASSERT_EQ(server_.evictions().size(), 1u);
  const e2e::EvictionRecord sent = server_.evictions()[0];
  EXPECT_EQ(sent.code, 201);
  EXPECT_EQ(sent.body, (Json{{"apiVersion", "policy/v1"},
                             {"kind", "Eviction"},
                             {"metadata", {{"name", "stray"}, {"namespace", "ml"}}},
                             {"deleteOptions", {{"preconditions", {{"uid", uid}}}}}}));
  // A pod on a node is deleted gracefully, as its kubelet would finish it.
  auto pod = client_->GetPod("ml", "stray");
  ASSERT_TRUE(pod.ok());
  EXPECT_TRUE((*pod)["metadata"].contains("deletionTimestamp"));
  // A re-created pod of the same name is not the one that was meant.
  EXPECT_EQ(client_->EvictPod("ml", "stray", "another-uid").status().code(), StatusCode::kConflict);
  EXPECT_EQ(client_->EvictPod("ml", "gone", "").status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, EvictionRefusedByADisruptionBudgetIsAnAnswerNotRetried) {
  ASSERT_TRUE(client_->Create(PodsResource(), "ml", Pod("web-0", "n1")).ok());
  const Resource pdbs{"policy", "v1", "poddisruptionbudgets", true};
  auto pdb = client_->Create(
      pdbs, "ml", Json{{"metadata", {{"name", "web"}}}, {"spec", {{"selector", {{"matchLabels", {{"app", "x"}}}}}}}});
  ASSERT_TRUE(pdb.ok()) << pdb.status();
  (*pdb)["status"] = {{"disruptionsAllowed", 0}};
  ASSERT_TRUE(client_->Update(pdbs, "ml", *pdb, "status").ok());
  auto answer = client_->EvictPod("ml", "web-0", "");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_FALSE(answer->evicted);
  EXPECT_NE(answer->message.find("The disruption budget web"), std::string::npos) << answer->message;
  EXPECT_EQ(server_.evictions().size(), 1u) << "a budget's refusal is not retried";
  auto pod = client_->GetPod("ml", "web-0");
  ASSERT_TRUE(pod.ok());
  EXPECT_FALSE((*pod)["metadata"].contains("deletionTimestamp"));
}

// A 429 without a DisruptionBudget cause is the API server's throttling: retried like a 5xx.
TEST(ClientEvictionTest, ThrottlingIsRetried) {
  httplib::Server server;
  std::atomic<int> calls{0};
  server.Post(R"(/api/v1/namespaces/ml/pods/p/eviction)", [&](const httplib::Request&, httplib::Response& res) {
    res.status = ++calls == 1 ? 429 : 201;
    res.set_content(R"({"kind":"Status","status":"Failure","reason":"TooManyRequests","message":"slow down"})",
                    "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  RetryPolicy policy = FastRetries();
  policy.idle_connections = 0;  // no kept-alive connection for the server's stop to wait out
  auto client = ClientOf("http://127.0.0.1:" + std::to_string(port), policy);
  ASSERT_TRUE(client.ok());
  auto answer = (*client)->EvictPod("ml", "p", "u");
  server.stop();
  serving.join();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(answer->evicted);
  EXPECT_EQ(calls, 2);
}

TEST_F(ClientTest, ServerErrorsAreRetriedThenReportedUnavailable) {
  e2e::Faults f;
  f.error_rate = 1.0;
  server_.SetFaults(f);
  EXPECT_EQ(client_->GetPod("a", "p").status().code(), StatusCode::kUnavailable);
  // Faults limited to one path leave the others alone.
  f.path_contains = "/binding";
  server_.SetFaults(f);
  EXPECT_EQ(client_->GetPod("a", "p").status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, TransientErrorsAreRetriedToSuccess) {
  e2e::Faults f;
  f.error_rate = 0.5;
  server_.SetFaults(f);
  RetryPolicy p = FastRetries();
  p.max_attempts = 30;
  auto patient = ClientOf(server_.url(), p);
  ASSERT_TRUE(patient.ok());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ((*patient)->GetPod("a", "p").status().code(), StatusCode::kNotFound);
  }
}

TEST_F(ClientTest, ConnectionRefusedIsUnavailable) {
  Config c;
  c.server = server_.url();
  server_.Stop();
  auto client = Client::Create(c, FastRetries());
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->GetPod("a", "p").status().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, CallsReuseKeptAliveConnections) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(client_->GetPod("a", "p").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->connections_opened(), 1u);
  // Concurrent calls each take a connection of their own; none waits for another's.
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> not_found{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) not_found += client_->GetPod("a", "p").status().code() == StatusCode::kNotFound;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(not_found.load(), kThreads * 10);
  EXPECT_LE(client_->connections_opened(), uint64_t{kThreads});

  RetryPolicy no_pool = FastRetries();
  no_pool.idle_connections = 0;
  auto unpooled = ClientOf(server_.url(), no_pool);
  ASSERT_TRUE(unpooled.ok());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE((*unpooled)->GetPod("a", "p").ok());
  EXPECT_EQ((*unpooled)->connections_opened(), 3u);
}

TEST(ClientKeepAliveTest, ServerClosingIdleConnectionsCostsNoFailedCall) {
  e2e::TestApiServerOptions o;
  o.keep_alive_timeout = std::chrono::seconds(1);
  e2e::TestApiServer server(o);
  ASSERT_TRUE(server.Start().ok());
  RetryPolicy once = FastRetries();
  once.max_attempts = 1;  // a call that met the closed connection would fail: no retry hides it
  auto client = ClientOf(server.url(), once);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->GetPod("a", "p").status().code(), StatusCode::kNotFound);
  // The server closes the idle connection after its keep-alive timeout.
  ASSERT_TRUE(builders::Eventually([&] { return server.connections_closed() == 1; }));
  EXPECT_EQ((*client)->GetPod("a", "p").status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*client)->connections_opened(), 2u);
}

// A server that answers the first request of its first connection, then reads the second one and
// closes the connection without answering (as a server that times the connection out just as the
// request arrives), and answers every request on later connections.
class ClosingServer {
 public:
  ClosingServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    GPUPACK_CHECK(::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) == 0);
    GPUPACK_CHECK(::listen(listener_, 8) == 0);
    GPUPACK_CHECK(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ClosingServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  // One request (head and Content-Length body); its request line, or "" at the end of the stream.
  static std::string ReadRequest(int fd) {
    std::string data;
    char buf[4096];
    size_t head_end;
    while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return "";
      data.append(buf, static_cast<size_t>(n));
    }
    size_t body = 0;
    if (size_t cl = data.find("Content-Length: "); cl != std::string::npos) body = std::stoul(data.substr(cl + 16));
    while (data.size() < head_end + 4 + body) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return "";
      data.append(buf, static_cast<size_t>(n));
    }
    return data.substr(0, data.find("\r\n"));
  }
  void Serve() {
    for (int connection = 0;; ++connection) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      for (int request = 0;; ++request) {
        const std::string line = ReadRequest(fd);
        if (line.empty()) break;
        {
          std::lock_guard<std::mutex> l(mu_);
          requests_.push_back(line);
        }
        if (connection == 0 && request == 1) break;
        const std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        if (::write(fd, reply.data(), reply.size()) != static_cast<ssize_t>(reply.size())) break;
      }
      ::close(fd);
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

TEST(ClientKeepAliveTest, RequestMetByAClosingConnectionIsSentAgainOnlyWhenSafe) {
  RetryPolicy once = FastRetries();
  once.max_attempts = 1;
  {
    ClosingServer server;
    auto client = ClientOf(server.url(), once);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->GetNode("n1").ok());
    // The second GET meets the closing connection and is sent again, at once, on a new one.
    auto again = (*client)->GetNode("n1");
    EXPECT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(server.requests().size(), 3u);
    EXPECT_EQ((*client)->connections_opened(), 2u);
  }
  {
    ClosingServer server;
    auto client = ClientOf(server.url(), once);
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE((*client)->GetNode("n1").ok());
    // A POST that reached the server may have been applied: it is not sent again here (the retry
    // policy decides, and allows one attempt).
    EXPECT_EQ((*client)->Create(PodsResource(), "a", Json{{"metadata", {{"name", "p"}}}}).status().code(),
              StatusCode::kUnavailable);
    const std::vector<std::string> seen = server.requests();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[1].rfind("POST ", 0), 0u) << seen[1];
  }
}

TEST_F(ClientTest, WatchResumesFromResourceVersion) {
  ASSERT_TRUE(client_->Create(PodsResource(), "a", Pod("p1")).ok());
  auto list = client_->List(PodsResource(), "");
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(client_->Create(PodsResource(), "a", Pod("p2")).ok());
  ASSERT_TRUE(client_->Delete(PodsResource(), "a", "p1").ok());

  std::vector<std::string> seen;
  WatchOptions wo;
  wo.resource_version = list->resource_version;
  Status s = client_->Watch(PodsResource(), "", wo, [&](const WatchEvent& ev) {
    if (ev.type == WatchEvent::Type::kBookmark) return true;
    seen.push_back(std::string(ev.type == WatchEvent::Type::kAdded ? "ADDED " : "DELETED ") + ObjectKey(ev.object));
    return seen.size() < 2;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED a/p2", "DELETED a/p1"}));
}

TEST_F(ClientTest, WatchFromCompactedVersionIsGone) {
  ASSERT_TRUE(client_->Create(PodsResource(), "a", Pod("p1")).ok());
  ASSERT_TRUE(client_->Create(PodsResource(), "a", Pod("p2")).ok());
  server_.CompactHistory();
  WatchOptions wo;
  wo.resource_version = "1";
  Status s = client_->Watch(PodsResource(), "", wo, [](const WatchEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kGone) << s;
}

TEST_F(ClientTest, WatchSelectorTransitionsAndCancel) {
  auto created = client_->Create(PodsResource(), "a", Pod("p1"));
  ASSERT_TRUE(created.ok());
  WatchOptions wo;
  wo.resource_version = std::to_string(server_.resource_version());
  wo.field_selector = "spec.nodeName=n1";
  WatchCanceller canceller;
  std::vector<WatchEvent::Type> types;
  std::thread watcher([&] {
    Status s = client_->Watch(
        PodsResource(), "", wo,
        [&](const WatchEvent& ev) {
          if (ev.type != WatchEvent::Type::kBookmark) types.push_back(ev.type);
          if (types.size() == 1) canceller.Cancel();
          return true;
        },
        &canceller);
    EXPECT_TRUE(s.ok()) << s;
  });
  // Binding makes the pod match the selector: the watcher sees it ADDED, then cancels.
  while (server_.open_watches() == 0) std::this_thread::yield();
  ASSERT_TRUE(client_->CreateBinding("a", "p1", "", "n1", {}).ok());
  watcher.join();
  EXPECT_EQ(types, (std::vector<WatchEvent::Type>{WatchEvent::Type::kAdded}));
}

TEST_F(ClientTest, DroppedWatchIsUnavailable) {
  WatchOptions wo;
  wo.resource_version = std::to_string(server_.resource_version());
  std::thread dropper([&] {
    while (server_.open_watches() == 0) std::this_thread::yield();
    server_.DropWatches();
  });
  Status s = client_->Watch(PodsResource(), "", wo, [](const WatchEvent&) { return true; });
  dropper.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
}

TEST(ClientStallTest, SilentWatchStreamIsDetected) {
  e2e::TestApiServerOptions o;
  o.bookmark_interval = std::chrono::hours(1);  // the stream stays silent
  e2e::TestApiServer server(o);
  ASSERT_TRUE(server.Start().ok());
  Config c;
  c.server = server.url();
  auto client = Client::Create(c, FastRetries());
  ASSERT_TRUE(client.ok());
  WatchOptions wo;
  wo.resource_version = std::to_string(server.resource_version());
  wo.stall_timeout = std::chrono::milliseconds(200);
  Status s = (*client)->Watch(PodsResource(), "", wo, [](const WatchEvent&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
}

// A server that accepts one bearer token only, to check the token file is re-read.
TEST(ClientTokenTest, RereadsTokenFileAfter401AndPeriodically) {
  httplib::Server srv;
  std::mutex mu;
  std::string accepted = "new";
  std::vector<std::string> seen;
  srv.Get("/api/v1/nodes/n1", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    const std::string auth = req.get_header_value("Authorization");
    seen.push_back(auth);
    if (auth != "Bearer " + accepted) {
      res.status = 401;
      res.set_content(R"({"kind":"Status","code":401,"message":"Unauthorized"})", "application/json");
      return;
    }
    res.set_content(R"({"metadata":{"name":"n1"}})", "application/json");
  });
  const int port = srv.bind_to_any_port("127.0.0.1");
  std::thread t([&] { srv.listen_after_bind(); });

  const std::string token_path = ::testing::TempDir() + "/gpupack_token_test";
  auto write_token = [&](const std::string& tok) { std::ofstream(token_path) << tok << "\n"; };
  write_token("old");
  Config c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  c.token_file = token_path;
  FakeClock clock;
  auto client = Client::Create(c, FastRetries(), &clock);
  ASSERT_TRUE(client.ok());

  // The server rejects "old": the call fails with PermissionDenied after one re-read.
  EXPECT_EQ((*client)->GetNode("n1").status().code(), StatusCode::kPermissionDenied);
  // The kubelet rotates the token: the next 401 triggers a re-read, and the call succeeds.
  write_token("new");
  EXPECT_TRUE((*client)->GetNode("n1").ok());
  // Periodic re-read: after the period, the new token is used without a 401 first.
  {
    std::lock_guard<std::mutex> l(mu);
    accepted = "newer";
    seen.clear();
  }
  write_token("newer");
  clock.Advance(std::chrono::seconds(61));
  EXPECT_TRUE((*client)->GetNode("n1").ok());
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(seen, (std::vector<std::string>{"Bearer newer"}));
  }
  srv.stop();
  t.join();
  std::remove(token_path.c_str());
}

}  // namespace
}  // namespace gpupack::kube
