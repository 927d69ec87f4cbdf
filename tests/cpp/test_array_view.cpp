// test_array_view.cpp — ArrayView from synthetic DLPack tensors and __cuda_array_interface__ fields.
#include <catch2/catch.hpp>

#include "jitbridge/array.hpp"

using namespace jitbridge;

namespace {

struct Synthetic {
  std::vector<std::int64_t> shape, strides;
  float storage[64] = {};
  int deletes = 0;
  DLManagedTensorVersioned managed{};
  DLManagedTensor legacy{};

  explicit Synthetic(std::vector<std::int64_t> s, std::vector<std::int64_t> st = {}) : shape(std::move(s)), strides(std::move(st)) {
    for (DLTensor* t : {&managed.dl_tensor, &legacy.dl_tensor}) {
      t->data = storage;
      t->device = {kDLCUDA, 1};
      t->ndim = static_cast<int32_t>(shape.size());
      t->dtype = {kDLFloat, 32, 1};
      t->shape = shape.data();
      t->strides = strides.empty() ? nullptr : strides.data();
      t->byte_offset = 8;
    }
    managed.version = {1, 3};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensorVersioned* self) { static_cast<Synthetic*>(self->manager_ctx)->deletes++; };
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) { static_cast<Synthetic*>(self->manager_ctx)->deletes++; };
  }
};

InteropError::Kind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InteropError& e) {
    return e.kind();
  }
  FAIL("no InteropError");
  return InteropError::Kind::type;
}

}  // namespace

TEST_CASE("view_from_managed: fields, NULL strides, and exactly one delete") {
  Synthetic s({2, 3});
  {
    ArrayView v = view_from_managed(&s.managed, "x");
    CHECK(v.ptr() == reinterpret_cast<char*>(s.storage) + 8);
    CHECK(v.device.device_type == kDLCUDA);
    CHECK(v.device.device_id == 1);
    CHECK(dtype_name(v.dtype) == "float32");
    CHECK(v.shape.to_vector() == std::vector<std::int64_t>{2, 3});
    CHECK(v.strides.to_vector() == std::vector<std::int64_t>{3, 1});
    CHECK(v.is_c_contiguous());
    CHECK_FALSE(v.readonly);
    ArrayView copy = v;
    CHECK(s.deletes == 0);
  }
  CHECK(s.deletes == 1);
}

TEST_CASE("view_from_managed: read-only flag, negative and non-contiguous strides, 0-d and empty arrays") {
  Synthetic neg({4, 2}, {-2, 1});
  neg.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  ArrayView v = view_from_managed(&neg.managed, "a");
  CHECK(v.readonly);
  CHECK(v.strides.to_vector() == std::vector<std::int64_t>{-2, 1});
  CHECK_FALSE(v.is_c_contiguous());

  Synthetic scalar({});
  ArrayView z = view_from_managed(&scalar.legacy, "s");
  CHECK(z.ndim() == 0);
  CHECK(z.size() == 1);

  Synthetic empty({0, 5});
  empty.managed.dl_tensor.data = nullptr;
  ArrayView e = view_from_managed(&empty.managed, "e");
  CHECK(e.size() == 0);
}

TEST_CASE("view_from_managed: refused tensors are deleted once and named") {
  SECTION("wrong major version") {
    Synthetic s({2});
    s.managed.version = {2, 0};
    CHECK(kind_of([&] { view_from_managed(&s.managed, "arg0"); }) == InteropError::Kind::buffer);
    CHECK(s.deletes == 1);
    CHECK_THROWS_WITH(view_from_managed(&s.managed, "arg0"), Catch::Contains("arg0") && Catch::Contains("version 2.0"));
  }
  SECTION("negative ndim") {
    Synthetic s({2});
    s.managed.dl_tensor.ndim = -1;
    CHECK(kind_of([&] { view_from_managed(&s.managed, "x"); }) == InteropError::Kind::value);
    CHECK(s.deletes == 1);
  }
  SECTION("negative extent") {
    Synthetic s({2, -3});
    CHECK_THROWS_WITH(view_from_managed(&s.managed, "y"), Catch::Contains("y: shape[1] is negative"));
    CHECK(s.deletes == 1);
  }
  SECTION("shape product overflows") {
    Synthetic s({1ll << 40, 1ll << 40});
    CHECK(kind_of([&] { view_from_managed(&s.managed, "x"); }) == InteropError::Kind::overflow);
    CHECK(s.deletes == 1);
  }
  SECTION("strides reach beyond int64") {
    Synthetic s({3, 2}, {INT64_MAX / 2, 1});
    CHECK(kind_of([&] { view_from_managed(&s.managed, "x"); }) == InteropError::Kind::overflow);
  }
  SECTION("NULL data with elements") {
    Synthetic s({2});
    s.managed.dl_tensor.data = nullptr;
    CHECK_THROWS_WITH(view_from_managed(&s.managed, "x"), Catch::Contains("data is NULL"));
  }
}

TEST_CASE("view_from_cai: typestrs, byte strides and bad input") {
  ArrayView v = view_from_cai(0x1000, true, {4, 3}, std::vector<std::int64_t>{4, 16}, "<f4", {kDLCUDA, 0}, nullptr, "a");
  CHECK(v.strides.to_vector() == std::vector<std::int64_t>{1, 4});
  CHECK(v.readonly);
  CHECK(dtype_name(view_from_cai(0x10, false, {2}, std::nullopt, "<V2", {kDLCUDA, 0}, nullptr, "a").dtype) == "bfloat16");
  CHECK(dtype_name(view_from_cai(0x10, false, {2}, std::nullopt, "|b1", {kDLCUDA, 0}, nullptr, "a").dtype) == "bool");
  CHECK(dtype_name(view_from_cai(0x10, false, {2}, std::nullopt, "<c16", {kDLCUDA, 0}, nullptr, "a").dtype) == "complex128");
  CHECK(dtype_name(view_from_cai(0x10, false, {2}, std::nullopt, "<u8", {kDLCUDA, 0}, nullptr, "a").dtype) == "uint64");
  CHECK(view_from_cai(0, false, {0}, std::nullopt, "<f8", {kDLCUDA, 0}, nullptr, "a").size() == 0);
  CHECK_THROWS_WITH(view_from_cai(0x10, false, {2}, std::nullopt, ">f4", {kDLCUDA, 0}, nullptr, "b"),
                    Catch::Contains("b: typestr '>f4' is big-endian"));
  CHECK_THROWS_WITH(view_from_cai(0x10, false, {2}, std::nullopt, "<q4", {kDLCUDA, 0}, nullptr, "b"),
                    Catch::Contains("not a supported dtype"));
  CHECK_THROWS_WITH(view_from_cai(0x10, false, {2}, std::nullopt, "f", {kDLCUDA, 0}, nullptr, "b"),
                    Catch::Contains("malformed"));
  CHECK_THROWS_WITH(view_from_cai(0, false, {2}, std::nullopt, "<f4", {kDLCUDA, 0}, nullptr, "c"),
                    Catch::Contains("c: data pointer is 0"));
  CHECK_THROWS_WITH(view_from_cai(0x10, false, {2}, std::vector<std::int64_t>{3}, "<f4", {kDLCUDA, 0}, nullptr, "d"),
                    Catch::Contains("not a multiple of the item size"));
  CHECK_THROWS_WITH(view_from_cai(0x10, false, {2, 2}, std::vector<std::int64_t>{4}, "<f4", {kDLCUDA, 0}, nullptr, "d"),
                    Catch::Contains("strides has 1 entries for 2 dimensions"));
}

TEST_CASE("dtype names round-trip and typestrs export") {
  for (const char* n : {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                        "float32", "float64", "bfloat16", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"}) {
    auto d = dtype_from_name(n);
    REQUIRE(d);
    CHECK(dtype_name(*d) == n);
  }
  CHECK_FALSE(dtype_from_name("float33"));
  CHECK(dtype_name(*dtype_from_name("half")) == "float16");
  CHECK(typestr_of(*dtype_from_name("float32")) == "<f4");
  CHECK(typestr_of(*dtype_from_name("bool")) == "|b1");
  CHECK(typestr_of(*dtype_from_name("bfloat16")) == "<V2");
  CHECK(dtype_name(dtype_from_typestr(typestr_of(*dtype_from_name("int16")), "x")) == "int16");
  CHECK(itemsize(*dtype_from_name("complex128")) == 16);
  CHECK(device_name({kDLCUDA, 3}) == "cuda:3");
}

TEST_CASE("Dims keeps many dimensions") {
  std::vector<std::int64_t> big(12, 2);
  Dims d(big.data(), big.size());
  Dims copy = d;
  CHECK(copy.to_vector() == big);
  CHECK(contiguous_strides(d)[0] == 2048);
}
