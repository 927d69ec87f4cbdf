// py_keepalive.hpp — a reference to a Python object held by C++ (a stream's keepalive, a DLPack owner), whose release is safe on any thread, with or without the GIL, and at interpreter shutdown.
#pragma once

#include <Python.h>

#include <functional>
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

// Runs `fn` (which must not throw; an exception is swallowed) with the GIL, by the same rules as the deleter
// above: now when this thread holds the GIL; queued for the main thread otherwise (never waiting for the GIL);
// never at interpreter shutdown (then `fn` is destroyed without running: whatever it owns must be safe to drop
// anywhere, e.g. python_keepalive references). For a Python allocator's deallocate(). Never throws.
void call_with_gil(std::function<void()> fn) noexcept;

// Releases what the deleter queued so far (the GIL must be held). Called by the pending call, and
// by python_keepalive() itself, so a queue the pending-call table could not take still drains. Runs the
// queued call_with_gil functions first.
void release_queued_references() noexcept;

// Whether no Python code may run now: the interpreter is finalizing or gone. Never throws.
bool interpreter_ending() noexcept;

// How many references and calls are queued now (tests).
std::size_t queued_reference_count() noexcept;

}  // namespace jitbridge::python
