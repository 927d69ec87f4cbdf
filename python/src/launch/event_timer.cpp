// event_timer.cpp — jitbridge._core._EventTimer: the C++ EventTimer (event timing, L2 flush) for jitbridge.benchmark.
#include <fmt/format.h>

#include <climits>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "interop/arrays.hpp"
#include "interop/stream_owners.hpp"
#include "jitbridge/event_timer.hpp"
#include "jitbridge/streams.hpp"

namespace jitbridge::python {
namespace {

// The timer records on its stream at every start()/stop(): it keeps the stream's owner (stream_owners.hpp)
// as long as it lives. `stream` is declared before the timer so that it is released after the timer's
// destructor (which destroys events only).
struct OwnedEventTimer {
  StreamRef stream;
  EventTimer timer;
  OwnedEventTimer(int device, StreamRef s) : stream(std::move(s)), timer(device, stream.handle) {}
};

}  // namespace

void bind_event_timer(py::module_& m) {
  py::class_<OwnedEventTimer>(m, "_EventTimer",
                         "Events recorded around samples on one stream (jitbridge/event_timer.hpp); used by "
                         "jitbridge.benchmark. Not thread-safe.")
      .def(py::init([](py::object stream, py::tuple args, py::object device) {
             // The stream a launch with these arguments would use: stream= if given, else the current stream
             // of the framework the first array came from, else the legacy default stream.
             std::vector<PyObject*> objs;
             objs.reserve(args.size());
             for (py::handle a : args) objs.push_back(a.ptr());  // owned by `args` for the call
             const CUstream s = consumer_stream(stream, objs.data(), objs.size(), "stream");
             int ordinal = 0;
             if (device.is_none()) {
               ordinal = current_device();
             } else {
               if (!PyLong_Check(device.ptr()) || PyBool_Check(device.ptr()))
                 throw py::type_error(fmt::format("device: expected an int (a device ordinal) or None, got {}",
                                                  type_name(device)));
               const long long v = PyLong_AsLongLong(device.ptr());
               if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
               if (v < 0 || v > INT_MAX)
                 throw py::value_error(fmt::format("device: {} is not a device ordinal", v));
               ordinal = static_cast<int>(v);
             }
             return new OwnedEventTimer(ordinal, consumer_stream_ref(s, ordinal));
           }),
           py::arg("stream") = py::none(), py::arg("args") = py::tuple(), py::arg("device") = py::none(),
           "Raises TypeError/ValueError naming stream or device, NoDriverError without a driver.")
      .def("start", [](OwnedEventTimer& t) { t.timer.start(); }, "Records the start event of a new sample on the stream.")
      .def("stop", [](OwnedEventTimer& t) { t.timer.stop(); }, "Records the end event of the open sample.")
      .def("elapsed_ms", [](OwnedEventTimer& t) { return t.timer.elapsed_ms(); }, py::call_guard<py::gil_scoped_release>(),
           "Waits for the last end event (the GIL released) and returns each sample's GPU milliseconds.")
      .def("clear", [](OwnedEventTimer& t) { t.timer.clear(); }, "Forgets the samples (the events are reused).")
      .def("synchronize", [](OwnedEventTimer& t) { t.timer.synchronize(); }, py::call_guard<py::gil_scoped_release>(),
           "Waits until the work queued on the stream is done (the GIL released).")
      .def("flush_l2", [](OwnedEventTimer& t, std::size_t bytes) { t.timer.flush_l2(bytes); }, py::arg("bytes"),
           "Writes `bytes` of a scratch buffer on the stream (cuMemsetD8Async), evicting L2.")
      .def_property_readonly("l2_cache_bytes", [](const OwnedEventTimer& t) { return t.timer.l2_cache_bytes(); },
                             "The device's L2 cache size in bytes.")
      .def_property_readonly("samples", [](const OwnedEventTimer& t) { return t.timer.samples(); },
                             "Completed samples since the last clear().")
      .def_property_readonly("device", [](const OwnedEventTimer& t) { return t.timer.device(); }, "The device ordinal.")
      .def_property_readonly(
          "stream", [](const OwnedEventTimer& t) { return static_cast<unsigned long long>(stream_to_int(t.stream.handle)); },
          "The stream the events are recorded on, as an int handle (1: the legacy default stream).");
}

}  // namespace jitbridge::python
