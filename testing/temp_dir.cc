#include "testing/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/status.h"

namespace gpupack {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "gpupack-test-XXXXXX").string();
  GPUPACK_CHECK(mkdtemp(pattern.data()) != nullptr);
  path_ = pattern;
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

}  // namespace gpupack
