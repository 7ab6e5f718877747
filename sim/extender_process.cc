#include "sim/extender_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpupack::sim {

StatusOr<ExtenderProcess> ExtenderProcess::Start(const std::string& binary, const std::string& cluster_file,
                                                 const std::string& log_file) {
  int out[2];
  if (pipe(out) != 0) return Status::Internal("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return Status::Internal("fork failed");
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int err = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    close(out[0]);
    execl(binary.c_str(), binary.c_str(), "--standalone-cluster", cluster_file.c_str(), "--listen", "127.0.0.1:0",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // The first stdout line is the bound HOST:PORT; end of file first means it exited.
  std::string address;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') address += c;
  close(out[0]);
  ExtenderProcess process(pid, address);
  if (address.empty()) return Status::Unavailable(binary + " did not start; see " + log_file);
  return process;
}

ExtenderProcess::ExtenderProcess(ExtenderProcess&& other) noexcept
    : pid_(other.pid_), address_(std::move(other.address_)) {
  other.pid_ = -1;
}

ExtenderProcess::~ExtenderProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
}

}  // namespace gpupack::sim
