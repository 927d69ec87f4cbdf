// dlpack_export.cpp — managed tensors that own a copy of an ArrayView (and so keep its memory alive).
#include "jitbridge/dlpack_export.hpp"

namespace jitbridge {
namespace {

template <class Managed>
struct Exported {
  ArrayView view;  // shape/strides storage and the owner
  Managed managed{};
};

template <class Managed>
Managed* make(const ArrayView& view) {
  auto* e = new Exported<Managed>{view, {}};
  DLTensor& t = e->managed.dl_tensor;
  t.data = e->view.data;
  t.device = e->view.device;
  t.ndim = e->view.ndim();
  t.dtype = e->view.dtype;
  t.shape = e->view.shape.data();
  t.strides = e->view.strides.data();
  t.byte_offset = e->view.byte_offset;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](Managed* self) {
    // The owner's own release never throws (DeviceBuffer's destructor swallows driver errors).
    delete static_cast<Exported<Managed>*>(self->manager_ctx);
  };
  return &e->managed;
}

}  // namespace

DLManagedTensorVersioned* export_versioned(const ArrayView& view, std::uint64_t flags) {
  DLManagedTensorVersioned* m = make<DLManagedTensorVersioned>(view);
  m->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m->flags = flags;
  return m;
}

DLManagedTensor* export_legacy(const ArrayView& view) { return make<DLManagedTensor>(view); }

}  // namespace jitbridge
