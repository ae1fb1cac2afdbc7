// libFuzzer target: arbitrary bytes as a safetensors file. Accepted files must satisfy every
// invariant the header validation promises (bytes in range, sizes matching, no overlap); refused
// ones must give a single-line message naming the file.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = tf::SafetensorsFile::from_memory(data, size, "fuzz.safetensors");
  if (!f.ok()) {
    const std::string& m = f.error().message;
    if (m.rfind("fuzz.safetensors: ", 0) != 0 || m.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const uint8_t* data_begin = data + 8 + f->header_size();
  const uint8_t* data_end = data + size;
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  unsigned sum = 0;
  for (const tf::SafetensorsEntry& e : f->tensors()) {
    if (e.data < data_begin || e.data + e.nbytes() > data_end) std::abort();
    if (static_cast<uint64_t>(tf::shape_numel(e.shape)) * tf::dtype_size(e.dtype) != e.nbytes()) std::abort();
    if (f->find(e.name) != &e) std::abort();
    for (size_t i = 0; i < e.nbytes(); ++i) sum += e.data[i];  // every byte readable (ASan checks)
    if (e.nbytes()) ranges.emplace_back(e.data, e.data + e.nbytes());
  }
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t j = i + 1; j < ranges.size(); ++j)
      if (ranges[i].first < ranges[j].second && ranges[j].first < ranges[i].second) std::abort();
  volatile unsigned sink = sum;
  (void)sink;
  return 0;
}
