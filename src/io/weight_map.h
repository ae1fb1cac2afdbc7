// WeightMap: every tensor of a checkpoint (model.safetensors, or the shards named by
// model.safetensors.index.json), fetched by name with the dtype and shape the config implies.
// Tensors never fetched are an error at the end of loading unless explicitly allowed, so a
// checkpoint that does not match the model is refused before any large allocation.
//
// The returned Tensors point into read-only mappings (PROT_READ, MAP_PRIVATE): Tensor::data is
// non-const only because Tensor is a general view; weights are never written (a write faults).
// Returned Tensors stay valid while this WeightMap lives, including after it is moved (the
// mappings and aligned copies do not move with it); a model may keep the WeightMap as a member
// and alias its weights.
// Not thread-safe: load on one thread, then share the Tensors freely.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace tf {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  const void* data = nullptr;  // inside the mapping; may be misaligned for its dtype (get() fixes that)
  size_t nbytes = 0;
  std::string file;  // file name of the shard holding it, e.g. "model-00001-of-00002.safetensors"
};

class WeightMap {
 public:
  WeightMap() = default;
  WeightMap(WeightMap&&) noexcept = default;
  WeightMap& operator=(WeightMap&&) noexcept = default;

  // model.safetensors.index.json if present (each shard opened once), else model.safetensors.
  static Expected<WeightMap> open(const std::string& checkpoint_dir);
  // One file, or explicit files (tests, captures). A name present in two files is an error.
  static Expected<WeightMap> open_files(const std::vector<std::string>& paths);

  bool has(const std::string& name) const;
  const TensorInfo* info(const std::string& name) const;  // nullptr if absent

  // Checks presence, dtype and shape; marks the tensor used; returns a view of the mapped bytes
  // (or of an aligned copy when the file places it at an address not aligned to its element size).
  // Errors: "checkpoint is missing tensor 'NAME' (expected BF16 [64, 32])",
  //         "tensor 'NAME' has shape [..] but the config implies [..]",
  //         "tensor 'NAME' is F16 but BF16 was expected".
  Expected<Tensor> get(const std::string& name, DType dtype, const Shape& shape);
  // Like get, but any of the accepted dtypes (e.g. F32 or BF16 for fp32/bf16 checkpoints).
  Expected<Tensor> get_any(const std::string& name, std::initializer_list<DType> dtypes, const Shape& shape);
  void mark_used(const std::string& name);
  bool is_used(const std::string& name) const { return used_.count(name) != 0; }

  std::vector<std::string> names() const;                                       // sorted
  std::vector<std::string> names_with_prefix(const std::string& prefix) const;  // sorted
  std::vector<std::string> unused() const;                                      // sorted

  // Error if any tensor was never fetched, unless its name starts with one of the allowed prefixes
  // (prefix -> reason; each allowance that matched is logged with its reason and count). The message
  // lists up to 5 unused names and the count.
  Status check_all_used(
      const std::vector<std::pair<std::string, std::string>>& allowed_unused_prefixes) const;

  size_t size() const { return infos_.size(); }
  size_t total_bytes() const;
  // The most common floating dtype by bytes (BF16 or F32 for the checkpoints we serve); F32 when
  // the checkpoint holds no floating tensors.
  DType dominant_dtype() const;
  const std::string& dir() const { return dir_; }
  const std::vector<std::string>& files() const { return file_paths_; }  // full paths, in open order

 private:
  Expected<Tensor> fetch(const TensorInfo& ti);
  Status add_file(const std::string& path, const std::set<std::string>* expected_names);

  std::string dir_;
  std::vector<std::string> file_paths_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> infos_;
  std::set<std::string> used_;
  std::map<std::string, Buffer> aligned_copies_;  // for misaligned tensors, made on first get
};

}  // namespace tf
