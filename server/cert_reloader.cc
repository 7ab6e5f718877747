#include "server/cert_reloader.h"

#include <sys/stat.h>

#include <vector>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/file.h"
#include "common/log.h"

namespace gpupack::server {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

}  // namespace

struct CertReloader::FileStamps {
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  Stamp cert;
  Stamp key;
  bool operator==(const FileStamps&) const = default;

  static Stamp Of(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return {};  // a missing file compares unequal to any file
    return {st.st_dev, st.st_ino, st.st_size, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  }
};

struct CertReloader::KeyPair {
  FileStamps stamps;
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  STACK_OF(X509) * chain = nullptr;  // intermediates that follow the leaf in the cert file

  KeyPair() = default;
  KeyPair(const KeyPair&) = delete;
  KeyPair& operator=(const KeyPair&) = delete;
  ~KeyPair() {
    X509_free(cert);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
  }
};

CertReloader::CertReloader(std::string cert_file, std::string key_file, const Clock& clock,
                           Clock::Duration check_interval)
    : cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)),
      clock_(clock),
      check_interval_(check_interval) {}

CertReloader::~CertReloader() = default;

StatusOr<std::unique_ptr<CertReloader>> CertReloader::Create(std::string cert_file, std::string key_file,
                                                             const Clock& clock, Clock::Duration check_interval) {
  std::unique_ptr<CertReloader> reloader(
      new CertReloader(std::move(cert_file), std::move(key_file), clock, check_interval));
  FileStamps stamps{FileStamps::Of(reloader->cert_file_), FileStamps::Of(reloader->key_file_)};
  GPUPACK_ASSIGN_OR_RETURN(reloader->current_, reloader->Load(stamps));
  reloader->last_check_ = clock.Now();
  return reloader;
}

StatusOr<std::shared_ptr<const CertReloader::KeyPair>> CertReloader::Load(const FileStamps& stamps) const {
  GPUPACK_ASSIGN_OR_RETURN(std::string cert_pem, ReadFileToString(cert_file_, "TLS certificate"));
  GPUPACK_ASSIGN_OR_RETURN(std::string key_pem, ReadFileToString(key_file_, "TLS key"));
  auto pair = std::make_shared<KeyPair>();
  pair->stamps = stamps;

  BioPtr cert_bio(BIO_new_mem_buf(cert_pem.data(), int(cert_pem.size())));
  pair->cert = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (pair->cert == nullptr) {
    return Status::InvalidArgument(cert_file_ + ": no PEM certificate (" + OpenSslError() + ")");
  }
  pair->chain = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(pair->chain, extra);
  }
  ERR_clear_error();  // the loop above ends on a harmless "no start line"

  BioPtr key_bio(BIO_new_mem_buf(key_pem.data(), int(key_pem.size())));
  pair->key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (pair->key == nullptr) {
    return Status::InvalidArgument(key_file_ + ": no PEM private key (" + OpenSslError() + ")");
  }
  if (X509_check_private_key(pair->cert, pair->key) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(key_file_ +
                                   ": the private key does not belong to the "
                                   "certificate in " +
                                   cert_file_);
  }
  return std::shared_ptr<const KeyPair>(std::move(pair));
}

std::shared_ptr<const CertReloader::KeyPair> CertReloader::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

bool CertReloader::MaybeReload() {
  std::shared_ptr<const KeyPair> serving;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Clock::TimePoint now = clock_.Now();
    if (now - last_check_ < check_interval_) return false;
    last_check_ = now;  // claims this check, so concurrent handshakes do not repeat it
    serving = current_;
  }
  FileStamps stamps{FileStamps::Of(cert_file_), FileStamps::Of(key_file_)};
  if (stamps == serving->stamps) return false;
  StatusOr<std::shared_ptr<const KeyPair>> loaded = Load(stamps);
  if (!loaded.ok()) {
    GPUPACK_LOG(kWarning, "tls") << "keeping the current TLS certificate: " << loaded.status().message();
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::move(loaded).value();
  }
  GPUPACK_LOG(kInfo, "tls") << "loaded the rotated TLS certificate from " << cert_file_;
  return true;
}

int CertReloader::OnHandshake(SSL* ssl, void* self) {
  auto* reloader = static_cast<CertReloader*>(self);
  reloader->MaybeReload();
  std::shared_ptr<const KeyPair> pair = reloader->Current();
  return SSL_use_cert_and_key(ssl, pair->cert, pair->key, pair->chain, /*override=*/1) == 1 ? 1 : 0;
}

void CertReloader::InstallOn(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &CertReloader::OnHandshake, this); }

}  // namespace gpupack::server
