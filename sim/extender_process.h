// A standalone gpupack-extender child process on a free loopback port, for replays over HTTP
// (the in-process-vs-HTTP test, the device-size matrix). Stopped (SIGTERM, then reaped) when the
// handle goes away.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace gpupack::sim {

class ExtenderProcess {
 public:
  // Runs `binary --standalone-cluster cluster_file --listen 127.0.0.1:0` with no config file
  // (the product's defaults), stderr to `log_file`, and waits for the bound address it prints.
  static StatusOr<ExtenderProcess> Start(const std::string& binary, const std::string& cluster_file,
                                         const std::string& log_file);
  ExtenderProcess(ExtenderProcess&& other) noexcept;
  ExtenderProcess& operator=(ExtenderProcess&&) = delete;
  ExtenderProcess(const ExtenderProcess&) = delete;
  ~ExtenderProcess();
  // "http://HOST:PORT".
  std::string url() const { return "http://" + address_; }

 private:
  ExtenderProcess(pid_t pid, std::string address) : pid_(pid), address_(std::move(address)) {}
  pid_t pid_;
  std::string address_;
};

}  // namespace gpupack::sim
