#include <gtest/gtest.h>

#include "agent/flags.h"

namespace gpupack::agent {
namespace {

using std::chrono::seconds;

TEST(AgentFlagsTest, DefaultsAndNodeNameFromEnvironment) {
  StatusOr<AgentFlags> f = ParseAgentFlags({}, "n1");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->node_name, "n1");
  EXPECT_EQ(f->backend, "nvml");
  EXPECT_EQ(f->listen, ":9402");
  EXPECT_EQ(f->poll, seconds(10));
  EXPECT_EQ(f->heartbeat, seconds(60));
  EXPECT_EQ(f->min_write, seconds(10));
  EXPECT_EQ(f->change_threshold_mib, 256);
  EXPECT_EQ(f->max_pods_per_device, 16);
  EXPECT_FALSE(f->once);
  EXPECT_FALSE(f->evict_foreign_pods);
  EXPECT_FALSE(AgentOptionsOf(*f).eviction.enabled);
}

TEST(AgentFlagsTest, ForeignPodEvictionIsOptIn) {
  StatusOr<AgentFlags> f = ParseAgentFlags({"--evict-foreign-pods", "--foreign-eviction-interval", "2m"}, "n1");
  ASSERT_TRUE(f.ok()) << f.status();
  const AgentOptions options = AgentOptionsOf(*f);
  EXPECT_TRUE(options.eviction.enabled);
  EXPECT_EQ(options.eviction.interval, seconds(120));
}

TEST(AgentFlagsTest, ValuesOverrideDefaults) {
  StatusOr<AgentFlags> f = ParseAgentFlags({"--node-name", "n2", "--backend", "file:c.json", "--poll-interval", "1m30s",
                                            "--max-pods-per-device", "4", "--once", "--print"},
                                           "n1");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->node_name, "n2");
  EXPECT_EQ(f->backend, "file:c.json");
  EXPECT_EQ(f->poll, seconds(90));
  EXPECT_EQ(f->max_pods_per_device, 4);
  EXPECT_TRUE(f->once && f->print);
}

TEST(AgentFlagsTest, TakesTheMpsServerAndItsControlCli) {
  StatusOr<AgentFlags> f = ParseAgentFlags(
      {"--mps-pipe-directory", "/run/mps", "--mps-server", "shared", "--mps-control-binary", "/usr/bin/mps-ctl"}, "n1");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->mps_server, "shared");
  EXPECT_EQ(f->mps_control_binary, "/usr/bin/mps-ctl");
  StatusOr<AgentFlags> defaults = ParseAgentFlags({}, "n1");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->mps_server, "");
  EXPECT_EQ(defaults->mps_control_binary, "nvidia-cuda-mps-control");
}

TEST(AgentFlagsTest, DoctorNeedsNoNodeNameAndTakesItsProbePaths) {
  StatusOr<AgentFlags> f =
      ParseAgentFlags({"--doctor", "--json", "--cgroup-root", "/host/cgroup", "--mps-pipe-directory", "/run/mps",
                       "--cdi-spec-dirs", "/a,,/b", "--nri-socket", "/run/nri.sock"},
                      "");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->doctor && f->json);
  const DoctorRoots roots = DoctorRootsOf(*f);
  EXPECT_EQ(roots.cgroup_root, "/host/cgroup");
  EXPECT_EQ(roots.mps_pipe_dir, "/run/mps");
  EXPECT_EQ(roots.cdi_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(roots.nri_socket, "/run/nri.sock");
  StatusOr<AgentFlags> cluster = ParseAgentFlags(
      {"--doctor", "--cluster", "--namespace", "gpupack", "--require-memory-enforced", "--agent-selector", "a=b"}, "");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(cluster->doctor_cluster && cluster->require_memory_enforced);
  EXPECT_EQ(cluster->agent_namespace, "gpupack");
  EXPECT_EQ(cluster->agent_selector, "a=b");
  StatusOr<AgentFlags> defaults = ParseAgentFlags({"--doctor"}, "");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(DoctorRootsOf(*defaults).cdi_dirs, (std::vector<std::string>{"/etc/cdi", "/var/run/cdi"}));
}

// The chart passes the probe paths to the running agent, whose pass reports the doctor's verdicts
// as GPUNode conditions.
TEST(AgentFlagsTest, TheRunningAgentTakesTheDoctorsProbePathsToo) {
  StatusOr<AgentFlags> f = ParseAgentFlags(
      {"--node-name", "n1", "--cdi-spec-dirs", "/etc/cdi,/run/cdi", "--nri-socket", "/run/nri/nri.sock"}, "");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->doctor);
  EXPECT_EQ(DoctorRootsOf(*f).cdi_dirs, (std::vector<std::string>{"/etc/cdi", "/run/cdi"}));
  EXPECT_EQ(DoctorRootsOf(*f).nri_socket, "/run/nri/nri.sock");
}

TEST(AgentFlagsTest, HelpStopsParsing) {
  StatusOr<AgentFlags> f = ParseAgentFlags({"--help", "--bogus"}, "");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->help);
}

TEST(AgentFlagsTest, BadInputNamesTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string env;
    std::string message_prefix;
  };
  const Case cases[] = {
      {{"--bogus", "x"}, "n1", "unknown flag --bogus\nusage:"},
      {{"--listen"}, "n1", "--listen needs a value\nusage:"},
      {{}, "", "--node-name (or $NODE_NAME) is required\nusage:"},
      {{"--print"}, "n1", "--print needs --once"},
      {{"--poll-interval", "500ms"}, "n1", "--poll-interval 500ms: invalid value"},      // under 1 s
      {{"--max-pods-per-device", "0"}, "n1", "--max-pods-per-device 0: invalid value"},  // 1..1024
      {{"--change-threshold-mib", "-1"}, "n1", "--change-threshold-mib -1: invalid value"},
      {{"--backend", "file:"}, "n1", "--backend file:: expected nvml or file:PATH"},
      {{"--foreign-eviction-interval", "0s"}, "n1", "--foreign-eviction-interval 0s: invalid value"},
      {{"--json"}, "n1", "--json needs --doctor"},
      {{"--cluster"}, "n1", "--cluster and --require-memory-enforced need --doctor"},
      {{"--doctor", "--require-memory-enforced"}, "n1", "--require-memory-enforced needs --cluster"},
      {{"--doctor", "--cluster"}, "n1", "--cluster needs --namespace"},
      {{"--doctor", "--once"}, "n1", "--doctor and --once are separate runs"},
      {{"--doctor", "--cdi-spec-dirs", ","}, "n1", "--cdi-spec-dirs ,: invalid value"},
      {{"--mps-server", "shared"}, "n1", "--mps-server needs --mps-pipe-directory"},
      {{"--mps-server", ""}, "n1", "--mps-server : invalid value"},
      {{"--mps-server", "Shared-1"}, "n1", "--mps-server Shared-1: invalid value"},
  };
  for (const Case& c : cases) {
    StatusOr<AgentFlags> f = ParseAgentFlags(c.args, c.env);
    ASSERT_FALSE(f.ok()) << c.message_prefix;
    EXPECT_EQ(f.status().message().rfind(c.message_prefix, 0), 0u) << f.status().message();
  }
}

}  // namespace
}  // namespace gpupack::agent
