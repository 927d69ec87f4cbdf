// param_acceptors.cpp — fast_params (param_acceptors.hpp): which parameters the launch fast path packs, and how;
// pack_accepted, the acceptors over a call's plain values (the C interface's launch).
#include "jitbridge/param_acceptors.hpp"

#include <cstring>

namespace jitbridge {

std::vector<FastParam> fast_params(const Signature& signature, const std::vector<ParamPlan>& plan,
                                   const ParamLayout& layout) {
  std::vector<FastParam> out(signature.params.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const Param& param = signature.params[i];
    const ParamPlan& pp = plan[i];
    FastParam& f = out[i];
    if (param.size > kFastSpaceBytes || layout.offsets[i] + param.size > kFastSpaceBytes) continue;  // none
    f.offset = static_cast<std::uint16_t>(layout.offsets[i]);
    f.size = static_cast<std::uint16_t>(param.size);
    using K = ParamPlan::Kind;
    using S = ParamPlan::Scalar;
    if (pp.kind == K::pointer) {
      f.kind = FastParam::Kind::pointer;
      // Vector and struct pointees have count and alignment rules the fast path does not read: NULL only. A pointer
      // of another size than sizeof(void*) (a damaged signature: the full path refuses any value for it): none.
      f.takes_arrays = f.size == sizeof(void*) &&
                       (pp.any_dtype || (pp.has_dtype && pp.lanes == 1 && !pp.has_alt_dtype && !pp.struct_items));
      f.any_dtype = pp.any_dtype;
      f.char_like = pp.char_like;
      f.pointee_const = pp.pointee_const;
      f.dtype = pp.dtype;
    } else if (pp.kind == K::scalar && (pp.scalar == S::signed_int || pp.scalar == S::unsigned_int)) {
      f.kind = FastParam::Kind::integer;
      f.is_signed = pp.scalar == S::signed_int;
    } else if (pp.kind == K::scalar && pp.scalar == S::boolean && param.size == 1) {
      f.kind = FastParam::Kind::boolean;  // (each acceptor writes its parameter's every byte: ParamLayout::padded)
    } else if (pp.kind == K::scalar && pp.scalar == S::floating && (param.size == 4 || param.size == 8)) {
      f.kind = FastParam::Kind::floating;
    } else if (pp.kind == K::scalar || pp.kind == K::by_value) {
      f.kind = FastParam::Kind::bytes_only;  // the full path copies the bytes of any scalar or struct parameter
    }
  }
  return out;
}

bool pack_accepted(const std::vector<FastParam>& fast, std::size_t bytes, const ArgValue* values, std::size_t stride,
                   std::size_t n, int device, unsigned char* space) noexcept {
  if (fast.size() != n || bytes > kFastSpaceBytes) return false;
  std::memset(space, 0, bytes);  // the padding between parameters passes as zeros, never stack garbage
  int used = -1;                 // the arrays' device
  for (std::size_t i = 0; i < n; ++i) {
    const ArgValue& v = *reinterpret_cast<const ArgValue*>(reinterpret_cast<const char*>(values) + i * stride);
    if (!accept_value(fast[i], v, used, space)) return false;
  }
  return used < 0 || used == device;
}

}  // namespace jitbridge
