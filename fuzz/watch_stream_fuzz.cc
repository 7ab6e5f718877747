// The bytes of a watch response, as the transport hands them over: the first byte of the input
// says where the body is cut into two chunks, so events split across reads are covered too.
#include <algorithm>

#include "fuzz/fuzz_target.h"
#include "kube/watch_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupack;
  if (size == 0) return 0;
  const std::string_view body = fuzz::Text(data + 1, size - 1);
  const size_t cut = std::min<size_t>(data[0], body.size());
  kube::WatchStreamDecoder decoder("WATCH fuzz", /*max_line_bytes=*/4096);
  size_t events = 0;
  const auto count = [&](const kube::WatchEvent&) { return ++events < 64; };
  const bool ok =
      decoder.Feed(body.substr(0, cut), count) && decoder.Feed(body.substr(cut), count) && decoder.Finish(count);
  FUZZ_CHECK(ok || decoder.stopped_by_handler() || !decoder.status().ok());
  FUZZ_CHECK(!(decoder.stopped_by_handler() && !decoder.status().ok()));
  return 0;
}
