"""The C interface of launch/include/jitbridge/c_api.h (version 1.1) as ctypes declarations, for the tests that call
it from Python (test_c_api.py, test_c_api_gpu.py, test_param_forms_gpu.py): the table from the capsule `_core._c_api`,
its structs and constants, and Args (a launch's argument array). Every call but kernel_from_python is declared with CFUNCTYPE, which releases the GIL around the call."""
import ctypes

from jitbridge import _core

MAJOR, MINOR = 1, 1
OK, ERROR_TYPE, ERROR_OVERFLOW, ERROR_VALUE, ERROR_LAUNCH_CONFIG = 0, 1, 2, 3, 4
PARAM_POINTER, PARAM_TENSOR, PARAM_SCALAR, PARAM_BY_VALUE = 0, 1, 2, 3
ARG_ARRAY, ARG_NULL, ARG_INT, ARG_UINT, ARG_FLOAT, ARG_BOOL, ARG_COMPLEX, ARG_BYTES = range(8)
NO_ARG_CHECKS = 1

P = ctypes.c_void_p


class Param(ctypes.Structure):  # jitbridge_param
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32), ("has_dtype", ctypes.c_int32),
                ("dtype_code", ctypes.c_uint8), ("dtype_bits", ctypes.c_uint8), ("dtype_lanes", ctypes.c_uint16),
                ("lanes", ctypes.c_int32), ("rank", ctypes.c_int32), ("is_const", ctypes.c_int32),
                ("size", ctypes.c_size_t), ("align", ctypes.c_size_t), ("type", ctypes.c_char_p),
                ("spelling", ctypes.c_char_p)]


class Source(ctypes.Structure):  # jitbridge_source
    _fields_ = [("struct_size", ctypes.c_uint32), ("source", ctypes.c_char_p),
                ("options", ctypes.POINTER(ctypes.c_char_p)), ("n_options", ctypes.c_size_t),
                ("name_expressions", ctypes.POINTER(ctypes.c_char_p)), ("n_name_expressions", ctypes.c_size_t),
                ("header_names", ctypes.POINTER(ctypes.c_char_p)), ("header_texts", ctypes.POINTER(ctypes.c_char_p)),
                ("n_headers", ctypes.c_size_t), ("arch", ctypes.c_char_p)]


class Array(ctypes.Structure):  # jitbridge_array
    _fields_ = [("data", P), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("dtype_code", ctypes.c_uint8), ("dtype_bits", ctypes.c_uint8), ("dtype_lanes", ctypes.c_uint16),
                ("ndim", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("readonly", ctypes.c_int32)]


class Arg(ctypes.Structure):  # jitbridge_arg
    _fields_ = [("kind", ctypes.c_int32), ("reserved", ctypes.c_int32), ("i", ctypes.c_int64), ("u", ctypes.c_uint64),
                ("f", ctypes.c_double), ("im", ctypes.c_double), ("bytes", P), ("n_bytes", ctypes.c_size_t),
                ("array", Array)]


class Config(ctypes.Structure):  # jitbridge_launch_config
    _fields_ = [("struct_size", ctypes.c_uint32), ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("shared_mem", ctypes.c_size_t), ("stream", P), ("cluster", ctypes.c_uint32 * 3),
                ("cooperative", ctypes.c_int32), ("programmatic_dependent", ctypes.c_int32)]


_fn = ctypes.CFUNCTYPE


class Table(ctypes.Structure):  # JitbridgeCApi
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("struct_size", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32), ("jitbridge_version", ctypes.c_char_p),
                ("last_error", _fn(ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int))),
                ("kernel_from_source", _fn(ctypes.c_int, ctypes.POINTER(Source), ctypes.c_char_p, ctypes.POINTER(P))),
                ("kernel_from_python", ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(P))),
                ("kernel_retain", _fn(None, P)),
                ("kernel_release", _fn(None, P)),
                ("kernel_info", _fn(ctypes.c_int, P, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64))),
                ("kernel_param", _fn(ctypes.c_int, P, ctypes.c_size_t, ctypes.POINTER(Param))),
                ("kernel_resolve", _fn(ctypes.c_int, P, ctypes.c_int, ctypes.POINTER(P))),
                ("launch", _fn(ctypes.c_int, P, ctypes.POINTER(Config), ctypes.POINTER(Arg), ctypes.c_size_t,
                               ctypes.c_uint32)),
                ("mem_alloc", _fn(ctypes.c_int, ctypes.c_int, ctypes.c_size_t, P, ctypes.POINTER(ctypes.c_uint64))),
                ("mem_free", _fn(ctypes.c_int, ctypes.c_int, ctypes.c_uint64, P)),
                # 1.1
                ("alloc_async", _fn(ctypes.c_int, ctypes.c_int, ctypes.c_size_t, P, ctypes.POINTER(ctypes.c_uint64))),
                ("free_async", _fn(ctypes.c_int, ctypes.c_int, ctypes.c_uint64, P))]


def table():
    """_core's table (the capsule's pointer), as a Table."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return Table.from_address(get(_core._c_api, b"jitbridge._core._c_api"))


def message(t):
    """The calling thread's last error message."""
    text = ctypes.c_char_p()
    t.last_error(ctypes.byref(text), None)
    return (text.value or b"").decode()


def config(grid, block, stream=0, shared_mem=0):
    c = Config(struct_size=ctypes.sizeof(Config), shared_mem=shared_mem, stream=stream or None)
    c.grid[:] = (grid, 1, 1)
    c.block[:] = (block, 1, 1)
    return c


class Args:
    """A launch's jitbridge_arg array, keeping the shape arrays it points to alive."""

    def __init__(self, *values):
        self.keep = []
        self.array = (Arg * len(values))()
        for i, v in enumerate(values):
            if isinstance(v, tuple):  # (pointer, n, readonly)
                ptr, n, readonly = v
                shape = (ctypes.c_int64 * 1)(n)
                self.keep.append(shape)
                self.array[i].kind = ARG_ARRAY
                self.array[i].array = Array(data=ptr, device_type=2, device_id=0, dtype_code=2, dtype_bits=32,
                                            dtype_lanes=1, ndim=1, shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                                            readonly=int(readonly))
            elif isinstance(v, float):
                self.array[i].kind, self.array[i].f = ARG_FLOAT, v
            else:
                self.array[i].kind, self.array[i].i = ARG_INT, v
