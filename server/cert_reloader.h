// A TLS server identity, read from a certificate file and a key file that may be replaced
// at any time (a Secret volume rotated by cert-manager or the chart): new handshakes get the new
// pair without a restart, connections already open keep theirs.
//
// Every handshake asks for the current pair; at most once per check interval that also looks at
// the files (device, inode, size, mtime of both) and reloads them when any changed. A new pair
// that does not load, or whose key does not match its certificate (e.g. caught between the two
// writes), is logged and ignored: the previous pair stays in service and the next check retries.
//
// Thread safety: all methods are safe to call concurrently (handshakes run on many threads).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <openssl/ssl.h>

#include "common/clock.h"
#include "common/status.h"

namespace gpupack::server {

class CertReloader {
 public:
  // Loads the pair. NotFound when a file cannot be read; InvalidArgument when it holds no PEM
  // certificate / private key, or the key does not belong to the certificate.
  static StatusOr<std::unique_ptr<CertReloader>> Create(std::string cert_file, std::string key_file, const Clock& clock,
                                                        Clock::Duration check_interval);
  ~CertReloader();
  CertReloader(const CertReloader&) = delete;
  CertReloader& operator=(const CertReloader&) = delete;

  // Makes every handshake on `ctx` serve the current pair. REQUIRES: *this outlives `ctx`.
  void InstallOn(SSL_CTX* ctx);

  // Looks at the files if the check interval has passed since the last look, and loads them when
  // they changed. Returns true when a new pair went into service.
  bool MaybeReload();

 private:
  struct KeyPair;
  struct FileStamps;
  CertReloader(std::string cert_file, std::string key_file, const Clock& clock, Clock::Duration check_interval);
  StatusOr<std::shared_ptr<const KeyPair>> Load(const FileStamps& stamps) const;
  std::shared_ptr<const KeyPair> Current() const;
  static int OnHandshake(SSL* ssl, void* self);

  const std::string cert_file_;
  const std::string key_file_;
  const Clock& clock_;
  const Clock::Duration check_interval_;
  mutable std::mutex mu_;
  std::shared_ptr<const KeyPair> current_;  // guarded by mu_; never null after Create
  Clock::TimePoint last_check_;             // guarded by mu_
};

}  // namespace gpupack::server
