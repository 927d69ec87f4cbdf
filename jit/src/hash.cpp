// hash.cpp — XXH3-128 hashing for cache keys and entry integrity checks.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

#include <new>

#include "jit_internal.hpp"

namespace jitbridge::detail {

Hasher::Hasher() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Hasher::~Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

Hasher& Hasher::field(std::uint64_t value) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), &value, sizeof value);
  return *this;
}

Hasher& Hasher::field(std::string_view bytes) {
  field(static_cast<std::uint64_t>(bytes.size()));
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
  return *this;
}

std::string Hasher::hex() {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::string hash_hex(std::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

}  // namespace jitbridge::detail
