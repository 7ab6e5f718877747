#include "common/input_check.h"

#include <gtest/gtest.h>

namespace gpupack {
namespace {

TEST(InputCheck, DuplicateKeysAnywhereAreRefusedWithBothLines) {
  EXPECT_TRUE(ParseYamlStrict("a: 1\nb: {c: 2, d: 3}\n").ok());
  EXPECT_TRUE(ParseYamlStrict("").ok());
  StatusOr<YAML::Node> nested = ParseYamlStrict("a:\n  - x: 1\n    y: 2\n    x: 3\n");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().message(), "line 4: key \"x\" appears twice in one mapping (first on line 2)");
  StatusOr<YAML::Node> broken = ParseYamlStrict("a: [1,\n");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message().rfind("line ", 0), 0u) << broken.status();
  EXPECT_NE(broken.status().message().find("invalid YAML"), std::string::npos) << broken.status();
}

// Every loader reads mapping keys as strings, and yaml-cpp throws for one that is a mapping or a
// list: `{}:` ended gpupack-sim and the extender's config loader (found by fuzz_config_yaml).
TEST(InputCheck, KeysThatAreNotScalarsAreRefusedWithTheirLine) {
  StatusOr<YAML::Node> map_key = ParseYamlStrict("{}:\n");
  ASSERT_FALSE(map_key.ok());
  EXPECT_EQ(map_key.status().message(), "line 1: a mapping key must be a plain string, not a mapping");
  StatusOr<YAML::Node> list_key = ParseYamlStrict("pods:\n  - name: a\n    [x, y]: 1\n");
  ASSERT_FALSE(list_key.ok());
  EXPECT_EQ(list_key.status().message(), "line 3: a mapping key must be a plain string, not a list");
}

TEST(InputCheck, FieldErrorsCarryTheLineOfTheNode) {
  StatusOr<YAML::Node> doc = ParseYamlStrict("a: 1\nb:\n  c: x\n");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(YamlFieldError((*doc)["b"]["c"], "b.c", "want a number").message(), "line 3: b.c: want a number");
  EXPECT_EQ(YamlFieldError(YAML::Node("built"), "x", "m").message(), "x: m");  // no line to give
}

TEST(InputCheck, Dns1123Subdomains) {
  for (const char* good : {"a", "gpu-a1", "gpupack-scheduler", "node.example.com", "0abc9"}) {
    EXPECT_TRUE(CheckDns1123Subdomain(good, "name").ok()) << good;
  }
  for (const char* bad : {"", "Bad Name!", "-a", "a-", "A", "a_b", ".a"}) {
    EXPECT_FALSE(CheckDns1123Subdomain(bad, "name").ok()) << bad;
  }
  EXPECT_FALSE(CheckDns1123Subdomain(std::string(254, 'a'), "name").ok());
  EXPECT_TRUE(CheckDns1123Subdomain(std::string(253, 'a'), "name").ok());
}

}  // namespace
}  // namespace gpupack
