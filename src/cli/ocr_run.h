// `tensorfold ocr` over documents: every selected page of every input goes to the batched engine
// (at most `concurrency` in flight), results come back in input order, to stdout or to --out DIR.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/ocr_inputs.h"
#include "runtime/engine_api.h"

namespace tf::cli {

constexpr int64_t kDefaultMaxTokens = 4096;  // LightOnOCR's model cards use 4096 per page

struct OcrOptions {
  std::optional<std::string> prompt;  // user text after the image (--grounding: "grounding")
  bool grounding = false;
  bool json = false;
  bool no_thinking = false;
  std::string out_dir;      // empty: stdout
  std::string overlay_dir;  // empty: no overlays
  int concurrency = 8;
  int max_repeat = 0;  // 0: guard off
  int64_t max_tokens = kDefaultMaxTokens;
  bool ignore_eos = false;
  SamplingParams sampling;
  GenerationRequest::SamplingGiven sampling_given;
};

// Runs every page; returns the exit status (0: all read, 1: some input or page failed, 130:
// interrupted). Document-level errors (already on `docs`) are reported here too.
int run_documents(EngineApi& engine, std::vector<OcrDocument>& docs, const PageSizer* sizer,
                  const OcrOptions& o);

int ocr_single_image(const Args& a);  // ocr_single.cpp

}  // namespace tf::cli
