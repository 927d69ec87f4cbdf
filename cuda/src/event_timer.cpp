// event_timer.cpp — CUDA-event timing of the samples recorded on one stream, and the scratch buffer of an L2 flush.
#include "jitbridge/event_timer.hpp"

#include <stdexcept>

namespace jitbridge {

EventTimer::EventTimer(int device, CUstream stream)
    : device_(&Device::get(device)), stream_(stream ? stream : CU_STREAM_LEGACY) {}

EventTimer::~EventTimer() {
  const DriverApi* api = try_driver();
  if (!api || (events_.empty() && !scratch_)) return;
  try {
    ContextGuard guard(*device_);
    for (CUevent e : events_) api->cuEventDestroy(e);
    // cuMemFree waits for the work queued on the buffer (a flush still running) before freeing it.
    if (scratch_) api->cuMemFree(scratch_);
  } catch (...) {
    // The context could not be made current: leave the events and the buffer to the context's teardown.
  }
}

CUevent EventTimer::event(std::size_t index) {
  if (index < events_.size()) return events_[index];
  const DriverApi& api = driver();
  ContextGuard guard(*device_);
  while (events_.size() <= index) {
    CUevent e = nullptr;
    check(api.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    events_.push_back(e);
  }
  return events_[index];
}

void EventTimer::start() {
  if (open_) throw std::logic_error("EventTimer::start: a sample is already open (stop() it first)");
  // Both events of the sample exist before the start is recorded: creating the end event later would put the
  // driver's work for it inside the sample's host time.
  CUevent begin = event(2 * done_);
  event(2 * done_ + 1);
  ContextGuard guard(*device_);
  check(driver().cuEventRecord(begin, stream_), "cuEventRecord");
  open_ = true;
}

void EventTimer::stop() {
  if (!open_) throw std::logic_error("EventTimer::stop: no sample is open (start() one first)");
  ContextGuard guard(*device_);
  check(driver().cuEventRecord(events_[2 * done_ + 1], stream_), "cuEventRecord");
  open_ = false;
  ++done_;
}

std::vector<float> EventTimer::elapsed_ms() {
  if (open_) throw std::logic_error("EventTimer::elapsed_ms: a sample is still open (stop() it first)");
  std::vector<float> out;
  if (done_ == 0) return out;
  const DriverApi& api = driver();
  ContextGuard guard(*device_);
  check(api.cuEventSynchronize(events_[2 * done_ - 1]), "cuEventSynchronize");
  out.reserve(done_);
  for (std::size_t i = 0; i < done_; ++i) {
    float ms = 0.0f;
    check(api.cuEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]), "cuEventElapsedTime");
    out.push_back(ms);
  }
  return out;
}

void EventTimer::clear() {
  if (open_) throw std::logic_error("EventTimer::clear: a sample is still open (stop() it first)");
  done_ = 0;
}

void EventTimer::synchronize() {
  ContextGuard guard(*device_);
  check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

void EventTimer::flush_l2(std::size_t bytes) {
  if (bytes == 0) return;
  const DriverApi& api = driver();
  ContextGuard guard(*device_);
  if (bytes > scratch_bytes_) {
    if (scratch_) {
      check(api.cuMemFree(scratch_), "cuMemFree");
      scratch_ = 0;
      scratch_bytes_ = 0;
    }
    check(api.cuMemAlloc(&scratch_, bytes), "cuMemAlloc");
    scratch_bytes_ = bytes;
  }
  fill_ = static_cast<unsigned char>(fill_ + 1);
  check(api.cuMemsetD8Async(scratch_, fill_, bytes, stream_), "cuMemsetD8Async");
}

std::size_t EventTimer::l2_cache_bytes() const {
  int v = 0;
  check(driver().cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device_->handle()),
        "cuDeviceGetAttribute(L2_CACHE_SIZE)");
  return v > 0 ? static_cast<std::size_t>(v) : 0;
}

}  // namespace jitbridge
