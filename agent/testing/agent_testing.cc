#include "agent/testing/agent_testing.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/status.h"

namespace gpupack::agent::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string templ = (fs::temp_directory_path() / "gpupack-agent-XXXXXX").string();
  GPUPACK_CHECK(mkdtemp(templ.data()) != nullptr);
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::WriteFile(const std::string& rel, const std::string& content) const {
  const fs::path p = fs::path(path_) / rel;
  fs::create_directories(p.parent_path());
  std::ofstream out(p);
  out << content;
  GPUPACK_CHECK(out.good());
  return p.string();
}

std::string TempDir::MakeDir(const std::string& rel) const {
  const fs::path p = fs::path(path_) / rel;
  fs::create_directories(p);
  return p.string();
}

void SetFakeNvmlState(const TempDir& dir, const nlohmann::json& state) {
  const std::string file = dir.WriteFile("fake-nvml-state.json", state.dump());
  GPUPACK_CHECK(setenv("GPUPACK_FAKE_NVML_STATE", file.c_str(), 1) == 0);
}

std::string SystemdContainerPath(const std::string& pod_uid, const std::string& container_id) {
  std::string underscored = pod_uid;
  for (char& c : underscored) {
    if (c == '-') c = '_';
  }
  return "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + underscored +
         ".slice/cri-containerd-" + container_id + ".scope";
}

}  // namespace gpupack::agent::testing
