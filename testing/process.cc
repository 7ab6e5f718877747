#include "testing/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpupack::e2e {

StatusOr<Process> Process::Start(const std::vector<std::string>& argv, const std::string& stderr_path,
                                 const std::map<std::string, std::string>& env) {
  if (argv.empty()) return Status::InvalidArgument("Process::Start: empty argv");
  if (::access(argv[0].c_str(), X_OK) != 0) return Status::NotFound("binary " + argv[0] + " is not executable");
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::Internal(std::string("pipe: ") + std::strerror(errno));
  const int err_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Status::Internal("cannot open " + stderr_path);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Built before fork: between fork and exec a child of a threaded process may only make
  // async-signal-safe calls, and setenv is not one.
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (env.count(entry.substr(0, entry.find('='))) == 0) entries.push_back(entry);
  }
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (const std::string& e : entries) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::setpgid(0, 0);  // its own group, so a test's kill never reaches the test runner
    ::execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err_fd);
  Process p;
  p.pid_ = pid;
  p.stdout_fd_ = out[0];
  return p;
}

Process::Process(Process&& o) noexcept
    : pid_(o.pid_), stdout_fd_(o.stdout_fd_), buffer_(std::move(o.buffer_)), exited_(o.exited_) {
  o.pid_ = -1;
  o.stdout_fd_ = -1;
}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    Kill(SIGKILL);
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    pid_ = o.pid_;
    stdout_fd_ = o.stdout_fd_;
    buffer_ = std::move(o.buffer_);
    exited_ = o.exited_;
    o.pid_ = -1;
    o.stdout_fd_ = -1;
  }
  return *this;
}

Process::~Process() {
  Kill(SIGKILL);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

StatusOr<std::string> Process::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::DeadlineExceeded("no line on stdout of pid " + std::to_string(pid_));
    pollfd pfd{stdout_fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable("stdout of pid " + std::to_string(pid_) + " closed");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void Process::Kill(int sig) {
  if (pid_ <= 0 || exited_) return;
  ::kill(pid_, sig);
  if (sig == SIGTERM) {
    // A polite stop gets a few seconds; then it is a kill.
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return;
      }
      ::usleep(10000);
    }
    ::kill(pid_, SIGKILL);
  }
  if (sig == SIGKILL || sig == SIGTERM) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
  }
}

bool Process::Running() {
  if (pid_ <= 0 || exited_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

}  // namespace gpupack::e2e
