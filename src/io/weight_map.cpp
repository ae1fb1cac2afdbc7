#include "io/weight_map.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "io/hf_config.h"

namespace tf {
namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Shard names come from a file we did not write; keep them inside the checkpoint directory.
bool safe_relative_name(const std::string& f) {
  if (f.empty() || f[0] == '/') return false;
  size_t start = 0;
  while (start <= f.size()) {
    size_t slash = f.find('/', start);
    std::string part = f.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

std::string dtypes_str(std::initializer_list<DType> dtypes) {
  std::string s;
  size_t i = 0;
  for (DType d : dtypes) {
    if (i) s += (i + 1 == dtypes.size()) ? " or " : ", ";
    s += dtype_name(d);
    ++i;
  }
  return s;
}

constexpr const char* kIndexName = "model.safetensors.index.json";

}  // namespace

Status WeightMap::add_file(const std::string& path, const std::set<std::string>* expected_names) {
  TF_ASSIGN(SafetensorsFile f, SafetensorsFile::open(path));
  auto file = std::make_unique<SafetensorsFile>(std::move(f));
  std::string fname = base_name(path);
  for (const SafetensorsEntry& e : file->tensors()) {
    auto [it, inserted] = infos_.try_emplace(e.name);
    if (!inserted)
      return make_error(
          one_line("tensor '" + e.name + "' appears in both " + it->second.file + " and " + fname));
    it->second = TensorInfo{e.name, e.dtype, e.shape, e.data, e.nbytes(), fname};
  }
  if (expected_names) {
    for (const std::string& name : *expected_names)
      if (!file->find(name))
        return make_error(one_line(std::string(kIndexName) + " maps tensor '" + name + "' to " + fname +
                                   ", which does not contain it"));
  }
  file_paths_.push_back(path);
  files_.push_back(std::move(file));
  return {};
}

Expected<WeightMap> WeightMap::open(const std::string& checkpoint_dir) {
  WeightMap wm;
  wm.dir_ = checkpoint_dir;
  std::string single = checkpoint_dir + "/model.safetensors";
  std::string index_path = checkpoint_dir + "/" + kIndexName;
  // Transformers looks for the single file first, then the index.
  if (is_file(single)) {
    TF_TRY(wm.add_file(single, nullptr));
    return wm;
  }
  if (!is_file(index_path))
    return make_error(checkpoint_dir + ": no model.safetensors or " + kIndexName +
                      " (tensorfold reads safetensors only)");

  TF_ASSIGN(nlohmann::json index, read_json_file(index_path));
  auto fail = [&](const std::string& msg) {
    return make_error(one_line(std::string(kIndexName) + ": " + msg));
  };
  if (!index.is_object()) return fail("must hold a JSON object");
  auto wmap = index.find("weight_map");
  if (wmap == index.end()) return fail("has no weight_map");
  if (!wmap->is_object()) return fail("weight_map must map tensor names to file names");
  std::map<std::string, std::set<std::string>> by_file;
  for (auto it = wmap->begin(); it != wmap->end(); ++it) {
    if (!it->is_string()) return fail("weight_map maps tensor '" + it.key() + "' to a non-string");
    const std::string& f = it->get_ref<const std::string&>();
    if (!safe_relative_name(f))
      return fail("weight_map maps tensor '" + it.key() + "' to '" + f +
                  "', which is not a file name inside the checkpoint");
    by_file[f].insert(it.key());
  }
  if (by_file.empty()) return fail("weight_map is empty");
  for (const auto& [f, names] : by_file) {
    std::string path = checkpoint_dir + "/" + f;
    if (!is_file(path))
      return fail("shard " + f + " (holding '" + *names.begin() + "' and " +
                  std::to_string(names.size() - 1) + " other tensors) is not in " + checkpoint_dir);
    TF_TRY(wm.add_file(path, &names));
  }
  // A shard may hold tensors the index does not list; Transformers loads them anyway, and so do
  // we (check_all_used then decides whether the model wanted them).
  size_t unlisted = 0;
  for (const auto& [name, ti] : wm.infos_)
    if (!wmap->contains(name)) ++unlisted;
  if (unlisted)
    log_warn(std::string(kIndexName) + " does not list " + std::to_string(unlisted) +
             " tensors found in its shards");
  return wm;
}

Expected<WeightMap> WeightMap::open_files(const std::vector<std::string>& paths) {
  WeightMap wm;
  if (!paths.empty()) {
    size_t slash = paths[0].find_last_of('/');
    wm.dir_ = slash == std::string::npos ? "." : paths[0].substr(0, slash);
  }
  for (const std::string& p : paths) TF_TRY(wm.add_file(p, nullptr));
  return wm;
}

bool WeightMap::has(const std::string& name) const { return infos_.count(name) != 0; }

const TensorInfo* WeightMap::info(const std::string& name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

Expected<Tensor> WeightMap::fetch(const TensorInfo& ti) {
  used_.insert(ti.name);
  size_t align = dtype_size(ti.dtype);
  if (reinterpret_cast<uintptr_t>(ti.data) % align == 0)
    return Tensor{const_cast<void*>(ti.data), ti.dtype, ti.shape};  // read-only mapping; never written
  auto it = aligned_copies_.find(ti.name);
  if (it == aligned_copies_.end()) {
    Buffer copy(ti.dtype, ti.shape);
    if (ti.nbytes) std::memcpy(copy.data(), ti.data, ti.nbytes);
    it = aligned_copies_.emplace(ti.name, std::move(copy)).first;
  }
  return it->second.view();
}

Expected<Tensor> WeightMap::get(const std::string& name, DType dtype, const Shape& shape) {
  return get_any(name, {dtype}, shape);
}

Expected<Tensor> WeightMap::get_any(const std::string& name, std::initializer_list<DType> dtypes,
                                    const Shape& shape) {
  auto it = infos_.find(name);
  if (it == infos_.end())
    return make_error("checkpoint is missing tensor '" + name + "' (expected " + dtypes_str(dtypes) + " " +
                      shape_str(shape) + ")");
  const TensorInfo& ti = it->second;
  if (ti.shape != shape)
    return make_error("tensor '" + name + "' has shape " + shape_str(ti.shape) + " but the config implies " +
                      shape_str(shape));
  if (std::find(dtypes.begin(), dtypes.end(), ti.dtype) == dtypes.end())
    return make_error("tensor '" + name + "' is " + std::string(dtype_name(ti.dtype)) + " but " +
                      dtypes_str(dtypes) + " was expected");
  return fetch(ti);
}

void WeightMap::mark_used(const std::string& name) {
  if (infos_.count(name)) used_.insert(name);
}

std::vector<std::string> WeightMap::names() const {
  std::vector<std::string> out;
  out.reserve(infos_.size());
  for (const auto& kv : infos_) out.push_back(kv.first);
  return out;
}

std::vector<std::string> WeightMap::names_with_prefix(const std::string& prefix) const {
  std::vector<std::string> out;
  for (auto it = infos_.lower_bound(prefix);
       it != infos_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    out.push_back(it->first);
  return out;
}

std::vector<std::string> WeightMap::unused() const {
  std::vector<std::string> out;
  for (const auto& kv : infos_)
    if (!used_.count(kv.first)) out.push_back(kv.first);
  return out;
}

Status WeightMap::check_all_used(const std::vector<std::pair<std::string, std::string>>& allowed) const {
  std::vector<size_t> allowed_count(allowed.size(), 0);
  std::vector<std::string> bad;
  for (const std::string& name : unused()) {
    bool ok = false;
    for (size_t i = 0; i < allowed.size() && !ok; ++i)
      if (name.compare(0, allowed[i].first.size(), allowed[i].first) == 0) {
        ++allowed_count[i];
        ok = true;
      }
    if (!ok) bad.push_back(name);
  }
  for (size_t i = 0; i < allowed.size(); ++i)
    if (allowed_count[i])
      log_info("checkpoint: ignoring " + std::to_string(allowed_count[i]) + " tensors under '" +
               allowed[i].first + "': " + allowed[i].second);
  if (bad.empty()) return {};
  std::string msg = "checkpoint has " + std::to_string(bad.size()) + " tensor" +
                    (bad.size() == 1 ? "" : "s") + " the model does not use: ";
  for (size_t i = 0; i < bad.size() && i < 5; ++i) msg += (i ? ", '" : "'") + bad[i] + "'";
  if (bad.size() > 5) msg += ", and " + std::to_string(bad.size() - 5) + " more";
  return make_error(one_line(msg));
}

size_t WeightMap::total_bytes() const {
  size_t n = 0;
  for (const auto& kv : infos_) n += kv.second.nbytes;
  return n;
}

DType WeightMap::dominant_dtype() const {
  std::map<DType, size_t> bytes;
  for (const auto& kv : infos_) {
    DType d = kv.second.dtype;
    if (d == DType::F32 || d == DType::BF16 || d == DType::F16 || d == DType::F64)
      bytes[d] += kv.second.nbytes;
  }
  DType best = DType::F32;
  size_t best_bytes = 0;
  for (const auto& [d, n] : bytes)
    if (n > best_bytes) {
      best = d;
      best_bytes = n;
    }
  return best;
}

}  // namespace tf
