// Test and benchmark support: a self-signed TLS certificate made in memory with the OpenSSL API,
// valid for 127.0.0.1 and localhost, so tests need no files from outside and no `openssl` CLI.
#pragma once

#include <string>

namespace gpupack::server {

struct PemPair {
  std::string cert_pem;
  std::string key_pem;
};

// A fresh P-256 key and a certificate for it, self-signed, valid from now for a day, with the
// subject CN `common_name` and subjectAltName IP:127.0.0.1, DNS:localhost. Aborts if OpenSSL
// fails (a broken test environment, not an input error).
PemPair MakeSelfSignedCert(const std::string& common_name);

// Writes `text` to `path` by writing a sibling file and renaming it over `path`, the way a
// Secret volume update swaps files: a reader never sees half a file.
void WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace gpupack::server
