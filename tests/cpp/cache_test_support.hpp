// cache_test_support.hpp — what the cache tests share: a record holding one made-up cubin, and warnings captured instead of printed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache_internal.hpp"
#include "jitbridge/jit.hpp"

namespace jitbridge::testing {

// A cache record whose program (arch sm_90) holds `cubin` and nothing else, recorded now.
inline detail::CacheRecord record_with(std::string cubin) {
  detail::CacheRecord r;
  auto p = std::make_shared<Program>();
  p->arch = "sm_90";
  p->cubin = std::move(cubin);
  r.program = p;
  r.recorded_ns = detail::now_ns();
  return r;
}

// jitbridge::warn's messages, collected while this lives (the handler is process-wide: one at a time).
struct CapturedWarnings {
  std::vector<std::string> messages;
  CapturedWarnings() {
    set_warning_handler([this](const std::string& m) { messages.push_back(m); });
  }
  ~CapturedWarnings() { set_warning_handler(nullptr); }
  CapturedWarnings(const CapturedWarnings&) = delete;
  CapturedWarnings& operator=(const CapturedWarnings&) = delete;
};

}  // namespace jitbridge::testing
