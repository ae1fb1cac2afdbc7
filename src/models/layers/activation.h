// hidden_act names (Transformers' ACT2FN keys) the vision towers admit, mapped to the backend's
// ActKind. Transformers' Pixtral MLP (gated: down(act(gate(x)) * up(x))) and Qwen vision MLP
// (fc2(act(fc1(x)))) run any ACT2FN entry; these are the ones with an op, each checked against an
// oracle golden (tests/golden/README.md).
#pragma once
#include <optional>
#include <string_view>

#include "backend/ops.h"

namespace tf {

inline constexpr const char* kAdmittedActs = "silu, gelu, gelu_pytorch_tanh, gelu_new, quick_gelu, relu";

inline std::optional<ActKind> act_kind_from_hf(std::string_view name) {
  for (ActKind k : {ActKind::kSilu, ActKind::kGelu, ActKind::kGeluTanh, ActKind::kGeluNew,
                    ActKind::kQuickGelu, ActKind::kRelu})
    if (name == act_kind_name(k)) return k;
  return std::nullopt;
}

}  // namespace tf
