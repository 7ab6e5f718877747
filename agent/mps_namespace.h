// MPS v3 namespaces (CUDA 13.4, driver R615+): a namespace per container on the node's MPS
// server, whose active_thread_percentage is the container's compute share (docs/agent.md "Compute
// enforcement", mode mps-namespace). The ceiling is the server owner's: a client in the namespace
// can lower its own share (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) but never raise it, and a container
// is given only its own namespace's pipe directory, so it never reaches the server's `default`.
//
// What the control daemon accepts, as NVIDIA's own KAI gpu-fractioning drives it on driver 615
// (fractioning-manager/mpsd/internal/mpsctl/control.go):
//   nvidia-cuda-mps-control -p 3 namespace create NS --server=S
//   … namespace set NS --server=S --active-thread-percentage=N
//   … namespace get NS S pipe-directory                        (fails when NS does not exist)
//   … namespace delete NS --server=S                           (refused while a client is attached)
//   … namespace list --server=S
// with CUDA_MPS_PIPE_DIRECTORY naming the daemon's pipe directory; names are [a-z0-9_]+, at most
// 64 characters (NVIDIA's MPS v3 manual, "MPS v3 Interface"). A CLI call follows the running
// daemon's protocol whatever its own -p says; -p 3 is passed as KAI and NVIDIA's Dynamo guide do.
// `get` spells the field pipe-directory in the manual and pipe_directory in KAI's code for 615:
// both are asked, in that order.
//
// Names are derived from the runtime's container id, so the NRI plugin keeps no state: a retried
// CreateContainer provisions the same namespace, a restarted plugin reconciles the daemon against
// the containers the runtime lists, and only names with kMpsNamespacePrefix are ever deleted.
//
// Thread safety: the pure functions are; an MpsControl may be shared, each call runs one process.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpupack::agent {

// Marks the namespaces gpupack owns; reconciliation touches no other.
inline constexpr std::string_view kMpsNamespacePrefix = "gpupack_";
// The namespace every server has, where a client that names none lands.
inline constexpr std::string_view kMpsDefaultNamespace = "default";
// A pipe directory holds the control socket, and a unix socket path is at most 107 bytes; a longer
// one makes the daemon fail with no log (measured by KAI on 615), so it is refused up front with
// room left for the socket's own name.
inline constexpr size_t kMaxMpsPipeDirectoryLength = 83;

// "gpupack_" + the id's first 12 characters mapped into [a-z0-9_] (for people reading
// `namespace list`) + "_" + 16 hex digits of the whole id's 64-bit FNV-1a hash (for uniqueness:
// two containers sharing a namespace would share a cap). InvalidArgument for an empty id.
StatusOr<std::string> MpsNamespaceName(std::string_view container_id);

// True for a name the MPS daemon accepts for a server or a namespace: [a-z0-9_]+, at most 64.
bool IsMpsName(std::string_view name);

// True for a name MpsNamespaceName can produce.
bool IsGpupackMpsNamespace(std::string_view name);

// OK for an absolute directory of at most kMaxMpsPipeDirectoryLength characters; otherwise
// InvalidArgument naming the directory and the limit.
Status CheckMpsPipeDirectory(std::string_view dir);

// A live container and its namespace's ceiling, as the runtime lists them at reconciliation.
struct MpsNamespaceClaim {
  std::string name;  // MpsNamespaceName of the container's id
  int active_thread_percentage = 100;
};

// What reconciliation does to the daemon: create (and cap) the claimed namespaces it lacks (its
// restart lost them while their containers run, bind-mounted to the same pipe directories), and
// delete gpupack's namespaces nobody claims (their container went while the plugin was away).
// Names without kMpsNamespacePrefix are never deleted.
struct MpsReconcilePlan {
  std::vector<MpsNamespaceClaim> create;
  std::vector<std::string> remove;

  bool operator==(const MpsReconcilePlan&) const = default;
};
MpsReconcilePlan PlanMpsReconcile(std::span<const std::string> existing, std::span<const MpsNamespaceClaim> claims);

struct MpsControlOptions {
  // nvidia-cuda-mps-control: a path, or a name looked up on PATH.
  std::string binary = "nvidia-cuda-mps-control";
  // The daemon's CUDA_MPS_PIPE_DIRECTORY, how the CLI finds its control socket.
  std::string pipe_directory;
  // The MPS server the namespaces are created on.
  std::string server;
  // Bound on one command; the process is killed past it.
  std::chrono::milliseconds timeout{10'000};
  // When set, no command runs past it either (the runtime's deadline for the request being
  // answered): each gets the lesser of `timeout` and what is left, and none starts once it passed.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// The control daemon through its CLI. Every failure is a Status naming the command and the CLI's
// own output: Unavailable when the CLI ran and refused (a client attached, the daemon down),
// DeadlineExceeded past the timeout, FailedPrecondition when the binary cannot be run.
class MpsControl {
 public:
  explicit MpsControl(MpsControlOptions options);

  const MpsControlOptions& options() const { return options_; }

  Status CreateNamespace(std::string_view name) const;
  Status SetActiveThreadPercentage(std::string_view name, int percent) const;
  Status DeleteNamespace(std::string_view name) const;
  // The namespace's pipe directory as the daemon reports it (the first absolute path in the
  // answer); an error when the namespace does not exist.
  StatusOr<std::string> PipeDirectory(std::string_view name) const;
  // Every [a-z0-9_]+ token of `namespace list`'s answer: the parse is loose because the format is
  // not published, which is safe because only gpupack's prefix is ever acted on.
  StatusOr<std::vector<std::string>> NamespaceNames() const;

 private:
  StatusOr<std::string> Run(std::vector<std::string> args) const;

  MpsControlOptions options_;
};

// The container's namespace, created if missing and capped at `percent` (1..100), and its pipe
// directory. Idempotent: CreateContainer runs before the container has a process, so no client
// can be attached to a namespace named after it and the cap is always (re)set. A namespace this
// call created is deleted again when capping or checking its directory fails (past the deadline
// too: a namespace nobody will use must not stay).
StatusOr<std::string> ProvisionMpsNamespace(const MpsControl& control, std::string_view container_id, int percent);

// Deletes the container's namespace. OK when it is gone (or never was, or no daemon runs);
// Unavailable while a client is still attached and DeadlineExceeded when the daemon did not
// answer, both for the caller to retry later.
Status ReleaseMpsNamespace(const MpsControl& control, std::string_view container_id);

// Brings the daemon in line with the live containers' claims (PlanMpsReconcile) and caps the
// `default` namespace at `default_percent` (0: left alone) so a container that reaches the
// server's own pipe some other way cannot take the GPU. Every step runs; the first failure is
// returned with the count of the others.
Status ReconcileMpsNamespaces(const MpsControl& control, std::span<const MpsNamespaceClaim> claims,
                              int default_percent);

}  // namespace gpupack::agent
