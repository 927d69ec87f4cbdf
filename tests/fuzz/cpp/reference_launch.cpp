// reference_launch.cpp — the launch-configuration reference (see reference_launch.hpp).
#include "reference_launch.hpp"

#include "../fake_cuda/fake_cuda.h"

namespace jbfuzz::ref {

std::string judge_launch(const LaunchSpec& s) {
  __extension__ typedef unsigned __int128 u128;
  for (int i = 0; i < 3; ++i) {
    if (s.grid[i] < 1 || s.grid[i] > static_cast<std::uint64_t>(fake_cuda::kMaxGridDim[i])) return "a grid dimension is out of range";
    if (s.block[i] < 1 || s.block[i] > static_cast<std::uint64_t>(fake_cuda::kMaxBlockDim[i])) return "a block dimension is out of range";
  }
  const u128 threads = u128{s.block[0]} * s.block[1] * s.block[2];
  if (threads > static_cast<u128>(fake_cuda::kMaxThreadsPerBlock) || threads > static_cast<u128>(fake_cuda::kKernelMaxThreads))
    return "too many threads per block";
  if (s.shared_mem > 0 && u128{s.shared_mem} + fake_cuda::kKernelStaticShared > static_cast<u128>(fake_cuda::kMaxSharedOptin))
    return "too much shared memory";
  if (s.cluster[0] != 0) {
    for (int i = 0; i < 3; ++i) {
      if (s.cluster[i] < 1) return "a cluster dimension is 0";
      if (s.grid[i] % s.cluster[i] != 0) return "the cluster does not divide the grid";
    }
    if (u128{s.cluster[0]} * s.cluster[1] * s.cluster[2] > 16) return "the cluster has more than 16 blocks";
  }
  if (s.programmatic && fake_cuda::kCcMajor < 9) return "programmatic dependent launch needs cc 9.0";
  // A cooperative grid must be co-resident: the fake occupancy API gives 2 blocks per multiprocessor,
  // and the fake GPU has 132 multiprocessors (fake_cuda.cpp).
  if (s.cooperative && u128{s.grid[0]} * s.grid[1] * s.grid[2] > u128{2} * 132)
    return "a cooperative grid larger than can be resident at once";
  return {};
}

}  // namespace jbfuzz::ref
