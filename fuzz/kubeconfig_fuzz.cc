// Kubeconfig files (--kubeconfig of every binary).
#include "fuzz/fuzz_target.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  (void)kube::ParseKubeconfig(fuzz::Text(data, size), "/nonexistent/kubeconfig");
  return 0;
}
