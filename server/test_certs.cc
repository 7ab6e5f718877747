#include "server/test_certs.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/status.h"

namespace gpupack::server {
namespace {

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  return std::string(data, size_t(size));
}

}  // namespace

PemPair MakeSelfSignedCert(const std::string& common_name) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  GPUPACK_CHECK(key != nullptr);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  GPUPACK_CHECK(cert != nullptr);
  X509_set_version(cert.get(), 2);
  static int serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    GPUPACK_CHECK(ext != nullptr);
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  GPUPACK_CHECK(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);

  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(BIO_new(BIO_s_mem()), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(BIO_new(BIO_s_mem()), BIO_free);
  GPUPACK_CHECK(PEM_write_bio_X509(cert_bio.get(), cert.get()) == 1);
  GPUPACK_CHECK(PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1);
  return {BioText(cert_bio.get()), BioText(key_bio.get())};
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    GPUPACK_CHECK(out.good());
  }
  GPUPACK_CHECK(std::rename(temp.c_str(), path.c_str()) == 0);
}

}  // namespace gpupack::server
