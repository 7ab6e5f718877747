#include "webhook/testing/review_testing.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "api/annotations.h"

namespace gpupack::webhook::testing {
namespace {

using nlohmann::json;

std::string DecodeBase64(const std::string& text) {
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), int(text.size()));
  EXPECT_GE(n, 0) << "not base64: " << text;
  size_t padding = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) ++padding;
  out.resize(size_t(n) - padding);
  return out;
}

}  // namespace

json LoadReview(const std::string& name) {
  std::ifstream in(std::string(GPUPACK_WEBHOOK_TESTDATA) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

json CapturedDeploymentReview() { return LoadReview("review_deployment_pod.json"); }

json AdmissibleDeploymentReview() {
  json review = CapturedDeploymentReview();
  json& env = review["request"]["object"]["spec"]["containers"][0]["env"];
  json kept = json::array();
  for (const json& entry : env) {
    if (!api::IsDeviceEnvName(entry["name"].get<std::string>())) kept.push_back(entry);
  }
  env = kept;
  return review;
}

json ReviewOf(json pod) {
  json review = CapturedDeploymentReview();
  review["request"]["object"] = std::move(pod);
  return review;
}

json GpuContainer(const std::string& name, const std::string& memory) {
  return {{"name", name}, {"image", "cuda:13.4"}, {"resources", {{"limits", {{"gpupack.io/gpu-memory", memory}}}}}};
}

json PodWith(json containers) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ml"}}},
          {"spec", {{"containers", std::move(containers)}}}};
}

Config StripConfig() {
  Config config;
  config.user_device_env = UserDeviceEnvPolicy::kStrip;
  return config;
}

Answer Ask(const Mutator& mutator, const json& review) {
  Answer a;
  a.result = mutator.Review(review.dump());
  json body = json::parse(a.result.body);  // every answer is well-formed JSON
  EXPECT_EQ(body.value("apiVersion", ""), "admission.k8s.io/v1");
  EXPECT_EQ(body.value("kind", ""), "AdmissionReview");
  a.response = body.at("response");
  if (a.response.contains("patch")) {
    EXPECT_EQ(a.response.value("patchType", ""), "JSONPatch");
    a.patch = json::parse(DecodeBase64(a.response["patch"].get<std::string>()));
  }
  return a;
}

json PatchedPod(const json& review, const Answer& answer) {
  const json& pod = review["request"]["object"];
  return answer.patch.is_null() ? pod : pod.patch(answer.patch);
}

Denial DenialOf(const Mutator& mutator, const json& pod) {
  Answer a = Ask(mutator, ReviewOf(pod));
  EXPECT_EQ(a.result.outcome, Outcome::kDenied) << a.result.body;
  EXPECT_EQ(a.result.http_status, 200);
  EXPECT_EQ(a.response["allowed"], false);
  EXPECT_EQ(a.response["uid"], kCapturedUid);
  EXPECT_FALSE(a.response.contains("patch"));
  return {a.response["status"].value("code", 0), a.response["status"].value("message", "")};
}

}  // namespace gpupack::webhook::testing
