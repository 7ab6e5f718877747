#include "common/file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpupack {
namespace {

class ReadFileToStringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpupack-file-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ReadFileToStringTest, ReturnsTheBytesUnchanged) {
  const std::string bytes("a: 1\r\n\0binary\xff", 15);
  const std::string path = (dir_ / "f").string();
  std::ofstream(path, std::ios::binary) << bytes;
  StatusOr<std::string> read = ReadFileToString(path, "cluster file");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST_F(ReadFileToStringTest, AnEmptyFileIsEmptyNotAnError) {
  const std::string path = (dir_ / "empty").string();
  std::ofstream{path};
  StatusOr<std::string> read = ReadFileToString(path, "config file");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST_F(ReadFileToStringTest, ErrorsNameTheRoleThePathAndTheReason) {
  const std::string missing = (dir_ / "missing.yaml").string();
  StatusOr<std::string> absent = ReadFileToString(missing, "cluster file");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(absent.status().message(), "cannot read cluster file " + missing + ": No such file or directory");
  StatusOr<std::string> directory = ReadFileToString(dir_.string(), "config file");
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().message(), "cannot read config file " + dir_.string() + ": it is a directory");
}

// /dev/zero never ends: the read stops past the bound with a message instead of growing forever.
TEST_F(ReadFileToStringTest, AFileThatNeverEndsIsRefusedPastTheBound) {
  StatusOr<std::string> endless = ReadFileToString("/dev/zero", "CA file");
  ASSERT_FALSE(endless.ok());
  EXPECT_EQ(endless.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(endless.status().message(), "cannot read CA file /dev/zero: larger than 256 MiB");
}

}  // namespace
}  // namespace gpupack
