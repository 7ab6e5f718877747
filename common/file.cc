#include "common/file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpupack {

StatusOr<std::string> ReadFileToString(const std::string& path, std::string_view what) {
  const std::string prefix = "cannot read " + std::string(what) + " " + path + ": ";
  // A directory opens like a file and then reads as empty; say what it is instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::NotFound(prefix + "it is a directory");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(prefix + (errno != 0 ? std::strerror(errno) : "cannot open"));
  std::string text;
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) {
      return Status::InvalidArgument(prefix + "larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB");
    }
  }
  if (in.bad()) return Status::NotFound(prefix + "read error");
  return text;
}

}  // namespace gpupack
