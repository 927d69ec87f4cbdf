// py_keepalive.hpp — a reference to a Python object held by C++ (a stream's keepalive, a DLPack owner), whose release is safe on any thread, with or without the GIL, and at interpreter shutdown.
#pragma once

#include <Python.h>

#include <memory>

namespace jitbridge::python {

// A new strong reference to `obj` (the GIL must be held), type-erased. The last copy's deleter may
// run anywhere (a framework's DLPack deleter thread, torch's autograd thread, a C++ destructor):
//   - this thread holds the GIL: Py_DECREF now;
//   - the interpreter is finalizing or gone: the reference is leaked on purpose (no Python object may
//     be touched then; the process is ending);
//   - otherwise: queued, and released on the main thread by a pending call (Py_AddPendingCall). The
//     deleter never waits for the GIL: a thread that frees a tensor while the GIL holder waits for
//     that thread (torch's autograd engine, a stream callback, a joining thread pool) cannot deadlock.
// Never throws from the deleter. Throws std::bad_alloc.
std::shared_ptr<void> python_keepalive(PyObject* obj);

// Releases what the deleter queued so far (the GIL must be held). Called by the pending call, and
// by python_keepalive() itself, so a queue the pending-call table could not take still drains.
void release_queued_references() noexcept;

// How many references are queued now (tests).
std::size_t queued_reference_count() noexcept;

}  // namespace jitbridge::python
