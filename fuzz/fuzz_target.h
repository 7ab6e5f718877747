// What every fuzz target shares: the libFuzzer entry point's signature, and the rule that a
// decoder's contract is checked, not assumed. A target calls a decoder of untrusted bytes exactly
// as production does and then checks what that decoder promises (two decoders agree, what is
// written reads back the same, an answer is well-formed JSON); a broken promise aborts through
// FUZZ_CHECK, which libFuzzer (and the corpus replay, fuzz_replay.cc) reports as a finding with
// the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpupack::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

[[noreturn]] inline void Fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
  std::abort();
}

}  // namespace gpupack::fuzz

#define FUZZ_CHECK(cond) ((cond) ? static_cast<void>(0) : ::gpupack::fuzz::Fail(#cond, __FILE__, __LINE__))
