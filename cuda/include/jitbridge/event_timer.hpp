// jitbridge/event_timer.hpp — GPU time of work queued on one stream, measured with CUDA events, and an L2 flush.
#pragma once

#include <cstddef>
#include <vector>

#include "jitbridge/device.hpp"

namespace jitbridge {

// Records a start and an end event on one stream around each sample; the samples' GPU times are read all at
// once, after waiting for the last end event (one host synchronization per read, none per sample). The events
// (timing on) are created in the device's primary context as needed and reused after clear(); the destructor
// destroys them and frees the flush buffer. The stream must belong to that context: the default streams, or a
// stream PyTorch, CuPy or Numba created on the device. Not thread-safe (one thread uses one timer).
class EventTimer {
 public:
  // Throws NoDriverError, std::invalid_argument (no such device). Creates nothing yet.
  EventTimer(int device, CUstream stream);
  ~EventTimer();  // never throws
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Records the start event of a new sample on the stream. Throws std::logic_error when a sample is open,
  // DriverError (a stream of another context, say). Never synchronizes.
  void start();
  // Records the end event of the open sample. Throws std::logic_error when none is open, DriverError.
  void stop();
  // Completed samples since construction or the last clear().
  std::size_t samples() const { return done_; }
  // Waits for the last end event (cuEventSynchronize, on the calling thread) and returns each completed
  // sample's GPU milliseconds, in order. A fault in the timed work surfaces here as a DriverError.
  // Throws std::logic_error when a sample is still open.
  std::vector<float> elapsed_ms();
  // Forgets the samples; the events are kept for the next ones.
  void clear();
  // Waits on the host until the work queued on the stream so far is done (cuStreamSynchronize). Throws DriverError.
  void synchronize();

  // Writes `bytes` of a device scratch buffer with cuMemsetD8Async on the stream, which evicts from L2 what
  // earlier work left there; it is timed only when called inside a sample. The buffer is allocated on the first
  // call (and again, larger, when a later call asks more) and freed by the destructor. Never synchronizes the
  // stream (the allocation itself is cuMemAlloc's). Throws DriverError (out of memory: CUDA_ERROR_OUT_OF_MEMORY).
  void flush_l2(std::size_t bytes);
  // The device's L2 cache size in bytes (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE). Throws DriverError.
  std::size_t l2_cache_bytes() const;

  int device() const { return device_->ordinal(); }
  CUstream stream() const { return stream_; }

 private:
  CUevent event(std::size_t index);  // creates events up to `index`

  const Device* device_;
  CUstream stream_;
  std::vector<CUevent> events_;  // sample i: events_[2i] (start), events_[2i + 1] (end)
  std::size_t done_ = 0;
  bool open_ = false;
  CUdeviceptr scratch_ = 0;
  std::size_t scratch_bytes_ = 0;
  unsigned char fill_ = 0;  // the byte written next (changes per flush so that no write can be elided)
};

}  // namespace jitbridge
