// gpupack-webhook's command line (docs/webhook.md): the flags and their parser, apart from the
// main so that each rule has a unit test.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace gpupack::webhook {

extern const char* const kWebhookUsage;

struct WebhookFlags {
  bool help = false;  // --help / -h: print kWebhookUsage, exit 0
  std::string listen;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string config_path;  // "": the defaults
};

// `args` without the program name. On failure the status message is what the main prints after
// "gpupack-webhook: " (usage included where a flag is unknown or a required one missing).
StatusOr<WebhookFlags> ParseWebhookFlags(const std::vector<std::string>& args);

}  // namespace gpupack::webhook
