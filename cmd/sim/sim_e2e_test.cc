// The real gpupack-sim binary: what a user sees when the extender it should replay through is not
// there, or when the cluster it is given is empty.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Outcome RunSim(const std::string& args) {
  const std::string command = std::string(GPUPACK_SIM_BIN) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  Outcome outcome;
  if (pipe == nullptr) return outcome;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) outcome.output.append(buffer, n);
  const int status = pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return outcome;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// It used to print only "extender /filter: Connection".
TEST(SimBinary, UnreachableExtenderNamesTheUrlAndTheCauseAndFails) {
  const std::string cluster = WriteTemp("sim-cluster.yaml", "nodes: [{name: n1, gpus: [{model: T4, memory: 16Gi}]}]\n");
  const std::string workload = WriteTemp("sim-workload.yaml", "pods: [{name: p, gpuMemory: 4Gi}]\n");
  const Outcome outcome = RunSim("--cluster " + cluster + " --workload " + workload + " --extender http://127.0.0.1:1");
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("cannot reach the extender at http://127.0.0.1:1/filter: connection failed"),
            std::string::npos)
      << outcome.output;
}

// A standalone extender on a cluster the replay does not describe used to fail every pod quietly
// ("node has no GPUs known to gpupack"): the run reported ~100 % unallocated and exited 0.
TEST(SimBinary, AnExtenderOnAnotherClusterIsAnErrorNotAResult) {
  const std::string theirs =
      WriteTemp("ext-cluster.yaml", "nodes: [{name: other, gpus: [{model: T4, memory: 16Gi}]}]\n");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(GPUPACK_EXTENDER_BIN, GPUPACK_EXTENDER_BIN, "--standalone-cluster", theirs.c_str(), "--listen", "127.0.0.1:0",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  FILE* out = fdopen(fds[0], "r");
  char line[256] = {0};
  ASSERT_NE(fgets(line, sizeof line, out), nullptr) << "the extender printed no address";
  std::string address(line);
  address.erase(address.find_last_not_of("\n") + 1);

  const std::string ours = WriteTemp("sim-cluster3.yaml", "nodes: [{name: n1, gpus: [{model: T4, memory: 16Gi}]}]\n");
  const std::string workload = WriteTemp("sim-workload3.yaml", "pods: [{name: p, gpuMemory: 4Gi}]\n");
  const Outcome outcome =
      RunSim("--cluster " + ours + " --workload " + workload + " --tune 0 --extender http://" + address);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  fclose(out);
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("the extender at http://" + address + " does not know node n1 of the replayed cluster"),
            std::string::npos)
      << outcome.output;
}

TEST(SimBinary, RefusesAnEmptyCluster) {
  const std::string cluster = WriteTemp("sim-empty.yaml", "nodes: []\n");
  const std::string workload = WriteTemp("sim-workload2.yaml", "pods: [{name: p, gpuMemory: 4Gi}]\n");
  const Outcome outcome = RunSim("--cluster " + cluster + " --workload " + workload);
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("\"nodes\" is empty"), std::string::npos) << outcome.output;
}

}  // namespace
