// The client over HTTPS: server verification against the configured CA (and its IP SAN),
// insecure-skip-tls-verify, and client-certificate authentication. Certificates are made here.
#include <httplib.h>

#include <thread>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "kube/client.h"

namespace gpupack::kube {
namespace {

struct KeyPair {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  std::string cert_pem, key_pem;
  ~KeyPair() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

std::string ToPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string ToPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `cn`, signed by `issuer` (self-signed when null).
void MakeCert(KeyPair& out, const std::string& cn, const KeyPair* issuer, bool ca, const char* san) {
  out.key = EVP_EC_gen("P-256");
  ASSERT_NE(out.key, nullptr);
  out.cert = X509_new();
  X509_set_version(out.cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(out.cert), static_cast<long>(std::hash<std::string>{}(cn)&0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(out.cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(out.cert), 3600);
  X509_set_pubkey(out.cert, out.key);
  X509_NAME* name = X509_get_subject_name(out.cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(out.cert, issuer ? X509_get_subject_name(issuer->cert) : name);
  X509* issuer_cert = issuer ? issuer->cert : out.cert;
  AddExt(out.cert, issuer_cert, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) AddExt(out.cert, issuer_cert, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (san != nullptr) AddExt(out.cert, issuer_cert, NID_subject_alt_name, san);
  ASSERT_GT(X509_sign(out.cert, issuer ? issuer->key : out.key, EVP_sha256()), 0);
  out.cert_pem = ToPem(out.cert);
  out.key_pem = ToPem(out.key);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeCert(ca_, "test-ca", nullptr, true, nullptr);
    MakeCert(other_ca_, "other-ca", nullptr, true, nullptr);
    MakeCert(server_cert_, "apiserver", &ca_, false, "IP:127.0.0.1");
    MakeCert(client_cert_, "gpupack-extender", &ca_, false, nullptr);
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  // Serves GET /api/v1/nodes/n1 over TLS; with `require_client_cert`, only to clients signed by ca_.
  void Serve(bool require_client_cert) {
    X509_STORE* client_store = nullptr;
    if (require_client_cert) {
      client_store = X509_STORE_new();
      X509_STORE_add_cert(client_store, ca_.cert);
    }
    server_ = std::make_unique<httplib::SSLServer>(server_cert_.cert, server_cert_.key, client_store);
    ASSERT_TRUE(server_->is_valid());
    server_->Get("/api/v1/nodes/n1", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"metadata":{"name":"n1"}})", "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::yield();
  }
  StatusOr<Json> GetNode(Config c) {
    c.server = "https://127.0.0.1:" + std::to_string(port_);
    RetryPolicy p;
    p.max_attempts = 1;
    auto client = Client::Create(c, p);
    if (!client.ok()) return client.status();
    return (*client)->GetNode("n1");
  }

  KeyPair ca_, other_ca_, server_cert_, client_cert_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(TlsTest, VerifiesTheServerAgainstTheConfiguredCa) {
  Serve(false);
  Config good;
  good.ca_pem = ca_.cert_pem;
  auto ok = GetNode(good);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)["metadata"]["name"], "n1");

  Config wrong;
  wrong.ca_pem = other_ca_.cert_pem;
  EXPECT_EQ(GetNode(wrong).status().code(), StatusCode::kUnavailable);

  Config insecure;
  insecure.ca_pem = other_ca_.cert_pem;
  insecure.insecure_skip_tls_verify = true;
  EXPECT_TRUE(GetNode(insecure).ok());
}

TEST_F(TlsTest, AuthenticatesWithAClientCertificate) {
  Serve(true);
  Config without;
  without.ca_pem = ca_.cert_pem;
  EXPECT_FALSE(GetNode(without).ok());

  Config with = without;
  with.client_cert_pem = client_cert_.cert_pem;
  with.client_key_pem = client_cert_.key_pem;
  auto ok = GetNode(with);
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_F(TlsTest, CallsShareOneHandshakeUnlessThePoolIsOff) {
  Serve(false);
  Config c;
  c.server = "https://127.0.0.1:" + std::to_string(port_);
  c.ca_pem = ca_.cert_pem;
  for (int idle : {8, 0}) {
    RetryPolicy p;
    p.max_attempts = 1;
    p.idle_connections = idle;
    auto client = Client::Create(c, p);
    ASSERT_TRUE(client.ok()) << client.status();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*client)->GetNode("n1").ok());
    EXPECT_EQ((*client)->connections_opened(), idle == 0 ? 3u : 1u) << "idle_connections " << idle;
  }
}

TEST(TlsConfigTest, RejectsAKeyThatIsNotPem) {
  KeyPair cert;
  MakeCert(cert, "x", nullptr, false, nullptr);
  Config c;
  c.server = "https://127.0.0.1:1";
  c.client_cert_pem = cert.cert_pem;
  c.client_key_pem = "garbage";
  EXPECT_EQ(Client::Create(c).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupack::kube
