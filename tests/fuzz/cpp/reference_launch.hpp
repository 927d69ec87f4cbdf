// reference_launch.hpp — the launch-configuration reference: whether (grid, block, cluster, shared memory, flags)
// must be accepted for a kernel on the fake GPU (fake_cuda.h's limits), with exact arithmetic.
#pragma once

#include <cstdint>
#include <string>

namespace jbfuzz::ref {

struct LaunchSpec {
  std::uint64_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, cluster[3] = {0, 0, 0};  // cluster x == 0: none
  std::uint64_t shared_mem = 0;
  bool cooperative = false, programmatic = false;
};

// Empty when the launch must be accepted, else why it must be refused. The rules: every grid and block
// dimension in 1..the device's limit; block threads within the device's and the kernel's limit;
// dynamic plus the kernel's static shared memory within the opt-in limit (when dynamic > 0); a cluster
// (x != 0) with every dimension >= 1, dividing the grid, of at most 16 blocks; the device supports
// clusters, cooperative launches and (cc >= 9.0) programmatic dependent launches; a cooperative grid
// has at most (occupancy blocks per multiprocessor x multiprocessors) blocks.
std::string judge_launch(const LaunchSpec& spec);

}  // namespace jbfuzz::ref
