// The mains' one way to refuse a bad command line or a failed start.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace gpupack {

// Prints "PROGRAM: MESSAGE" and a newline on stderr and returns 2, every main's exit status for
// a bad command line or a failed start.
inline int FailStartup(std::string_view program, const std::string& message) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(), message.c_str());
  return 2;
}

}  // namespace gpupack
