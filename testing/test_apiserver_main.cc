// gpupack-test-apiserver: the in-memory Kubernetes API test server as a process.
//   gpupack-test-apiserver [--listen 127.0.0.1:0] [--history N] [--bookmark-interval-ms N]
//                          [--kubeconfig-out FILE]
// Prints the bound "HOST:PORT" on the first stdout line, then serves until SIGTERM/SIGINT.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "testing/test_apiserver.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int Usage(const std::string& why) {
  std::cerr << "gpupack-test-apiserver: " << why << "\n"
            << "usage: gpupack-test-apiserver [--listen HOST:PORT] [--history N] "
               "[--bookmark-interval-ms N] [--kubeconfig-out FILE]\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  std::string kubeconfig_out;
  gpupack::e2e::TestApiServerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("missing value for " + flag);
    const std::string value = argv[++i];
    try {
      if (flag == "--listen")
        listen = value;
      else if (flag == "--history")
        options.history_limit = std::stoul(value);
      else if (flag == "--bookmark-interval-ms")
        options.bookmark_interval = std::chrono::milliseconds(std::stol(value));
      else if (flag == "--kubeconfig-out")
        kubeconfig_out = value;
      else
        return Usage("unknown flag " + flag);
    } catch (const std::exception&) {
      return Usage("bad value \"" + value + "\" for " + flag);
    }
  }
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return Usage("--listen must be HOST:PORT");
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    return Usage("--listen has a bad port");
  }
  const std::string host = listen.substr(0, colon);

  gpupack::e2e::TestApiServer server(options);
  auto bound = server.Start(host, port);
  if (!bound.ok()) {
    std::cerr << "gpupack-test-apiserver: " << bound.status() << "\n";
    return 1;
  }
  if (!kubeconfig_out.empty()) {
    if (auto s = gpupack::e2e::WriteKubeconfig(kubeconfig_out, "http://" + host + ":" + std::to_string(*bound));
        !s.ok()) {
      std::cerr << "gpupack-test-apiserver: " << s << "\n";
      return 1;
    }
  }
  std::cout << host << ":" << *bound << std::endl;
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  while (!g_stop) pause();
  server.Stop();
  return 0;
}
