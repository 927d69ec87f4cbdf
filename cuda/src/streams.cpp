// streams.cpp — one stream waiting for another through an event; the current device.
#include "jitbridge/streams.hpp"

#include "jitbridge/device.hpp"

namespace jitbridge {
namespace {

bool is_special(CUstream s) {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

// Pushes `ctx` for a scope when it is not the current context; pops it again (never throws).
class PushIfOther {
 public:
  PushIfOther(const DriverApi& api, CUcontext ctx) : api_(api) {
    CUcontext current = nullptr;
    api.cuCtxGetCurrent(&current);
    if (ctx && ctx != current) {
      check(api.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
      pushed_ = true;
    }
  }
  ~PushIfOther() {
    CUcontext popped = nullptr;
    if (pushed_) api_.cuCtxPopCurrent(&popped);
  }
  PushIfOther(const PushIfOther&) = delete;
  PushIfOther& operator=(const PushIfOther&) = delete;

 private:
  const DriverApi& api_;
  bool pushed_ = false;
};

}  // namespace

void stream_wait(int device, CUstream consumer, CUstream producer) {
  if (same_stream(consumer, producer)) return;
  const DriverApi& api = driver();
  ContextGuard guard(Device::get(device));
  // An event must be created in, and recorded on a stream of, the same context.
  CUcontext producer_ctx = nullptr;
  if (!is_special(producer)) check(api.cuStreamGetCtx(producer, &producer_ctx), "cuStreamGetCtx");
  CUevent event = nullptr;
  {
    PushIfOther push(api, producer_ctx);
    check(api.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    CUresult rc = api.cuEventRecord(event, normalize_stream(producer));
    if (rc != CUDA_SUCCESS) {
      api.cuEventDestroy(event);
      check(rc, "cuEventRecord");
    }
  }
  CUresult rc = api.cuStreamWaitEvent(normalize_stream(consumer), event, 0);
  api.cuEventDestroy(event);  // released once the wait is satisfied
  check(rc, "cuStreamWaitEvent");
}

int current_device() noexcept {
  const DriverApi* api = try_driver();
  if (!api) return 0;
  CUcontext ctx = nullptr;
  if (api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return 0;
  CUdevice dev = 0;
  if (api->cuCtxGetDevice(&dev) != CUDA_SUCCESS) return 0;
  return static_cast<int>(dev);  // a CUdevice is the device's ordinal
}

}  // namespace jitbridge
