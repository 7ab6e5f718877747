// A child process for end-to-end tests: started with fork/exec, stdout readable line by line
// (the gpupack binaries print their bound address on the first line), stderr appended to a log
// file, killed with any signal (kill -9 is a test scenario), reaped on destruction.
//
// Thread safety: none; one owner.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpupack::e2e {

class Process {
 public:
  // Starts `argv[0]` (a path) with `argv`, in this process's environment plus `env` (which wins
  // over a variable of the same name). stderr goes to `stderr_path` (appended).
  static StatusOr<Process> Start(const std::vector<std::string>& argv, const std::string& stderr_path,
                                 const std::map<std::string, std::string>& env = {});
  Process() = default;  // no process: Kill and Running are no-ops
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();  // SIGKILL and reap if still running

  // The next stdout line (without '\n'); DeadlineExceeded after `timeout`, Unavailable at EOF.
  StatusOr<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Sends `sig`; then, for SIGKILL/SIGTERM, waits for the exit. Idempotent once exited.
  void Kill(int sig);
  bool Running();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
};

}  // namespace gpupack::e2e
