#include "agent/mps_namespace.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

extern char** environ;

namespace gpupack::agent {
namespace {

constexpr size_t kReadableIdChars = 12;
constexpr size_t kMaxMpsNameLength = 64;
constexpr size_t kMaxOutputBytes = 64 * 1024;  // `namespace list` of a busy node is a few KiB

bool IsNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

constexpr std::string_view kSpace = " \t\r\n";

std::string Trimmed(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  return first == std::string_view::npos ? "" : std::string(s.substr(first, s.find_last_not_of(kSpace) - first + 1));
}

// Splits on whitespace, '=' and ',' and strips quotes: the CLI's answers are "value",
// "key: value" or "key=value" lines, and CSV.
std::vector<std::string> Tokens(std::string_view out) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (char c : out) {
    if (kSpace.find(c) != std::string_view::npos || c == '=' || c == ',') {
      flush();
    } else if (c != '"' && c != '\'') {
      current.push_back(c);
    }
  }
  flush();
  return tokens;
}

// InvalidArgument naming `what` unless 1 ≤ percent ≤ 100, the daemon's range.
Status CheckActiveThreadPercentage(int percent, const std::string& what) {
  if (percent >= 1 && percent <= 100) return Status::Ok();
  return Status::InvalidArgument(what + ": active thread percentage " + std::to_string(percent) + " is outside 1..100");
}

std::string Joined(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

// The finished process: its exit status (or the signal that ended it) and its stdout and stderr
// together, at most kMaxOutputBytes.
struct Finished {
  int wait_status = 0;
  std::string output;
};

// Runs argv with `extra_env` added to this process's environment and waits at most `timeout`.
// posix_spawnp rather than fork: the NRI plugin is a multi-threaded Go process.
StatusOr<Finished> Spawn(const std::vector<std::string>& argv, const std::string& extra_env,
                         std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  const std::string name = extra_env.substr(0, extra_env.find('=') + 1);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, name.c_str(), name.size()) != 0) envp.push_back(*e);
  }
  envp.push_back(const_cast<char*>(extra_env.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    return Status::FailedPrecondition("cannot run " + argv[0] + ": " + std::strerror(spawned));
  }
  Finished done;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (done.output.size() < kMaxOutputBytes)
      done.output.append(buf, std::min<size_t>(n, kMaxOutputBytes - done.output.size()));
  }
  ::close(fds[0]);
  // Its output closed; it still has until the deadline to exit (a CLI that closes its output and
  // hangs must not hang the runtime's CreateContainer). Its pidfd (Linux 5.3+) becomes readable
  // when it exits; without one, the wait is polled.
  const int pidfd = timed_out ? -1 : static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  while (!timed_out) {
    const pid_t waited = ::waitpid(pid, &done.wait_status, WNOHANG);
    if (waited == pid) break;
    if (waited < 0 && errno != EINTR) {
      if (pidfd >= 0) ::close(pidfd);
      return Status::Internal(Joined(argv) + ": waitpid: " + std::strerror(errno));
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
    } else if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      ::usleep(100);
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!timed_out) return done;
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &done.wait_status, 0) < 0 && errno == EINTR) {
  }
  return Status::DeadlineExceeded(Joined(argv) + ": no answer within " + std::to_string(timeout.count()) + " ms");
}

}  // namespace

StatusOr<std::string> MpsNamespaceName(std::string_view container_id) {
  if (container_id.empty()) return Status::InvalidArgument("an MPS namespace needs a container id; it is empty");
  std::string name(kMpsNamespacePrefix);
  for (char c : container_id.substr(0, kReadableIdChars)) {
    name.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : (IsNameChar(c) ? c : '_'));
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Fnv1a64(container_id)));
  return name + "_" + hash;
}

bool IsMpsName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxMpsNameLength && std::all_of(name.begin(), name.end(), IsNameChar);
}

bool IsGpupackMpsNamespace(std::string_view name) {
  return name.size() > kMpsNamespacePrefix.size() && name.starts_with(kMpsNamespacePrefix) && IsMpsName(name);
}

Status CheckMpsPipeDirectory(std::string_view dir) {
  if (dir.empty() || dir.front() != '/') {
    return Status::InvalidArgument("MPS pipe directory \"" + std::string(dir) + "\" is not an absolute path");
  }
  if (dir.size() > kMaxMpsPipeDirectoryLength) {
    return Status::InvalidArgument("MPS pipe directory \"" + std::string(dir) + "\" is " + std::to_string(dir.size()) +
                                   " characters, over " + std::to_string(kMaxMpsPipeDirectoryLength) +
                                   ": its control socket's path would pass the 107-byte limit of a unix socket, "
                                   "and the daemon then fails without a log; shorten the MPS pipe directory");
  }
  return Status::Ok();
}

MpsReconcilePlan PlanMpsReconcile(std::span<const std::string> existing, std::span<const MpsNamespaceClaim> claims) {
  MpsReconcilePlan plan;
  const std::set<std::string, std::less<>> present(existing.begin(), existing.end());
  std::set<std::string, std::less<>> claimed;
  for (const MpsNamespaceClaim& claim : claims) {
    if (!claimed.insert(claim.name).second) continue;
    if (!present.contains(claim.name)) plan.create.push_back(claim);
  }
  for (const std::string& name : present) {
    if (IsGpupackMpsNamespace(name) && !claimed.contains(name)) plan.remove.push_back(name);
  }
  return plan;
}

MpsControl::MpsControl(MpsControlOptions options) : options_(std::move(options)) {}

StatusOr<std::string> MpsControl::Run(std::vector<std::string> args) const {
  std::vector<std::string> argv{options_.binary};
  argv.insert(argv.end(), {"-p", "3"});
  argv.insert(argv.end(), args.begin(), args.end());
  std::chrono::milliseconds timeout = options_.timeout;
  if (options_.deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*options_.deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::DeadlineExceeded(Joined(argv) + ": not run, the request's deadline passed");
    timeout = std::min(timeout, left);
  }
  StatusOr<Finished> done = Spawn(argv, "CUDA_MPS_PIPE_DIRECTORY=" + options_.pipe_directory, timeout);
  if (!done.ok()) return done.status();
  const std::string said = Trimmed(done->output);
  if (WIFEXITED(done->wait_status) && WEXITSTATUS(done->wait_status) == 0) return said;
  const std::string how = WIFEXITED(done->wait_status) ? "exit status " + std::to_string(WEXITSTATUS(done->wait_status))
                                                       : "signal " + std::to_string(WTERMSIG(done->wait_status));
  return Status::Unavailable(Joined(argv) + ": " + how + (said.empty() ? "" : ": " + said));
}

Status MpsControl::CreateNamespace(std::string_view name) const {
  return Run({"namespace", "create", std::string(name), "--server=" + options_.server}).status();
}

Status MpsControl::SetActiveThreadPercentage(std::string_view name, int percent) const {
  GPUPACK_RETURN_IF_ERROR(CheckActiveThreadPercentage(percent, "MPS namespace " + std::string(name)));
  return Run({"namespace", "set", std::string(name), "--server=" + options_.server,
              "--active-thread-percentage=" + std::to_string(percent)})
      .status();
}

Status MpsControl::DeleteNamespace(std::string_view name) const {
  return Run({"namespace", "delete", std::string(name), "--server=" + options_.server}).status();
}

StatusOr<std::string> MpsControl::PipeDirectory(std::string_view name) const {
  StatusOr<std::string> out = Run({"namespace", "get", std::string(name), options_.server, "pipe-directory"});
  if (!out.ok()) {
    if (out.status().code() == StatusCode::kDeadlineExceeded) return out.status();
    StatusOr<std::string> underscored = Run({"namespace", "get", std::string(name), options_.server, "pipe_directory"});
    if (!underscored.ok()) return out.status();
    out = std::move(underscored);
  }
  for (const std::string& token : Tokens(*out)) {
    if (token.starts_with('/')) return token;
  }
  return Status::Unavailable("pipe-directory of MPS namespace " + std::string(name) + ": no absolute path in \"" +
                             *out + "\"");
}

StatusOr<std::vector<std::string>> MpsControl::NamespaceNames() const {
  StatusOr<std::string> out = Run({"namespace", "list", "--server=" + options_.server});
  if (!out.ok()) return out.status();
  std::vector<std::string> names;
  for (std::string& token : Tokens(*out)) {
    if (IsMpsName(token) && std::find(names.begin(), names.end(), token) == names.end()) {
      names.push_back(std::move(token));
    }
  }
  return names;
}

StatusOr<std::string> ProvisionMpsNamespace(const MpsControl& control, std::string_view container_id, int percent) {
  StatusOr<std::string> name = MpsNamespaceName(container_id);
  if (!name.ok()) return name.status();
  const std::string context = "MPS namespace " + *name + " of container " + std::string(container_id);
  GPUPACK_RETURN_IF_ERROR(CheckActiveThreadPercentage(percent, context));
  StatusOr<std::string> dir = control.PipeDirectory(*name);
  bool created = false;
  if (!dir.ok() && dir.status().code() == StatusCode::kDeadlineExceeded) return dir.status().WithContext(context);
  if (!dir.ok()) {
    // A create that fails may have raced another; the second read settles whether it is there.
    Status create = control.CreateNamespace(*name);
    dir = control.PipeDirectory(*name);
    if (!dir.ok()) return (create.ok() ? dir.status() : create).WithContext(context);
    created = true;
  }
  Status ready = CheckMpsPipeDirectory(*dir);
  if (ready.ok()) ready = control.SetActiveThreadPercentage(*name, percent);
  if (!ready.ok()) {
    if (created) {
      // Best effort, and past the deadline too; reconciliation removes it otherwise.
      MpsControlOptions cleanup = control.options();
      cleanup.deadline.reset();
      (void)MpsControl(std::move(cleanup)).DeleteNamespace(*name);
    }
    return ready.WithContext(context);
  }
  return dir;
}

Status ReleaseMpsNamespace(const MpsControl& control, std::string_view container_id) {
  StatusOr<std::string> name = MpsNamespaceName(container_id);
  if (!name.ok()) return name.status();
  Status deleted = control.DeleteNamespace(*name);
  if (deleted.ok()) return Status::Ok();
  // A refused read: the daemon has no such namespace, or no daemon runs (which loses them all). A
  // read that got no answer settles nothing.
  StatusOr<std::string> still = control.PipeDirectory(*name);
  if (!still.ok() && still.status().code() == StatusCode::kUnavailable) return Status::Ok();
  return deleted.WithContext("MPS namespace " + *name + " of container " + std::string(container_id));
}

Status ReconcileMpsNamespaces(const MpsControl& control, std::span<const MpsNamespaceClaim> claims,
                              int default_percent) {
  std::vector<Status> failures;
  if (default_percent > 0) {
    Status capped = control.SetActiveThreadPercentage(kMpsDefaultNamespace, default_percent);
    if (!capped.ok()) failures.push_back(capped.WithContext("capping the default MPS namespace"));
  }
  StatusOr<std::vector<std::string>> existing = control.NamespaceNames();
  if (!existing.ok()) {
    failures.push_back(existing.status().WithContext("listing MPS namespaces"));
  } else {
    const MpsReconcilePlan plan = PlanMpsReconcile(*existing, claims);
    for (const MpsNamespaceClaim& claim : plan.create) {
      Status s = control.CreateNamespace(claim.name);
      if (s.ok()) s = control.SetActiveThreadPercentage(claim.name, claim.active_thread_percentage);
      if (!s.ok()) failures.push_back(s.WithContext("restoring MPS namespace " + claim.name));
    }
    for (const std::string& name : plan.remove) {
      Status s = control.DeleteNamespace(name);
      if (!s.ok()) failures.push_back(s.WithContext("deleting unclaimed MPS namespace " + name));
    }
  }
  if (failures.empty()) return Status::Ok();
  if (failures.size() == 1) return failures.front();
  return Status(failures.front().code(),
                failures.front().message() + " (and " + std::to_string(failures.size() - 1) + " more failures)");
}

}  // namespace gpupack::agent
