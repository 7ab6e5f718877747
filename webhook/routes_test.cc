// The webhook's routes on the shared server over real TLS on loopback: port 0, a certificate made
// in the test, httplib clients that verify the server against exactly the certificate they were
// given.
#include "webhook/routes.h"

#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/test_certs.h"
#include "testing/fake_clock.h"
#include "testing/temp_dir.h"

namespace gpupack::webhook {
namespace {

using nlohmann::json;
using server::MakeSelfSignedCert;
using server::PemPair;
using server::WriteFileAtomically;

const char kReview[] = R"({
  "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
  "request": {
    "uid": "b6f1c8a2-0c4e-4a57-9d5e-1f2a3b4c5d6e",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "namespace": "ml", "operation": "CREATE",
    "object": {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "infer", "namespace": "ml"},
               "spec": {"containers": [{"name": "main", "image": "cuda",
                                        "resources": {"limits": {"gpupack.io/gpu-memory": "8Gi"}}}]}}
  }
})";

struct Fixture {
  TempDir dir;
  std::string cert = dir.File("tls.crt");
  std::string key = dir.File("tls.key");
  FakeClock clock;

  void Install(const PemPair& pair) {
    WriteFileAtomically(cert, pair.cert_pem);
    WriteFileAtomically(key, pair.key_pem);
  }
  // Writes `pem` as a CA file and returns its path: a client trusting only that certificate.
  std::string Trust(const PemPair& pair, const std::string& name) {
    std::string path = dir.File(name);
    WriteFileAtomically(path, pair.cert_pem);
    return path;
  }
};

// The webhook's server with its routes, started on 127.0.0.1:0.
struct Served {
  Served(const Fixture& f, const Config& config, const BuildInfo& build = {})
      : routes(config, build), http(WebhookServerOptions(config, f.cert, f.key, f.clock)) {
    routes.Register(http);
    started = http.Start("127.0.0.1:0");
  }
  WebhookRoutes routes;
  server::HttpServer http;
  StatusOr<std::string> started = Status::Internal("not started");
};

// A fresh TLS connection that trusts only `ca_file`; true when the handshake verified and
// /healthz answered.
bool HandshakeTrusting(int port, const std::string& ca_file) {
  httplib::SSLClient client("127.0.0.1", port);
  client.set_ca_cert_path(ca_file.c_str());
  client.enable_server_certificate_verification(true);
  client.set_connection_timeout(5);
  httplib::Result res = client.Get("/healthz");
  return res && res->status == 200;
}

TEST(WebhookServer, AnswersAReviewOverTls) {
  Fixture f;
  PemPair pair = MakeSelfSignedCert("gpupack-webhook");
  f.Install(pair);
  std::string ca = f.Trust(pair, "ca.crt");
  Served served(f, Config{}, BuildInfo{"0.1.0", "0123456789ab"});
  ASSERT_TRUE(served.started.ok()) << served.started.status();
  int port = served.http.port();
  ASSERT_GT(port, 0);

  httplib::SSLClient client("127.0.0.1", port);
  client.set_ca_cert_path(ca.c_str());
  client.enable_server_certificate_verification(true);
  client.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) {  // several reviews over one keep-alive connection
    httplib::Result res = client.Post("/mutate", kReview, "application/json");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    json answer = json::parse(res->body);
    EXPECT_EQ(answer["response"]["uid"], "b6f1c8a2-0c4e-4a57-9d5e-1f2a3b4c5d6e");
    EXPECT_EQ(answer["response"]["allowed"], true);
    EXPECT_EQ(answer["response"]["patchType"], "JSONPatch");
  }
  httplib::Result bad = client.Post("/mutate", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["response"]["allowed"], false);

  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gpupack_webhook_requests_total{result=\"patched\"} 3"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("gpupack_webhook_requests_total{result=\"error\"} 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("gpupack_webhook_request_duration_seconds_count 4"), std::string::npos);
  EXPECT_NE(metrics->body.find("gpupack_build_info{revision=\"0123456789ab\",version=\"0.1.0\"} 1\n"),
            std::string::npos)
      << metrics->body;

  // Plain HTTP to the TLS port gets nowhere.
  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(5);
  httplib::Result cleartext = plain.Get("/healthz");
  EXPECT_TRUE(!cleartext || cleartext->status != 200);
}

TEST(WebhookServer, ServesARotatedCertificateWithoutRestart) {
  Fixture f;
  PemPair first = MakeSelfSignedCert("first");
  PemPair second = MakeSelfSignedCert("second");
  f.Install(first);
  std::string trust_first = f.Trust(first, "first.crt");
  std::string trust_second = f.Trust(second, "second.crt");
  Config config;
  config.cert_check_interval = std::chrono::seconds(10);
  Served served(f, config);
  ASSERT_TRUE(served.started.ok()) << served.started.status();
  int port = served.http.port();
  EXPECT_TRUE(HandshakeTrusting(port, trust_first));
  EXPECT_FALSE(HandshakeTrusting(port, trust_second));

  f.Install(second);
  // Within the check interval the files are not looked at.
  f.clock.Advance(std::chrono::seconds(9));
  EXPECT_TRUE(HandshakeTrusting(port, trust_first));
  f.clock.Advance(std::chrono::seconds(1));
  EXPECT_TRUE(HandshakeTrusting(port, trust_second));
  EXPECT_FALSE(HandshakeTrusting(port, trust_first));

  // A half-written rotation (a new certificate with the old key) is not taken into service.
  PemPair third = MakeSelfSignedCert("third");
  WriteFileAtomically(f.cert, third.cert_pem);
  f.clock.Advance(std::chrono::seconds(10));
  EXPECT_TRUE(HandshakeTrusting(port, trust_second));
  // Once the key follows, it is.
  WriteFileAtomically(f.key, third.key_pem);
  f.clock.Advance(std::chrono::seconds(10));
  EXPECT_TRUE(HandshakeTrusting(port, f.Trust(third, "third.crt")));
}

TEST(WebhookServer, RefusesToStartWithABadCertificateOrKey) {
  Fixture f;
  PemPair pair = MakeSelfSignedCert("x");
  PemPair other = MakeSelfSignedCert("y");
  WriteFileAtomically(f.cert, pair.cert_pem);
  WriteFileAtomically(f.key, other.key_pem);
  Served mismatched(f, Config{});
  ASSERT_FALSE(mismatched.started.ok());
  EXPECT_NE(mismatched.started.status().message().find("does not belong"), std::string::npos)
      << mismatched.started.status();

  WriteFileAtomically(f.key, "garbage");
  Served garbage(f, Config{});
  ASSERT_FALSE(garbage.started.ok());
  EXPECT_NE(garbage.started.status().message().find("no PEM private key"), std::string::npos)
      << garbage.started.status();

  std::remove(f.cert.c_str());
  Served missing(f, Config{});
  ASSERT_FALSE(missing.started.ok());
  EXPECT_EQ(missing.started.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupack::webhook
