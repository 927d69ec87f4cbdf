// jitbridge/dlpack_export.hpp — DLPack managed tensors over an ArrayView, for handing memory to other frameworks.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>

#include "jitbridge/array.hpp"

namespace jitbridge {

// A DLManagedTensorVersioned (version 1.x, `flags` as given) describing `view`. It holds a copy of
// the view, and so of view.owner, until its deleter runs; shape and strides point into that copy
// (strides are always given). The deleter may run on any thread, without the GIL, and never throws.
// Streams are the caller's business. Throws std::bad_alloc.
DLManagedTensorVersioned* export_versioned(const ArrayView& view, std::uint64_t flags = 0);

// The same as a legacy (unversioned) DLManagedTensor, for consumers that ask for no max_version.
DLManagedTensor* export_legacy(const ArrayView& view);

}  // namespace jitbridge
