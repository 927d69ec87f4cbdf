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
  // Structured items of any size an opaque dtype holds (up to 0xFFFF bytes), leading zeros or not (a fuzz finding:
  // sizes past 10009 bytes were called malformed); past that, and 0, not supported.
  CHECK(dtype_name(view_from_cai(0x10, false, {2}, std::nullopt, "|V63000", {kDLCUDA, 0}, nullptr, "a").dtype) ==
        "void504000");
  CHECK(dtype_name(view_from_cai(0x10, false, {2}, std::nullopt, "<V0000065535", {kDLCUDA, 0}, nullptr, "a").dtype) ==
        "void524280");
  for (const char* unsupported : {"|V65536", "|V0", "|V99999999999999999999999"})
    CHECK_THROWS_WITH(view_from_cai(0x10, false, {2}, std::nullopt, unsupported, {kDLCUDA, 0}, nullptr, "b"),
                      Catch::Contains("not a supported dtype"));
  CHECK_THROWS_WITH(view_from_cai(0x10, false, {2}, std::nullopt, "<f00000000000000000004x", {kDLCUDA, 0}, nullptr, "b"),
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

// ---- validity at the int64 and address-space limits (validate_view's rules) -------------------

namespace {

// A DLTensor over caller-owned shape/strides; data is a made-up address (views never read it).
struct Raw {
  std::vector<std::int64_t> shape, strides;
  DLTensor t{};
  Raw(std::vector<std::int64_t> s, std::vector<std::int64_t> st, const char* dtype = "int8",
      std::uintptr_t data = 0x1000, std::uint64_t byte_offset = 0)
      : shape(std::move(s)), strides(std::move(st)) {
    t.data = reinterpret_cast<void*>(data);
    t.device = {kDLCUDA, 0};
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = *dtype_from_name(dtype);
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
  }
  ArrayView view() const { return view_from_dltensor(t, false, nullptr, "arg"); }
};

// The InteropError kind and message of building `r`'s view, or "accepted".
std::string refusal(const Raw& r) {
  try {
    r.view();
  } catch (const InteropError& e) {
    const char* kinds[] = {"type", "value", "buffer", "overflow"};
    return std::string(kinds[static_cast<int>(e.kind())]) + ": " + e.what();
  }
  return "accepted";
}

constexpr std::int64_t kMax = INT64_MAX;
constexpr std::int64_t kMin = INT64_MIN;

}  // namespace

TEST_CASE("views at int64 limits: strides whose extent overflows are refused, naming the quantity") {
  // from_ptr(0x1000, (2,), "int8", strides=(2**63-1,)): span + 1 used to overflow and pass.
  CHECK_THAT(refusal(Raw({2}, {kMax})), Catch::StartsWith("overflow: arg: the byte extent"));
  CHECK_THAT(refusal(Raw({2}, {kMin})), Catch::StartsWith("overflow: arg: the byte extent"));
  CHECK_THAT(refusal(Raw({3}, {kMax / 2 + 1})), Catch::StartsWith("overflow: arg: the offsets"));
  CHECK_THAT(refusal(Raw({2, 2}, {kMax / 2, kMax / 2}, "int16")), Catch::StartsWith("overflow: arg: the byte extent"));
  CHECK_THAT(refusal(Raw({2, 2}, {kMax / 2, -(kMax / 2)}, "int16")), Catch::StartsWith("overflow: arg: the byte extent"));
  // Element strides whose byte value overflows, even on a dimension of 1.
  CHECK_THAT(refusal(Raw({1}, {kMax / 2}, "float32")), Catch::Contains("strides[0]") && Catch::Contains("overflows"));
  // Just inside the limits: accepted (addresses permitting).
  CHECK(refusal(Raw({2}, {kMax / 4}, "int8", 0x1000)) == "accepted");
  CHECK(refusal(Raw({1}, {kMax}, "int8")) == "accepted");  // never stepped over
}

TEST_CASE("views at int64 limits: element counts and contiguous strides are checked before they are computed") {
  // NULL strides: the C-contiguous strides of these used to overflow before any check.
  CHECK_THAT(refusal(Raw({1ll << 32, 1ll << 32}, {}, "float32")), Catch::StartsWith("overflow: arg: the array's size in bytes overflows"));
  CHECK_THAT(refusal(Raw({1ll << 62, 2}, {}, "int8")), Catch::StartsWith("overflow: arg: the array's size in bytes overflows"));
  // Stride-0 (broadcast) views: nbytes must fit, so a broadcast of 2**62 int64 elements is too big...
  CHECK_THAT(refusal(Raw({1ll << 62}, {0}, "int64")), Catch::StartsWith("overflow: arg: the array's size in bytes overflows"));
  // ...while 2**40 float32 elements over one are fine, and measure without overflow.
  ArrayView b = Raw({1ll << 40}, {0}, "float32").view();
  CHECK(b.size() == (1ll << 40));
  CHECK(b.nbytes() == (1ll << 42));
  CHECK_FALSE(b.is_c_contiguous());
  CHECK(contiguous_strides(b.shape)[0] == 1);
  CHECK_THROWS_AS(contiguous_strides(Dims(std::vector<std::int64_t>{1ll << 40, 1ll << 40, 1ll << 40}.data(), 3)),
                  InteropError);
}

TEST_CASE("views at int64 limits: zero-size arrays are valid whatever the strides") {
  for (std::int64_t s : {kMin, kMin + 1, std::int64_t{-1}, std::int64_t{0}, kMax}) {
    CHECK(refusal(Raw({0}, {s})) == "accepted");
    CHECK(refusal(Raw({3, 0, 5}, {s, s, kMax}, "complex128")) == "accepted");
  }
  Raw null_empty({4, 0}, {kMax, kMin}, "float64", 0);
  ArrayView e = null_empty.view();
  CHECK(e.size() == 0);
  CHECK(e.nbytes() == 0);
  CHECK(e.is_c_contiguous());
  // The size rule still holds for their other extents (NumPy's "array is too big").
  CHECK_THAT(refusal(Raw({0, 1ll << 40, 1ll << 40}, {}, "int8")), Catch::StartsWith("overflow: arg: the array's size in bytes overflows"));
}

TEST_CASE("views at int64 limits: data + byte_offset and the spanned bytes never wrap the address space") {
  const std::uintptr_t top = UINTPTR_MAX - 0xfff;
  CHECK_THAT(refusal(Raw({2}, {}, "int8", top, 0x2000)), Catch::StartsWith("overflow: arg: data + byte_offset"));
  CHECK_THAT(refusal(Raw({0}, {}, "int8", top, 0x2000)), Catch::StartsWith("overflow: arg: data + byte_offset"));
  CHECK_THAT(refusal(Raw({0}, {}, "int8", 0, UINT64_MAX)) , Catch::StartsWith("accepted"));  // NULL + offset, empty
  CHECK_THAT(refusal(Raw({0x2000}, {}, "int8", top)), Catch::Contains("wrap around the address space"));
  CHECK(refusal(Raw({0x1000}, {}, "int8", top)) == "accepted");  // ends exactly at the top
  CHECK_THAT(refusal(Raw({4}, {-8}, "float32", 0x10)), Catch::Contains("wrap around the address space"));
  CHECK(refusal(Raw({4}, {-1}, "float32", 0x10)) == "accepted");  // lowest byte at address 4
  // ptr() of a NULL base with an offset is plain integer arithmetic.
  Raw offset_only({0}, {}, "int8", 0, 16);
  CHECK(reinterpret_cast<std::uintptr_t>(offset_only.view().ptr()) == 16);
}

TEST_CASE("views: dimension count and dtype are refused before anything is read or allocated") {
  Raw many({2, 2}, {});
  many.t.ndim = INT32_MAX;  // shape has 2 entries: reading or allocating ndim of them would crash
  CHECK_THAT(refusal(many), Catch::StartsWith("value: arg: ndim is 2147483647; at most 64"));
  std::vector<std::int64_t> ones(kMaxNdim, 1);
  CHECK(refusal(Raw(ones, {})) == "accepted");
  ones.push_back(1);
  CHECK_THAT(refusal(Raw(ones, {})), Catch::Contains("at most 64 dimensions"));
  Raw no_bits({2}, {});
  no_bits.t.dtype = DLDataType{kDLInt, 0, 1};
  CHECK_THAT(refusal(no_bits), Catch::StartsWith("value: arg: dtype has 0 bits"));
  Raw sub_byte({3}, {});
  sub_byte.t.dtype = DLDataType{kDLInt, 4, 1};
  CHECK(refusal(sub_byte) == "accepted");  // extents bounded at one byte per element
  // CAI byte strides of a sub-byte dtype used to divide by its item size, 0.
  ArrayView v;
  const std::int64_t shape[1] = {4}, strides[1] = {1};
  CHECK_THROWS_WITH(fill_from_cai(0x1000, false, shape, 1, strides, DLDataType{kDLInt, 4, 1}, {kDLCUDA, 0}, v, "c"),
                    Catch::Contains("c: strides in bytes need a dtype of whole bytes"));
  const std::int64_t huge[1] = {kMin};
  CHECK_THROWS_AS(fill_from_cai(0x1000, false, shape, 1, huge, *dtype_from_name("int8"), {kDLCUDA, 0}, v, "c"),
                  InteropError);
}

TEST_CASE("validate_view decides for hand-built views; measuring an unchecked one throws instead of overflowing") {
  ArrayView v;
  v.data = reinterpret_cast<void*>(0x1000);
  v.dtype = *dtype_from_name("float32");
  v.shape = Dims(std::vector<std::int64_t>{1ll << 40, 1ll << 40}.data(), 2);
  v.strides = Dims(std::vector<std::int64_t>{1, 1}.data(), 2);
  CHECK_THROWS_WITH(validate_view(v, "hand"), Catch::StartsWith("hand: the array's size in bytes overflows"));
  CHECK_THROWS_WITH(validate_view(v, ""), Catch::StartsWith("the array's size in bytes overflows"));
  v.shape = Dims(std::vector<std::int64_t>{1ll << 62, 1ll << 62}.data(), 2);
  CHECK_THROWS_AS(v.size(), InteropError);
  CHECK_THROWS_AS(v.nbytes(), InteropError);
  CHECK_FALSE(v.is_c_contiguous());
  v.shape = Dims(std::vector<std::int64_t>{2}.data(), 1);
  CHECK_THROWS_WITH(validate_view(v, "hand"), Catch::Contains("strides has 2 entries for 1 dimensions"));
  v.strides = Dims(std::vector<std::int64_t>{1}.data(), 1);
  CHECK_NOTHROW(validate_view(v, "hand"));
  v.shape = Dims(std::vector<std::int64_t>{(1ll << 61)}.data(), 1);
  CHECK_NOTHROW(v.size());
  CHECK_THROWS_AS(v.nbytes(), InteropError);  // 2**61 float32 elements are 2**63 bytes
}

TEST_CASE("plain_dltensor is true exactly when fill_from_dltensor accepts the tensor with NULL strides") {
  // Edge values for every field the rules read, combined by a fixed pseudo-random sequence (xorshift64).
  const std::int64_t extents[] = {0, 1, 2, 3, -1, INT32_MAX, std::int64_t{1} << 31, std::int64_t{1} << 40,
                                  INT64_MAX / 4, INT64_MAX, INT64_MIN};
  const std::int32_t ndims[] = {-1, 0, 1, 2, 3, 4, 64, 65};
  const std::uintptr_t datas[] = {0, 0x1000, UINTPTR_MAX - 15, UINTPTR_MAX, UINTPTR_MAX / 2};
  const std::uint64_t offsets[] = {0, 8, 16, UINT64_MAX - 3, UINT64_MAX / 2};
  const DLDataType dtypes[] = {{kDLFloat, 32, 1}, {kDLFloat, 0, 1}, {kDLFloat, 32, 0}, {kDLInt, 1, 1},
                               {kDLFloat, 255, 65535}, {kDLInt, 8, 4}};
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&](std::size_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::size_t>(state % n);
  };
  std::vector<std::int64_t> shape(64);
  int accepted = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    DLTensor t{};
    t.ndim = ndims[next(std::size(ndims))];
    for (auto& e : shape) e = next(3) ? extents[next(4)] : extents[next(std::size(extents))];  // mostly small
    t.shape = next(16) ? shape.data() : nullptr;
    t.data = reinterpret_cast<void*>(datas[next(std::size(datas))]);
    t.byte_offset = offsets[next(std::size(offsets))];
    t.dtype = dtypes[next(std::size(dtypes))];
    t.device = {kDLCUDA, 0};
    bool fills = true;
    ArrayView v;
    try {
      fill_from_dltensor(t, false, v, "x");
    } catch (const InteropError&) {
      fills = false;
    }
    INFO("round " << round << " ndim " << t.ndim << " data " << t.data << " offset " << t.byte_offset);
    CHECK(plain_dltensor(t) == fills);
    (fills ? accepted : refused)++;
    std::int64_t strides[64] = {};
    t.strides = strides;  // strides given: never plain (fill_from_dltensor reads them)
    CHECK_FALSE(plain_dltensor(t));
  }
  CHECK(accepted > 1000);  // both outcomes are exercised
  CHECK(refused > 1000);
}
