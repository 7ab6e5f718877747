#include "scheduler/extender/args_decoder.h"

#include <random>

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::extender {
namespace {

// The fast decoder must agree with api::DecodeExtenderArgs: same values for good bodies, an
// error (with the same field named) for bad ones.
TEST(ArgsDecoder, AgreesWithTheReferenceDecoder) {
  const char* good[] = {
      R"({"Pod":{"metadata":{"name":"p","uid":"u1"}},"Nodes":null,"NodeNames":["a","b"]})",
      R"({"pod":{},"nodenames":["a"]})",
      R"({"Pod":null,"Nodes":null,"NodeNames":null})",
      R"( {"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a","labels":{"x":"y"}},"status":{}},{"metadata":{"name":"b"}}]},"NodeNames":null} )",
      R"({"Nodes":{"items":null},"Extra":[1,{"x":null}]})",
      // Names read where they lie, with JSON whitespace around them, and names with escapes
      // (read by the general path).
      "{\"NodeNames\" : [ \"a\" ,\n\t\"b\"\r] , \"Pod\":{}}",
      R"({"NodeNames":[]})",
      R"({"NodeNames":["a\u0062","c\"d","e\\f"]})",
      "{\"NodeNames\":[\"caf\xc3\xa9\",\"\x7f\"]}",
      // A name or list given twice inside Nodes: the reference decoder's parsed object keeps one.
      R"({"Nodes":{"items":[{"metadata":{"name":"a","name":"b"}}]}})",
      R"({"Nodes":{"items":[{"metadata":{"Name":7,"name":"b"}}]}})",
      R"({"Nodes":{"items":[{"metadata":{"name":"a"},"metadata":{"name":"b"}}]}})",
      R"({"Nodes":{"items":7,"items":[{"metadata":{"name":"b"}}]}})",
  };
  for (const char* body : good) {
    StatusOr<api::ExtenderArgs> want = api::DecodeExtenderArgs(body);
    StatusOr<api::ExtenderArgs> got = DecodeExtenderArgsFast(body);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status() << " for " << body;
    EXPECT_EQ(got->pod, want->pod) << body;
    EXPECT_EQ(got->node_names, want->node_names) << body;
    ASSERT_EQ(got->nodes.has_value(), want->nodes.has_value()) << body;
    if (got->nodes) {
      ASSERT_EQ(got->nodes->size(), want->nodes->size());
      for (size_t i = 0; i < got->nodes->size(); ++i) {
        EXPECT_EQ((*got->nodes)[i].name, (*want->nodes)[i].name);
        // The raw text is echoed as sent; it must denote the same object.
        EXPECT_EQ(nlohmann::json::parse((*got->nodes)[i].raw), nlohmann::json::parse((*want->nodes)[i].raw));
      }
    }
  }
  struct Bad {
    const char* body;
    const char* mentions;
  } bad[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[1]", "JSON object"},
      {R"({"a":1} trailing)", "not valid JSON"},
      {R"({"NodeNames":"a"})", "ExtenderArgs.NodeNames"},
      {R"({"NodeNames":["a",3]})", "ExtenderArgs.NodeNames[1]"},
      {R"({"NodeNames":["a","a"]})", "appears twice"},
      {R"({"NodeNames":["b","a","c","a"]})", R"(node "a" appears twice)"},
      {R"({"NodeNames":["a",""]})", "ExtenderArgs.NodeNames[1]: empty node name"},
      {R"({"NodeNames":["ab","a\u0062"]})", R"(node "ab" appears twice)"},
      {R"({"NodeNames":["a" "b"]})", "not valid JSON"},
      {R"({"NodeNames":["a",]})", "not valid JSON"},
      {R"({"NodeNames":["a",null]})", "ExtenderArgs.NodeNames[1]"},
      {"{\"NodeNames\":[\"a\x01b\"]}", "not valid JSON"},
      {"{\"NodeNames\":[\"a\\u0062\",\"a\x01b\"]}", "not valid JSON"},
      {R"({"Pod":[]})", "ExtenderArgs.Pod"},
      {R"({"Nodes":{"items":[{"metadata":{}}]}})", "ExtenderArgs.Nodes.items[0].metadata.name"},
      {R"({"Nodes":{"items":[{"metadata":{"name":"x"}},{"metadata":{"name":"x"}}]}})", "appears twice"},
      {R"({"Nodes":{"items":[7]}})", "ExtenderArgs.Nodes.items[0]"},
      // Go would read the last Pod and a parsed object keeps one: named twice, refused.
      {R"({"Pod":[],"Pod":{}})", R"(ExtenderArgs: field "Pod" appears twice)"},
      {R"({"NodeNames":["a"],"nodeNames":["b"]})", R"(field "nodeNames" appears twice)"},
      {R"({"x":1,"X":2})", R"(field "X" appears twice)"},
  };
  for (const Bad& b : bad) {
    StatusOr<api::ExtenderArgs> got = DecodeExtenderArgsFast(b.body);
    ASSERT_FALSE(got.ok()) << b.body;
    EXPECT_NE(got.status().message().find(b.mentions), std::string::npos) << got.status() << " for " << b.body;
    EXPECT_FALSE(api::DecodeExtenderArgs(b.body).ok()) << b.body;
  }
}

// Found by fuzz/extender_args_fuzz.cc (inputs in fuzz/regressions/extender_args/): the on-demand
// parser checks only the values it reads and skips the rest by counting brackets, and it and
// nlohmann both took a NUL byte for the end of the body, so the fast decoder accepted bodies the
// reference refused. Values the decoder does not use are now read through, and a value the fast
// reading cannot vouch for (an integer past 64 bits) is left to the reference decoder.
TEST(ArgsDecoder, RefusesWhatTheReferenceRefusesInValuesItDoesNotUse) {
  using std::string_literals::operator""s;
  const std::string bad[] = {
      "{}\0"s,
      "{} \0"s,
      "{}\0x"s,
      "{\"x\":1\0}"s,
      R"({"x":tru})",
      R"({"x":1x})",
      R"({"x":[1,]})",
      R"({"x":{"a" 1}})",
      R"({"x":"\q"})",
      R"({"":"":}})",
      R"({"NodeNames":["a":}]})",
      R"({"NodeNames":["a\u0062":}]})",
      R"({"NodeNames":["a"],"x":nul})",
      R"({"Nodes":{"items":[{"metadata":{"name":"a"},"x":tru}]}})",
      R"({"Nodes":{"items":[{"metadata":{"name":"a","uid":nul}}]}})",
      R"({"Nodes":{"x":[1,],"items":[]}})",
  };
  for (const std::string& body : bad) {
    EXPECT_FALSE(api::DecodeExtenderArgs(body).ok()) << body;
    const StatusOr<api::ExtenderArgs> got = DecodeExtenderArgsFast(body);
    ASSERT_FALSE(got.ok()) << body;
    EXPECT_EQ(got.status().message(), "ExtenderArgs: body is not valid JSON") << body;
  }
  const std::string left_to_the_reference =
      R"({"NodeNames":["a","b\u0063"],"Extra":123456789012345678901234567890,"Pod":{"metadata":{"name":"p"}}})";
  const StatusOr<api::ExtenderArgs> want = api::DecodeExtenderArgs(left_to_the_reference);
  ASSERT_TRUE(want.ok()) << want.status();
  const StatusOr<api::ExtenderArgs> got = DecodeExtenderArgsFast(left_to_the_reference);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->node_names, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(got->pod, want->pod);
}

// Among thousands of names that share a long prefix, one repeat far from its first occurrence is
// found and named; without it the same list decodes.
TEST(ArgsDecoder, FindsTheOneRepeatedNameAmongThousands) {
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i) names.push_back("gpu-node-" + std::to_string(i));
  const std::string unique = nlohmann::json{{"NodeNames", names}}.dump();
  StatusOr<api::ExtenderArgs> ok = DecodeExtenderArgsFast(unique);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->node_names->size(), 5000u);
  names.push_back("gpu-node-17");
  StatusOr<api::ExtenderArgs> twice = DecodeExtenderArgsFast(nlohmann::json{{"NodeNames", names}}.dump());
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), R"(ExtenderArgs.NodeNames: node "gpu-node-17" appears twice)");
}

// A thread remembers the last list it found distinct and skips the check for the same text; any
// other text, a longer list with the same start included, is checked afresh.
TEST(ArgsDecoder, RemembersOnlyTheExactListItChecked) {
  const std::string distinct = R"({"NodeNames":["a","b","c"]})";
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(DecodeExtenderArgsFast(distinct).ok());
  EXPECT_FALSE(DecodeExtenderArgsFast(R"({"NodeNames":["a","b","c","a"]})").ok());
  EXPECT_FALSE(DecodeExtenderArgsFast(R"({"NodeNames":["a","b","b"]})").ok());
  EXPECT_TRUE(DecodeExtenderArgsFast(distinct).ok());
  EXPECT_FALSE(DecodeExtenderArgsFast(R"({"NodeNames":["a","b","c","c"]})").ok());
}

// Bounded randomized input (fixed seed): mutated bodies decode or fail cleanly; whenever the
// fast decoder accepts one, the reference decoder accepts it too and finds the same names.
TEST(ArgsDecoder, RandomizedInputNeverCrashesAndNeverDisagreesOnAcceptedBodies) {
  const std::vector<std::string> seeds = {
      R"({"Pod":{"metadata":{"name":"p","uid":"u"},"spec":{"containers":[{"name":"m"}]}},"Nodes":null,"NodeNames":["a","b"]})",
      R"({"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]},"NodeNames":null})",
  };
  std::mt19937 rng(4242);
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string body = builders::MutatedBody(seeds[i % seeds.size()], rng);
    StatusOr<api::ExtenderArgs> got = DecodeExtenderArgsFast(body);
    if (!got.ok()) continue;
    ++accepted;
    StatusOr<api::ExtenderArgs> want = api::DecodeExtenderArgs(body);
    if (!want.ok()) continue;  // the on-demand parser skips what it need not read; never worse than that
    EXPECT_EQ(got->node_names, want->node_names) << body;
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace gpupack::extender
