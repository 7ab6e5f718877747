// The real gpupack-extender binary, end to end: standalone start on a free port (first stdout
// line = bound address), the verbs over HTTP, SIGPIPE survived, bad flags and config refused,
// graceful SIGTERM.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

// Starts the binary with stdout on a pipe (stderr inherited).
Child Spawn(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    std::string bin = GPUPACK_EXTENDER_BIN;
    argv.push_back(bin.data());
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  child.out = fdopen(fds[0], "r");
  return child;
}

int Wait(Child& child) {
  int status = 0;
  waitpid(child.pid, &status, 0);
  if (child.out) fclose(child.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const char kCluster[] = R"(nodes:
  - name: gpu-a1
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, count: 2}
  - name: gpu-b1
    gpus:
      - {model: NVIDIA A100-SXM4-80GB, memory: 80Gi, mig: [{profile: 1g.10gb, memory: 10Gi}]}
)";

TEST(ExtenderBinary, ServesStandaloneAndStopsOnSigterm) {
  const std::string cluster = WriteTemp("cluster.yaml", kCluster);
  const std::string config = WriteTemp("extender.yaml", "prefix: /gpupack\npolicy: fgd\n");
  Child child = Spawn({"--standalone-cluster", cluster, "--config", config, "--listen", "127.0.0.1:0"});
  char line[256] = {0};
  ASSERT_NE(fgets(line, sizeof line, child.out), nullptr) << "no address line";
  std::string address(line);
  address.erase(address.find_last_not_of("\n") + 1);
  const size_t colon = address.rfind(':');
  ASSERT_NE(colon, std::string::npos) << address;
  EXPECT_EQ(address.substr(0, colon), "127.0.0.1");
  httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));

  json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u-1"}}},
      {"spec",
       {{"containers", {{{"name", "main"}, {"resources", {{"limits", {{"gpupack.io/gpu-memory", "8Gi"}}}}}}}}}}};
  const std::string args = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"gpu-a1", "gpu-b1"}}}.dump();
  auto filter = client.Post("/gpupack/filter", args, "application/json");
  ASSERT_TRUE(filter);
  ASSERT_EQ(filter->status, 200);
  json f = json::parse(filter->body);
  // The learner has seen this one pod (filter counts it) and weighs it at 93.5 % against the
  // prior's 6.5 %: 8 GiB on the 10 GiB MIG instance strands 2 GiB that no 8 GiB pod can use
  // (0.98 · 2 GiB), while the 72 GiB an A100 keeps holds nine more and is lost only to whole-GPU
  // pods (the prior's 30 % of 6.5 %: 0.02 · 72 GiB = 1.47 GiB). FGD takes the A100.
  EXPECT_EQ(f["NodeNames"], json({"gpu-a1"})) << filter->body;
  auto bind = client.Post("/gpupack/bind",
                          json{{"PodName", "p"}, {"PodNamespace", "ml"}, {"PodUID", "u-1"}, {"Node", "gpu-a1"}}.dump(),
                          "application/json");
  ASSERT_TRUE(bind);
  EXPECT_EQ(json::parse(bind->body)["Error"], "");
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("gpupack_pods 1"), std::string::npos);
  client.stop();

  // SIGPIPE is what a write to a closed API-server connection raises: it must not end the process.
  ASSERT_EQ(kill(child.pid, SIGPIPE), 0);
  auto after_sigpipe = client.Get("/healthz");
  ASSERT_TRUE(after_sigpipe) << "the extender died of SIGPIPE";
  EXPECT_EQ(after_sigpipe->status, 200);
  client.stop();

  kill(child.pid, SIGTERM);
  EXPECT_EQ(Wait(child), 0);
}

TEST(ExtenderBinary, RefusesBadFlagsAndConfigNamingTheProblem) {
  Child bad_flag = Spawn({"--listne", "127.0.0.1:0"});
  EXPECT_EQ(Wait(bad_flag), 2);
  const std::string config = WriteTemp("bad.yaml", "polcy: fgd\n");
  Child bad_config = Spawn({"--standalone-cluster", WriteTemp("c.yaml", kCluster), "--config", config});
  EXPECT_EQ(Wait(bad_config), 2);
  Child missing = Spawn({"--standalone-cluster", "/nonexistent/cluster.yaml", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(Wait(missing), 2);
}

// It used to start serving an empty cluster without a word.
TEST(ExtenderBinary, RefusesAnEmptyInventoryAndAReserveLargerThanTheDevices) {
  Child empty = Spawn({"--standalone-cluster", WriteTemp("empty.yaml", "nodes: []\n"), "--listen", "127.0.0.1:0"});
  char line[256] = {0};
  EXPECT_EQ(fgets(line, sizeof line, empty.out), nullptr) << "it printed an address: " << line;
  EXPECT_EQ(Wait(empty), 2);
  Child reserve = Spawn({"--standalone-cluster", WriteTemp("c2.yaml", kCluster), "--config",
                         WriteTemp("reserve.yaml", "reservePerDevice: 100Gi\n"), "--listen", "127.0.0.1:0"});
  EXPECT_EQ(fgets(line, sizeof line, reserve.out), nullptr) << "it printed an address: " << line;
  EXPECT_EQ(Wait(reserve), 2);
}

}  // namespace
