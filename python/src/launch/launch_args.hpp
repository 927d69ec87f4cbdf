// launch_args.hpp — a Python launch's arguments read into plain values: the per-thread scratch that holds their
// views and scalars for one launch, and convert_arguments, which fills it.
#pragma once

#include <deque>
#include <vector>

#include "bindings.hpp"
#include "jitbridge/arguments.hpp"

namespace jitbridge::python {

struct KernelObject;

// Reused per thread: the views and scalar storage of the arguments of one launch.
struct Scratch {
  std::vector<ArrayView> views;
  std::vector<ArgValue> values;
  std::vector<Py_buffer> buffers;  // held bytes-like arguments, released after packing
  std::vector<char> buffer_held;
  std::size_t held = 0;            // how many buffers are held (usually none)
  ArgBuffer packed;
  void prepare(std::size_t n) {
    if (views.size() < n) {
      views.resize(n);
      buffers.resize(n);
      buffer_held.resize(n);
    }
    values.assign(n, ArgValue{});
  }
  void hold_buffer(std::size_t i) {
    buffer_held[i] = 1;
    ++held;
  }
  // Drops what the arguments lent us: DLPack tensors (their deleters run now) and buffers.
  void release(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      if (views[i].owner) views[i].owner.reset();
    for (std::size_t i = 0; held && i < n; ++i) {
      if (buffer_held[i]) {
        PyBuffer_Release(&buffers[i]);
        buffer_held[i] = 0;
        --held;
      }
    }
  }
};

// One Scratch per nesting level of each thread: converting an argument can run Python code (a
// producer's __dlpack__, a property, a finalizer) that launches again on this thread, and that
// launch must not reuse the views the outer one is still filling. The lease prepares its level for
// `n` arguments and releases what they lent (DLPack tensors, buffers) when it ends.
struct ScratchLease {
  struct Pool {
    std::deque<Scratch> levels;  // a deque: growing it keeps the outer levels in place
    std::size_t depth = 0;
  };
  static Pool& pool() {
    thread_local Pool p;
    return p;
  }
  Pool& p = pool();
  Scratch& s = p.depth < p.levels.size() ? p.levels[p.depth] : p.levels.emplace_back();
  const std::size_t n;
  explicit ScratchLease(std::size_t count) : n(count) {
    ++p.depth;
    s.prepare(n);
  }
  ~ScratchLease() {
    s.release(n);
    --p.depth;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
};

// Fills s.values[0..n) from the Python arguments, arrays viewed for the consumer stream, which is decided first
// (explicit `stream_obj`, else the first array's framework, else legacy) and returned. `k` names the arguments in
// errors. GIL held; raises what reading an argument raises (TypeError, OverflowError, ValueError, BufferError).
CUstream convert_arguments(const KernelObject& k, PyObject* const* args, std::size_t n, PyObject* stream_obj,
                           Scratch& s);

}  // namespace jitbridge::python
