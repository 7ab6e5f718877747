// Replays every file of the directories given on the command line through the target's
// LLVMFuzzerTestOneInput, one GoogleTest case per directory: the seed corpus and the regression
// inputs (each a finding that was fixed) run in every build, with any compiler, so a fixed crash
// stays fixed where clang and libFuzzer are absent. Missing directories are skipped (a target may
// have no regressions yet); an empty seed corpus fails, so a target cannot pass by reading nothing.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/fuzz_target.h"

namespace {

std::vector<std::string> g_dirs;

TEST(FuzzCorpusReplay, EveryInputRunsCleanly) {
  ASSERT_FALSE(g_dirs.empty()) << "usage: replay CORPUS_DIR [REGRESSION_DIR...]";
  size_t inputs = 0;
  for (size_t d = 0; d < g_dirs.size(); ++d) {
    const std::filesystem::path dir(g_dirs[d]);
    if (!std::filesystem::is_directory(dir)) {
      ASSERT_NE(d, 0u) << "the seed corpus " << dir << " is missing";
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    if (d == 0) {
      ASSERT_FALSE(files.empty()) << "the seed corpus " << dir << " is empty";
    }
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(file.string());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  RecordProperty("inputs", static_cast<int>(inputs));
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  g_dirs.assign(argv + 1, argv + argc);
  return RUN_ALL_TESTS();
}
