// The real gpupack-sim binary: what a user sees when the extender it should replay through is not
// there, when the cluster it is given is empty, and what the right-sizing what-if prints.
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

// One 80 GiB GPU and 14 pods of 8 GiB peaking at half (Beta(10⁶, 10⁶) draws 0.5 ± 0.001): as
// requested 10 fit (10 × 8192 = 81920 MiB); right-sized to 4608 MiB (4096 × 1.1 = 4506, packed to
// the 256 MiB granule: sim/what_if_test.cc has the steps) all 14 fit (64512 MiB), and the 10
// placed as requested free 10 × 3584 MiB = 35.0 GiB.
TEST(SimBinary, WhatIfPrintsThePodsPlacedEachWayAndTheMemoryFreed) {
  const std::string cluster =
      WriteTemp("sim-whatif.yaml", "nodes: [{name: n1, gpus: [{model: A100, memory: 80Gi}]}]\n");
  const std::string workload = WriteTemp("sim-whatif-pods.yaml", "pods: [{name: p, gpuMemory: 8Gi, count: 14}]\n");
  const Outcome outcome = RunSim("--cluster " + cluster + " --workload " + workload +
                                 " --tune 0 --seeds 42 --policy bestfit --what-if beta:1000000,1000000");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  const size_t row = outcome.output.find("\n42 ");
  ASSERT_NE(row, std::string::npos) << outcome.output;
  int submitted = 0, requested = 0, right_sized = 0, more = 0;
  double held_requested = 0, held_right_sized = 0, freed = 0;
  ASSERT_EQ(std::sscanf(outcome.output.c_str() + row, " 42 %d %d %d %d %lf → %lf %lf", &submitted, &requested,
                        &right_sized, &more, &held_requested, &held_right_sized, &freed),
            7)
      << outcome.output;
  EXPECT_EQ(submitted, 14);
  EXPECT_EQ(requested, 10);
  EXPECT_EQ(right_sized, 14);
  EXPECT_EQ(more, 4);
  EXPECT_DOUBLE_EQ(held_requested, 80.0);
  EXPECT_DOUBLE_EQ(held_right_sized, 63.0);  // 64512 / 1024
  EXPECT_DOUBLE_EQ(freed, 35.0);             // 35840 / 1024
}

TEST(SimBinary, UsageSeedWithoutWhatIfIsRefused) {
  const Outcome outcome = RunSim("--cluster c.yaml --workload w.yaml --usage-seed 3");
  EXPECT_EQ(outcome.exit_code, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("gpupack-sim: --usage-seed needs --what-if"), std::string::npos) << outcome.output;
}

}  // namespace
