#include "api/pod_annotations.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "api/annotations.h"
#include "api/testing/pod_annotation_cases.h"

namespace gpupack::api {
namespace {

using testing::Annotations;

// Reads `set` row by row in table order, as translate::ParsePodRequest reads a pod's annotations,
// for the pod the shared cases are written for: one container "main" with 8192 MiB on one device.
StatusOr<model::PodRequest> Read(const Annotations& set) {
  model::PodRequest request;
  request.containers.push_back(model::ContainerRequest{"main", 0, false, 1, 8192});
  for (const PodAnnotation& row : PodAnnotations()) {
    auto it = set.find(std::string(row.name));
    if (row.read == nullptr || it == set.end()) continue;
    GPUPACK_RETURN_IF_ERROR(row.read(row, it->second, request));
  }
  return request;
}

std::string Dump(const Annotations& set) {
  std::string out;
  for (const auto& [name, value] : set) out += name + "=\"" + value + "\" ";
  return out;
}

TEST(PodAnnotations, EveryAcceptedCaseWritesBackItsCanonicalForm) {
  for (const testing::AcceptedCase& c : testing::kAcceptedCases) {
    SCOPED_TRACE(Dump(c.set));
    StatusOr<model::PodRequest> read = Read(c.set);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(WritePodAnnotations(*read), c.written);
    // The written form reads back to the same request: it writes itself again.
    StatusOr<model::PodRequest> again = Read(c.written);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(WritePodAnnotations(*again), c.written);
  }
}

TEST(PodAnnotations, EveryRefusedCaseGivesItsMessage) {
  for (const testing::RefusedCase& c : testing::kRefusedCases) {
    SCOPED_TRACE(Dump(c.set));
    StatusOr<model::PodRequest> read = Read(c.set);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(read.status().message(), c.message);
  }
}

// A new user row fails here until the shared cases accept and refuse values of it, so every
// reader of the table (this test, the pod parser's, the workload file's) checks it.
TEST(PodAnnotations, EveryUserRowHasAnAcceptedAndARefusedCase) {
  std::set<std::string> accepted, refused;
  for (const testing::AcceptedCase& c : testing::kAcceptedCases)
    for (const auto& [name, value] : c.set) accepted.insert(name);
  for (const testing::RefusedCase& c : testing::kRefusedCases)
    for (const auto& [name, value] : c.set) refused.insert(name);
  std::set<std::string> user_rows;
  for (std::string_view name : UserAnnotationNames()) user_rows.emplace(name);
  for (const std::string& name : user_rows) {
    EXPECT_TRUE(accepted.count(name)) << name << " has no accepted case";
    EXPECT_TRUE(refused.count(name)) << name << " has no refused case";
  }
  // And the cases name nothing but user rows (a misspelt one would test nothing).
  for (const auto& names : {accepted, refused})
    for (const std::string& name : names) EXPECT_TRUE(user_rows.count(name)) << name;
}

TEST(PodAnnotations, RowsAreUserRowsThatReadAndWriteOrComponentRowsThatSayWhy) {
  std::set<std::string_view> names, workload_keys;
  for (const PodAnnotation& row : PodAnnotations()) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(row.name.starts_with(kGpupackPrefix));
    EXPECT_TRUE(names.insert(row.name).second) << "declared twice";
    const bool user = row.writer == AnnotationWriter::kUser;
    EXPECT_EQ(row.read != nullptr, user);
    EXPECT_EQ(row.write != nullptr, user);
    EXPECT_EQ(!row.refusal.empty(), user);
    EXPECT_EQ(row.purpose.empty(), user);
    if (!row.workload_key.empty()) {
      EXPECT_TRUE(user) << "the workload file carries only what a pod's author writes";
      EXPECT_TRUE(workload_keys.insert(row.workload_key).second) << row.workload_key << " twice";
    }
  }
}

TEST(PodAnnotations, ComponentNamesAreFoundWithTheirWriter) {
  struct Case {
    std::string key;
    const PodAnnotation* row;  // nullptr: no row's
  };
  auto row_of = [](std::string_view name) {
    for (const PodAnnotation& row : PodAnnotations())
      if (row.name == name) return &row;
    return static_cast<const PodAnnotation*>(nullptr);
  };
  const PodAnnotation* containers =
      FindPodAnnotation(ContainerAnnotationKey(false, 0, ContainerEnvKey::kVisibleDevices));
  ASSERT_NE(containers, nullptr);
  EXPECT_EQ(containers->writer, AnnotationWriter::kScheduler);
  const Case cases[] = {
      {"gpupack.io/allocation", row_of(kAnnotationAllocation)},
      {"gpupack.io/whole-device-charge", row_of(kAnnotationWholeDeviceCharge)},
      {"gpupack.io/device-kind", row_of(kAnnotationDeviceKind)},
      {"gpupack.io/c0-memory-limit-mib", containers},
      {"gpupack.io/i12-mps-memory-limit", containers},
      {"gpupack.io/c0-visible-device", nullptr},   // not a key ContainerAnnotationKey makes
      {"gpupack.io/c-visible-devices", nullptr},   // no index
      {"gpupack.io/x0-visible-devices", nullptr},  // neither c nor i
      {"gpupack.io/device_kind", nullptr},
      {"example.com/device-kind", nullptr},
  };
  for (const Case& c : cases) EXPECT_EQ(FindPodAnnotation(c.key), c.row) << c.key;
  for (ContainerEnvKey key : kAllContainerEnvKeys) {
    EXPECT_EQ(FindPodAnnotation(ContainerAnnotationKey(true, 3, key)), containers) << int(key);
  }
  EXPECT_EQ(row_of(kAnnotationWholeDeviceCharge)->writer, AnnotationWriter::kWebhook);
  EXPECT_EQ(row_of(kAnnotationAllocation)->writer, AnnotationWriter::kScheduler);
}

std::string ReadDoc(const std::string& name) {
  std::ifstream in(std::string(GPUPACK_SOURCE_DIR) + "/docs/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The backticked first cells of the markdown table that starts after `heading`.
std::vector<std::string> FirstCells(const std::string& doc, const std::string& heading) {
  std::vector<std::string> cells;
  size_t at = doc.find(heading);
  if (at == std::string::npos) return cells;
  std::istringstream lines(doc.substr(at + heading.size()));
  std::string line;
  bool in_table = false;
  while (std::getline(lines, line)) {
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (size_t open = cell.find('`'); open != std::string::npos; open = cell.find('`', open)) {
      const size_t close = cell.find('`', open + 1);
      if (close == std::string::npos) break;
      cells.push_back(cell.substr(open + 1, close - open - 1));
      open = close + 1;
    }
  }
  return cells;
}

// docs/annotations.md is the users' reference: it lists the user rows in table order, shows the
// refusal of an unknown annotation with today's list, and names every fixed component name.
TEST(PodAnnotations, DocsAnnotationsListsTheTable) {
  const std::string doc = ReadDoc("annotations.md");
  ASSERT_FALSE(doc.empty());
  const std::vector<std::string> documented = FirstCells(doc, "Pod annotations (all optional):");
  EXPECT_EQ(documented, std::vector<std::string>(UserAnnotationNames().begin(), UserAnnotationNames().end()));
  EXPECT_NE(doc.find("the annotations a pod may set are " + JoinNames(UserAnnotationNames()) + "\n"), std::string::npos)
      << "the example refusal in docs/annotations.md lists other names";
  for (const PodAnnotation& row : PodAnnotations()) {
    if (row.writer != AnnotationWriter::kUser && row.matches == nullptr) {
      EXPECT_NE(doc.find(row.name), std::string::npos) << row.name;
    }
  }
}

// docs/cluster-file.md's workload file table has a line for every workload key.
TEST(PodAnnotations, DocsClusterFileListsTheWorkloadKeys) {
  const std::vector<std::string> documented = FirstCells(ReadDoc("cluster-file.md"), "## Workload file");
  for (const PodAnnotation& row : PodAnnotations()) {
    if (row.workload_key.empty()) continue;
    EXPECT_TRUE(std::find(documented.begin(), documented.end(), row.workload_key) != documented.end())
        << row.workload_key << " is not in docs/cluster-file.md's workload file table";
  }
}

}  // namespace
}  // namespace gpupack::api
