// py_keepalive.cpp — Python references released (and allocators' deallocate calls run) from any thread: now under the GIL, queued for the main thread otherwise, leaked at shutdown.
#include "common/py_keepalive.hpp"

#include <mutex>
#include <vector>

namespace jitbridge::python {
namespace {

struct Queue {
  std::mutex mutex;               // never held while Python code runs or while waiting for the GIL
  std::vector<PyObject*> objects; // references owed a Py_DECREF
  std::vector<std::function<void()>> calls;  // call_with_gil functions owed a run
  bool scheduled = false;         // a pending call is registered and has not run yet
};

Queue& queue() {
  static Queue* q = new Queue();  // leaked: usable by deleters that run after static destructors
  return *q;
}

int run_queued(void*) {
  release_queued_references();
  return 0;
}

// Adds to the queue (under its lock) and registers the pending call that drains it. Throws std::bad_alloc.
template <class Add>
void enqueue(Add&& add) {
  Queue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  add(q);
  // Py_AddPendingCall takes only the interpreter's pending-call lock (never the GIL); it fails
  // when its table is full, and the next release (or python_keepalive) tries again.
  if (!q.scheduled) q.scheduled = Py_AddPendingCall(&run_queued, nullptr) == 0;
}

void release(PyObject* obj) noexcept {
  if (!Py_IsInitialized()) return;  // gone: leaked on purpose
  if (PyGILState_Check()) {
    Py_DECREF(obj);
    return;
  }
  if (interpreter_ending()) return;  // no thread may touch Python objects now: leaked on purpose
  try {
    enqueue([&](Queue& q) { q.objects.push_back(obj); });
  } catch (...) {
    // push_back could not allocate: the reference is leaked rather than released without the GIL.
  }
}

}  // namespace

bool interpreter_ending() noexcept {
  if (!Py_IsInitialized()) return true;
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void call_with_gil(std::function<void()> fn) noexcept {
  if (!fn || !Py_IsInitialized()) return;  // gone: `fn` is dropped unrun
  if (PyGILState_Check()) {
    try {
      fn();
    } catch (...) {
    }
    return;
  }
  if (interpreter_ending()) return;
  try {
    enqueue([&](Queue& q) { q.calls.push_back(std::move(fn)); });
  } catch (...) {
    // push_back could not allocate: `fn` is dropped unrun (its memory stays with its allocator).
  }
}

void release_queued_references() noexcept {
  Queue& q = queue();
  std::vector<PyObject*> batch;
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    batch.swap(q.objects);
    calls.swap(q.calls);
    q.scheduled = false;
  }
  for (auto& fn : calls) {
    try {
      fn();
    } catch (...) {
    }
  }
  calls.clear();  // what they captured goes now, with the GIL
  // A Py_DECREF can run a finalizer that releases more references: they go to the queue (or, on
  // this thread, which holds the GIL, straight away), never into `batch`.
  for (PyObject* o : batch) Py_DECREF(o);
}

std::size_t queued_reference_count() noexcept {
  Queue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  return q.objects.size() + q.calls.size();
}

std::shared_ptr<void> python_keepalive(PyObject* obj) {
  if (queued_reference_count() != 0) release_queued_references();
  Py_INCREF(obj);
  // If the control block cannot be allocated, shared_ptr calls the deleter (a Py_DECREF here) and throws.
  return std::shared_ptr<void>(obj, [](void* p) { release(static_cast<PyObject*>(p)); });
}

}  // namespace jitbridge::python
