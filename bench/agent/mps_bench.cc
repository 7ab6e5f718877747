// One MPS control command as gpupack-nri and the agent run it (agent::MpsControl: posix_spawnp,
// the answer read from a pipe, the exit waited for), against /bin/true (the cost of running any
// program) and against the stand-in CLI of the tests (a shell script, agent/testing/
// fake_mps_control.sh). A container's provision runs two to four such commands within the
// runtime's 2 s request deadline.
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <benchmark/benchmark.h>

#include "agent/mps_namespace.h"

namespace gpupack::agent {
namespace {

void RunCommands(benchmark::State& state, const std::string& binary) {
  char tmpl[] = "/tmp/gpupack-mps-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/fake-state/servers");
  std::ofstream(dir + "/control").put('\n');
  std::ofstream(dir + "/fake-state/servers/shared").put('\n');
  const MpsControl control({.binary = binary, .pipe_directory = dir, .server = "shared"});
  for (auto _ : state) {
    StatusOr<std::vector<std::string>> names = control.NamespaceNames();
    if (!names.ok()) state.SkipWithError(names.status().ToString().c_str());
    benchmark::DoNotOptimize(names);
  }
  std::filesystem::remove_all(dir);
}

void BM_MpsCommandTrue(benchmark::State& state) { RunCommands(state, "/bin/true"); }
BENCHMARK(BM_MpsCommandTrue)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_MpsCommandStandIn(benchmark::State& state) { RunCommands(state, GPUPACK_FAKE_MPS_CONTROL); }
BENCHMARK(BM_MpsCommandStandIn)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpupack::agent

BENCHMARK_MAIN();
