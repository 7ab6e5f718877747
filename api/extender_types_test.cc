#include "api/extender_types.h"

#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace gpupack::api {
namespace {

TEST(ExtenderTypes, DecodesFilterArgsWithNodeNames) {
  StatusOr<ExtenderArgs> args =
      DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"p","uid":"u1"}},"Nodes":null,"NodeNames":["a","b"]})");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->pod["metadata"]["name"], "p");
  EXPECT_FALSE(args->nodes.has_value());
  ASSERT_TRUE(args->node_names.has_value());
  EXPECT_EQ(*args->node_names, (std::vector<std::string>{"a", "b"}));
}

TEST(ExtenderTypes, FieldNamesMatchCaseInsensitivelyAsGoDoes) {
  StatusOr<ExtenderArgs> args = DecodeExtenderArgs(R"({"pod":{},"nodenames":["a"]})");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args->node_names, std::vector<std::string>{"a"});
  StatusOr<ExtenderBindingArgs> bind =
      DecodeBindingArgs(R"({"podname":"p","PODNAMESPACE":"ns","poduid":"u","node":"n"})");
  ASSERT_TRUE(bind.ok()) << bind.status();
  EXPECT_EQ(*bind, (ExtenderBindingArgs{"p", "ns", "u", "n"}));
}

// Go reads the last of two fields that match case-insensitively, a parsed object keeps one of
// two equal names: which one we would read is a guess, so every decoder refuses the body.
TEST(ExtenderTypes, ATopLevelFieldNamedTwiceIsRefused) {
  const StatusOr<ExtenderArgs> args = DecodeExtenderArgs(R"({"Pod":[],"pod":{}})");
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().message(), R"(ExtenderArgs: field "pod" appears twice)");
  const StatusOr<ExtenderBindingArgs> bind =
      DecodeBindingArgs(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"a","Node":"b"})");
  ASSERT_FALSE(bind.ok());
  EXPECT_EQ(bind.status().message(), R"(ExtenderBindingArgs: field "Node" appears twice)");
  EXPECT_FALSE(DecodePreemptionArgs(R"({"Pod":{},"POD":{}})").ok());
  // Below the top level the parsed object decides, as for any field the decoders pass through.
  const StatusOr<ExtenderArgs> nested = DecodeExtenderArgs(R"({"Pod":{"metadata":{"uid":"a","uid":"b"}}})");
  ASSERT_TRUE(nested.ok()) << nested.status();
}

TEST(ExtenderTypes, NullIsAcceptedEverywhere) {
  StatusOr<ExtenderArgs> args = DecodeExtenderArgs(R"({"Pod":null,"Nodes":null,"NodeNames":null})");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->pod.is_null());
  EXPECT_FALSE(args->node_names.has_value());
  EXPECT_TRUE(DecodeBindingArgs(R"({"PodName":null,"PodNamespace":null,"PodUID":null,"Node":null})").ok());
  StatusOr<ExtenderPreemptionArgs> pre =
      DecodePreemptionArgs(R"({"Pod":null,"NodeNameToVictims":null,"NodeNameToMetaVictims":{"n":null}})");
  ASSERT_TRUE(pre.ok()) << pre.status();
  EXPECT_TRUE(pre->victims.at("n").pod_uids.empty());
}

TEST(ExtenderTypes, FullNodesKeepTheirNamesAndEchoVerbatim) {
  const std::string body =
      R"({"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a","labels":{"x":"y"}},"status":{}},)"
      R"({"metadata":{"name":"b"}}]},"NodeNames":null})";
  StatusOr<ExtenderArgs> args = DecodeExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.status();
  ASSERT_EQ(args->nodes->size(), 2u);
  EXPECT_EQ((*args->nodes)[0].name, "a");
  ExtenderFilterResult result;
  result.nodes = std::vector<WireNode>{(*args->nodes)[0]};
  const std::string encoded = EncodeFilterResult(result);
  EXPECT_EQ(encoded, R"({"Nodes":{"metadata":{},"items":[{"metadata":{"labels":{"x":"y"},"name":"a"},"status":{}}]},)"
                     R"("NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""})");
}

// The priority list is written straight into a buffer sized for names that need no escaping; a
// name that does (quote, backslash, control character) is escaped and grows the text, anywhere
// in the list, and scores keep their sign and every digit.
TEST(ExtenderTypes, EncodesPriorityListsWithEscapedNamesAndAnyScore) {
  EXPECT_EQ(EncodeHostPriorityList({}), "[]");
  EXPECT_EQ(EncodeHostPriorityList({{"a\"b", -3}, {"plain", 10}, {"c\\d\n", std::numeric_limits<int64_t>::min()}}),
            R"([{"Host":"a\"b","Score":-3},{"Host":"plain","Score":10},)"
            R"({"Host":"c\\d\u000a","Score":-9223372036854775808}])");
  HostPriorityList many;
  for (int i = 0; i < 100; ++i) many.push_back({std::string(i % 7 == 0 ? "q\"" : "n") + std::to_string(i), i});
  StatusOr<HostPriorityList> decoded = DecodeHostPriorityList(EncodeHostPriorityList(many));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, many);
}

// Names are checked for characters that need escaping 8 bytes at a time: every such character
// is found at every position of names shorter and longer than a word, and UTF-8 or DEL is not.
TEST(ExtenderTypes, EscapesEveryCharacterThatNeedsItAtEveryPosition) {
  for (size_t length = 1; length <= 20; ++length) {
    for (size_t at = 0; at < length; ++at) {
      for (char special : {'"', '\\', '\n', '\x1f', '\x00', '\x7f', '\xc3'}) {
        std::string name(length, 'n');
        name[at] = special;
        if (special == '\xc3') name.insert(at + 1, 1, '\xa9');  // é: valid UTF-8, needs no escape
        const std::string text = EncodeHostPriorityList({{name, 3}});
        StatusOr<HostPriorityList> decoded = DecodeHostPriorityList(text);
        ASSERT_TRUE(decoded.ok()) << decoded.status() << " for " << text;
        EXPECT_EQ(*decoded, (HostPriorityList{{name, 3}})) << text;
        const bool escaped = static_cast<unsigned char>(special) < 0x20 || special == '"' || special == '\\';
        EXPECT_EQ(text.size(), std::string(R"([{"Host":"","Score":3}])").size() + name.size() +
                                   (escaped ? (special == '"' || special == '\\' ? 1 : 5) : 0))
            << text;
      }
    }
  }
}

TEST(ExtenderTypes, EncodesExactlyWhatGoExpects) {
  // Strings from kube-scheduler's extender/v1 types_test.go TestCompatibility.
  EXPECT_EQ(EncodeBindingArgs({"mypodname", "mypodnamespace", "mypoduid", "mynode"}),
            R"({"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid","Node":"mynode"})");
  EXPECT_EQ(EncodeBindingResult({"myerror"}), R"({"Error":"myerror"})");
  EXPECT_EQ(EncodeHostPriorityList({{"myhost", 1}}), R"([{"Host":"myhost","Score":1}])");
  ExtenderPreemptionResult pre;
  pre.node_name_to_meta_victims["foo"] = MetaVictims{{"myuid"}, 1};
  EXPECT_EQ(EncodePreemptionResult(pre),
            R"({"NodeNameToMetaVictims":{"foo":{"NumPDBViolations":1,"Pods":[{"UID":"myuid"}]}}})");
  ExtenderFilterResult filter;
  filter.node_names = std::vector<std::string>{"node1"};
  filter.failed_nodes["foo"] = "bar";
  filter.error = "myerror";
  EXPECT_EQ(
      EncodeFilterResult(filter),
      R"({"Nodes":null,"NodeNames":["node1"],"FailedNodes":{"foo":"bar"},"FailedAndUnresolvableNodes":{},"Error":"myerror"})");
}

// kube-scheduler formats a failure's text as printf (its FailedScheduling event): no '%' may reach it.
TEST(ExtenderTypes, MessagesReachKubeSchedulerWithoutPrintfVerbs) {
  ExtenderFilterResult filter;
  filter.node_names = std::vector<std::string>{"100%-node"};
  filter.failed_nodes["n1"] = "needs 30 % compute, largest free share 20 %";
  filter.failed_and_unresolvable_nodes["n2"] = "more than 150 % of its memory";
  filter.error = "50%";
  EXPECT_EQ(EncodeFilterResult(filter),
            "{\"Nodes\":null,\"NodeNames\":[\"100%-node\"],"  // a node's name is its name
            "\"FailedNodes\":{\"n1\":\"needs 30 \uFF05 compute, largest free share 20 \uFF05\"},"
            "\"FailedAndUnresolvableNodes\":{\"n2\":\"more than 150 \uFF05 of its memory\"},\"Error\":\"50\uFF05\"}");
  EXPECT_EQ(EncodeBindingResult({"device at 101 %"}), "{\"Error\":\"device at 101 \uFF05\"}");
  EXPECT_EQ(SchedulerSafeMessage("no percent sign"), "no percent sign");
}

TEST(ExtenderTypes, ResultsRoundTripThroughTheClientDecoders) {
  ExtenderFilterResult filter;
  filter.node_names = std::vector<std::string>{"a"};
  filter.failed_and_unresolvable_nodes["b"] = "no GPU";
  StatusOr<ExtenderFilterResult> back = DecodeFilterResult(EncodeFilterResult(filter));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back->node_names, *filter.node_names);
  EXPECT_EQ(back->failed_and_unresolvable_nodes, filter.failed_and_unresolvable_nodes);
  StatusOr<HostPriorityList> list = DecodeHostPriorityList(EncodeHostPriorityList({{"a", 10}, {"b", 0}}));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (HostPriorityList{{"a", 10}, {"b", 0}}));
  ExtenderPreemptionArgs pargs;
  pargs.pod = nlohmann::json::object();
  pargs.victims["n"] = MetaVictims{{"u1", "u2"}, 0};
  StatusOr<ExtenderPreemptionArgs> pback = DecodePreemptionArgs(EncodePreemptionArgs(pargs));
  ASSERT_TRUE(pback.ok()) << pback.status();
  EXPECT_EQ(pback->victims, pargs.victims);
}

TEST(ExtenderTypes, FullVictimPodsReduceToUids) {
  StatusOr<ExtenderPreemptionArgs> args = DecodePreemptionArgs(
      R"({"Pod":{},"NodeNameToVictims":{"n":{"Pods":[{"metadata":{"uid":"a"}},{"metadata":{"uid":"b"}}],"NumPDBViolations":2}},"NodeNameToMetaVictims":null})");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->victims.at("n"), (MetaVictims{{"a", "b"}, 2}));
}

TEST(ExtenderTypes, WrongInputIsRefusedNamingTheField) {
  struct Case {
    const char* body;
    const char* mentions;
  } cases[] = {
      {"{", "not valid JSON"},
      {"[1]", "JSON object"},
      {R"({"NodeNames":"a"})", "ExtenderArgs.NodeNames"},
      {R"({"NodeNames":["a",3]})", "ExtenderArgs.NodeNames[1]"},
      {R"({"NodeNames":["a","a"]})", "appears twice"},
      {R"({"NodeNames":["a",""]})", "ExtenderArgs.NodeNames[1]: empty node name"},
      {R"({"Pod":[]})", "ExtenderArgs.Pod"},
      {R"({"Nodes":{"items":[{"metadata":{}}]}})", "ExtenderArgs.Nodes.items[0].metadata.name"},
      {R"({"Nodes":{"items":[{"metadata":{"name":"x"}},{"metadata":{"name":"x"}}]}})", "appears twice"},
  };
  for (const Case& c : cases) {
    StatusOr<ExtenderArgs> args = DecodeExtenderArgs(c.body);
    ASSERT_FALSE(args.ok()) << c.body;
    EXPECT_NE(args.status().message().find(c.mentions), std::string::npos) << args.status() << " for " << c.body;
  }
  EXPECT_FALSE(DecodeBindingArgs(R"({"PodUID":5})").ok());
  EXPECT_FALSE(DecodeHostPriorityList(R"([{"Host":"a","Score":5.0}])").ok());
  EXPECT_FALSE(DecodePreemptionArgs(R"({"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":""}]}}})").ok());
  EXPECT_FALSE(DecodePreemptionArgs(R"({"NodeNameToMetaVictims":{"n":{"NumPDBViolations":"1"}}})").ok());
}

// Randomized input: mutations of valid bodies and random bytes must decode or fail cleanly,
// never crash or hang. Bounded (fixed seed, fixed count) so it runs in CI in well under a second.
TEST(ExtenderTypes, RandomizedInputNeverCrashesTheDecoders) {
  const std::vector<std::string> seeds = {
      R"({"Pod":{"metadata":{"name":"p","uid":"u"},"spec":{"containers":[{"name":"m"}]}},"Nodes":null,"NodeNames":["a","b"]})",
      R"({"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]},"NodeNames":null})",
      R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"})",
      R"({"Pod":{},"NodeNameToVictims":null,"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":"u"}],"NumPDBViolations":0}}})",
  };
  std::mt19937 rng(12345);
  int decoded = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::string body = builders::MutatedBody(seeds[i % seeds.size()], rng);
    decoded += DecodeExtenderArgs(body).ok();
    decoded += DecodeBindingArgs(body).ok();
    decoded += DecodePreemptionArgs(body).ok();
    decoded += DecodeFilterResult(body).ok();
    decoded += DecodeHostPriorityList(body).ok();
  }
  // Some mutations stay valid; most do not. Both paths were exercised.
  EXPECT_GT(decoded, 0);
  EXPECT_LT(decoded, 5 * 4000);
}

}  // namespace
}  // namespace gpupack::api
