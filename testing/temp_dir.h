// Test support: a fresh temporary directory per test, removed with everything in it.
#pragma once

#include <string>

namespace gpupack {

// A fresh directory under the system's temporary directory (mkdtemp), removed with everything in
// it on destruction. Aborts if it cannot be made (a broken test environment).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path()/name, without creating anything.
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to path()/rel, creating parent directories; returns the absolute path.
  std::string WriteFile(const std::string& rel, const std::string& content) const;
  // Creates path()/rel and its parents; returns the absolute path.
  std::string MakeDir(const std::string& rel) const;

 private:
  std::string path_;
};

}  // namespace gpupack
