// test_interop_outputs.cpp — stream integers, DLPack export of views, DeviceTensor/DeviceBuffer without a driver
// (empty arrays, refusals) and with one (stream-ordered allocation, zero fill, copies, hand-over between streams).
#include <catch2/catch.hpp>

#include "gpu_or_skip.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "jitbridge/device.hpp"
#include "jitbridge/device_tensor.hpp"
#include "jitbridge/dlpack_export.hpp"
#include "jitbridge/streams.hpp"

using namespace jitbridge;
using jitbridge::testing::driver_or_skip;
using jitbridge::testing::gpu_required;

namespace {

Dims dims(std::initializer_list<std::int64_t> v) { return Dims(v.begin(), v.size()); }

}  // namespace

TEST_CASE("stream integers follow the array API standard") {
  CHECK(stream_from_int(0) == CU_STREAM_LEGACY);
  CHECK(stream_from_int(1) == CU_STREAM_LEGACY);
  CHECK(stream_from_int(2) == CU_STREAM_PER_THREAD);
  CHECK(stream_from_int(0x7f00) == reinterpret_cast<CUstream>(0x7f00));
  CHECK(stream_to_int(nullptr) == 1);
  CHECK(stream_to_int(CU_STREAM_LEGACY) == 1);
  CHECK(stream_to_int(CU_STREAM_PER_THREAD) == 2);
  CHECK(stream_to_int(reinterpret_cast<CUstream>(0x7f00)) == 0x7f00);
  CHECK(same_stream(nullptr, CU_STREAM_LEGACY));
  CHECK_FALSE(same_stream(CU_STREAM_PER_THREAD, CU_STREAM_LEGACY));
  // Same streams need no event, hence no driver.
  CHECK_NOTHROW(stream_wait(0, nullptr, CU_STREAM_LEGACY));
}

TEST_CASE("export_versioned / export_legacy own a copy of the view and its owner") {
  float storage[12] = {};
  auto owner = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owner;
  ArrayView v;
  v.data = storage;
  v.byte_offset = 4;
  v.device = {kDLCUDA, 2};
  v.dtype = *dtype_from_name("float32");
  v.shape = dims({3, 2});
  v.strides = dims({-2, 1});
  v.owner = owner;
  owner.reset();

  DLManagedTensorVersioned* m = export_versioned(v, DLPACK_FLAG_BITMASK_IS_COPIED);
  v = ArrayView();  // the export must not depend on the original view
  REQUIRE(m);
  CHECK(m->version.major == DLPACK_MAJOR_VERSION);
  CHECK(m->flags == DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK(m->dl_tensor.data == storage);
  CHECK(m->dl_tensor.byte_offset == 4);
  CHECK(m->dl_tensor.device.device_id == 2);
  CHECK(m->dl_tensor.ndim == 2);
  CHECK(m->dl_tensor.shape[0] == 3);
  CHECK(m->dl_tensor.shape[1] == 2);
  CHECK(m->dl_tensor.strides[0] == -2);
  CHECK(dtype_name(m->dl_tensor.dtype) == "float32");
  CHECK_FALSE(watch.expired());
  // Round trip: consuming the export gives the same view, and one delete releases the owner.
  {
    ArrayView back = view_from_managed(m, "x");
    CHECK(back.ptr() == reinterpret_cast<char*>(storage) + 4);
    CHECK(back.strides.to_vector() == std::vector<std::int64_t>{-2, 1});
    CHECK_FALSE(watch.expired());
  }
  CHECK(watch.expired());

  auto owner2 = std::make_shared<int>(8);
  std::weak_ptr<int> watch2 = owner2;
  ArrayView s;
  s.data = storage;
  s.owner = std::move(owner2);
  DLManagedTensor* l = export_legacy(s);  // 0-d
  s = ArrayView();
  CHECK(l->dl_tensor.ndim == 0);
  CHECK(l->dl_tensor.shape != nullptr);
  CHECK_FALSE(watch2.expired());
  l->deleter(l);
  CHECK(watch2.expired());
}

TEST_CASE("DeviceTensor: empty arrays need no driver; bad shapes and dtypes are refused") {
  DeviceTensor t = DeviceTensor::empty(dims({0, 5}), *dtype_from_name("float16"), 0, StreamRef());
  CHECK(t.nbytes() == 0);
  CHECK(t.view().ptr() == nullptr);
  CHECK(t.view().strides.to_vector() == std::vector<std::int64_t>{5, 1});
  CHECK(t.view().device.device_type == kDLCUDA);
  CHECK(t.stream() == CU_STREAM_LEGACY);  // normalized
  CHECK(t.view().owner == t.buffer());
  CHECK_NOTHROW(t.fill_zero());
  CHECK(t.copy().nbytes() == 0);
  CHECK_NOTHROW(t.buffer()->hand_to(StreamRef(reinterpret_cast<CUstream>(0x1234))));  // nothing to order
  CHECK(t.stream() == CU_STREAM_LEGACY);

  CHECK_THROWS_WITH(DeviceTensor::empty(dims({2, -1}), *dtype_from_name("float32"), 0, StreamRef()),
                    Catch::Contains("shape[1] is negative"));
  CHECK_THROWS_AS(DeviceTensor::empty(dims({1ll << 62, 8}), *dtype_from_name("float32"), 0, StreamRef()), InteropError);
  CHECK_THROWS_WITH(DeviceTensor::empty(dims({4}), DLDataType{kDLInt, 4, 1}, 0, StreamRef()),
                    Catch::Contains("no whole-byte item size"));
  // Sizes are checked before anything is computed from them: the C-contiguous strides of an empty
  // shape whose other extents are huge used to overflow (the byte count, 0, did not).
  try {
    DeviceTensor::empty(dims({0, 1ll << 40, 1ll << 40}), *dtype_from_name("int8"), 0, StreamRef());
    FAIL("accepted");
  } catch (const InteropError& e) {
    CHECK(e.kind() == InteropError::Kind::overflow);
    CHECK_THAT(e.what(), Catch::StartsWith("the array's size in bytes overflows"));
  }
  CHECK_THROWS_AS(DeviceTensor::empty(dims({1ll << 61}), *dtype_from_name("float32"), 0, StreamRef()), InteropError);
  std::vector<std::int64_t> many(kMaxNdim + 1, 1);
  CHECK_THROWS_WITH(DeviceTensor::empty(Dims(many.data(), many.size()), *dtype_from_name("float32"), 0, StreamRef()),
                    Catch::Contains("at most 64 dimensions"));
  DeviceTensor wide = DeviceTensor::empty(dims({0, 1ll << 30, 1ll << 30}), *dtype_from_name("int8"), 0, StreamRef());
  CHECK(wide.nbytes() == 0);
  CHECK(wide.view().strides.to_vector() == std::vector<std::int64_t>{1ll << 60, 1ll << 30, 1});
  if (!try_driver()) {
    CHECK_THROWS_AS(DeviceTensor::empty(dims({4}), *dtype_from_name("float32"), 0, StreamRef()), NoDriverError);
    CHECK(current_device() == 0);
  }
}

TEST_CASE("DeviceTensor on a GPU: stream-ordered allocation, zero fill, copy, hand-over, free while queued") {
  const DriverApi* api = driver_or_skip();
  if (!api) return;
  const Device& dev = Device::get(0);
  ContextGuard guard(dev);
  CUstream a = nullptr, b = nullptr;
  REQUIRE(api->cuStreamCreate(&a, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  REQUIRE(api->cuStreamCreate(&b, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);

  const std::size_t n = 1 << 20;
  std::vector<float> host(n), back(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& x : host) x = dist(rng);
  {
    DeviceTensor t = DeviceTensor::empty(dims({static_cast<std::int64_t>(n)}), *dtype_from_name("float32"), 0, StreamRef(a));
    REQUIRE(t.buffer()->ptr() != 0);
    CHECK(t.stream() == a);
    CHECK(t.buffer()->allocation_stream() == a);
    REQUIRE(api->cuMemcpyHtoDAsync(t.buffer()->ptr(), host.data(), n * 4, a) == CUDA_SUCCESS);
    DeviceTensor c = t.copy();  // queued on a
    // Hand the copy to b: b waits for a (event), and c's free will wait for b.
    c.buffer()->hand_to(StreamRef(b));
    CHECK(c.stream() == b);
    REQUIRE(api->cuMemcpyDtoHAsync(back.data(), c.buffer()->ptr(), n * 4, b) == CUDA_SUCCESS);
    REQUIRE(api->cuStreamSynchronize(b) == CUDA_SUCCESS);
    CHECK(std::memcmp(back.data(), host.data(), n * 4) == 0);

    t.fill_zero();
    REQUIRE(api->cuMemcpyDtoHAsync(back.data(), t.buffer()->ptr(), n * 4, a) == CUDA_SUCCESS);
    REQUIRE(api->cuStreamSynchronize(a) == CUDA_SUCCESS);
    CHECK(std::all_of(back.begin(), back.end(), [](float x) { return x == 0.0f; }));
  }
  // Freed while queued: fill, queue a copy out, drop the tensor, allocate again on the same stream and
  // poison it; the copy (queued before the free) still sees the data.
  {
    std::vector<float> out(n, 0.0f);
    auto t = std::make_unique<DeviceTensor>(
        DeviceTensor::empty(dims({static_cast<std::int64_t>(n)}), *dtype_from_name("float32"), 0, StreamRef(a)));
    REQUIRE(api->cuMemcpyHtoDAsync(t->buffer()->ptr(), host.data(), n * 4, a) == CUDA_SUCCESS);
    REQUIRE(api->cuMemcpyDtoHAsync(out.data(), t->buffer()->ptr(), n * 4, a) == CUDA_SUCCESS);
    t.reset();
    DeviceTensor again = DeviceTensor::empty(dims({static_cast<std::int64_t>(n)}), *dtype_from_name("float32"), 0, StreamRef(a));
    REQUIRE(api->cuMemsetD8Async(again.buffer()->ptr(), 0xFF, n * 4, a) == CUDA_SUCCESS);
    REQUIRE(api->cuStreamSynchronize(a) == CUDA_SUCCESS);
    CHECK(std::memcmp(out.data(), host.data(), n * 4) == 0);
  }
  REQUIRE(api->cuStreamSynchronize(a) == CUDA_SUCCESS);
  REQUIRE(api->cuStreamSynchronize(b) == CUDA_SUCCESS);
  api->cuStreamDestroy(a);
  api->cuStreamDestroy(b);
}
