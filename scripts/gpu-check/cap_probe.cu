// gpu-check's CUDA probe (scripts/gpu-check.sh, docs/hardware.md): compiled with nvcc on the
// machine under test, never in gpupack's build. One JSON line on stdout per run.
//
//   cap_probe alloc MIB [HOLD_S]  allocate MIB of device memory in 64 MiB cudaMalloc steps (the
//                                 last one smaller), then hold it HOLD_S seconds (default 0);
//                                 exit 0 when all of it was allocated, 3 when an allocation
//                                 failed with cudaErrorMemoryAllocation (the cap held), 1 on any
//                                 other error
//   cap_probe sms SECONDS         launch a busy kernel with many more blocks than SMs for SECONDS;
//                                 each block records the SM it ran on (%smid), so the number of
//                                 distinct SMs used is what an MPS active-thread-percentage cap
//                                 left this client; exit 0, or 1 on a CUDA error
//
// {"mode":"alloc","askedMiB":512,"allocatedMiB":256,"error":"cudaErrorMemoryAllocation","totalMiB":…,"freeMiB":…}
// {"mode":"sms","smCount":132,"smsUsed":33,"seconds":5}
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kStepMiB = 64;

__device__ unsigned int SmId() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Spins about `spins` iterations so each block stays resident long enough for the scheduler to
// spread blocks over every SM the client may use, then marks its SM.
__global__ void MarkSms(unsigned int* seen, unsigned int max_sm, long long spins) {
  const long long start = clock64();
  while (clock64() - start < spins) {
  }
  if (threadIdx.x == 0) {
    const unsigned int sm = SmId();
    if (sm < max_sm) seen[sm] = 1;
  }
}

int Alloc(size_t asked_mib, int hold_s) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes);
  std::vector<void*> blocks;
  size_t allocated_mib = 0;
  while (err == cudaSuccess && allocated_mib < asked_mib) {
    const size_t step = asked_mib - allocated_mib < kStepMiB ? asked_mib - allocated_mib : kStepMiB;
    void* p = nullptr;
    err = cudaMalloc(&p, step * kMiB);
    if (err != cudaSuccess) break;
    cudaMemset(p, 0xab, step * kMiB);  // touch it: memory counts once it is backed
    blocks.push_back(p);
    allocated_mib += step;
  }
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  std::printf(
      "{\"mode\":\"alloc\",\"askedMiB\":%zu,\"allocatedMiB\":%zu,\"error\":\"%s\",\"totalMiB\":%zu,\"freeMiB\":%zu}\n",
      asked_mib, allocated_mib, err == cudaSuccess ? "" : cudaGetErrorName(err), total_bytes / kMiB,
      free_bytes / kMiB);
  std::fflush(stdout);
  if (hold_s > 0) std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  for (void* p : blocks) cudaFree(p);
  if (err == cudaSuccess) return 0;
  return err == cudaErrorMemoryAllocation ? 3 : 1;
}

int Sms(int seconds) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return 1;
  const unsigned int max_sm = 1024;
  unsigned int* seen = nullptr;
  if (cudaMallocManaged(&seen, max_sm * sizeof(unsigned int)) != cudaSuccess) return 1;
  std::memset(seen, 0, max_sm * sizeof(unsigned int));
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  cudaError_t err = cudaSuccess;
  while (err == cudaSuccess && std::chrono::steady_clock::now() < end) {
    MarkSms<<<prop.multiProcessorCount * 8, 128>>>(seen, max_sm, 20'000'000);
    err = cudaDeviceSynchronize();
  }
  int used = 0;
  for (unsigned int i = 0; i < max_sm; ++i) used += seen[i] != 0;
  std::printf("{\"mode\":\"sms\",\"smCount\":%d,\"smsUsed\":%d,\"seconds\":%d,\"error\":\"%s\"}\n",
              prop.multiProcessorCount, used, seconds, err == cudaSuccess ? "" : cudaGetErrorName(err));
  cudaFree(seen);
  return err == cudaSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "alloc") == 0) {
    return Alloc(std::strtoull(argv[2], nullptr, 10), argc >= 4 ? std::atoi(argv[3]) : 0);
  }
  if (argc >= 3 && std::strcmp(argv[1], "sms") == 0) return Sms(std::atoi(argv[2]));
  std::fprintf(stderr, "usage: cap_probe alloc MIB [HOLD_S] | cap_probe sms SECONDS\n");
  return 2;
}
