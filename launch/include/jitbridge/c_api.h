/* jitbridge/c_api.h — the versioned C interface: resolve, inspect and launch jitbridge kernels and allocate device
 * memory from native code (a C++ torch autograd node, an XLA FFI handler) with no Python and no GIL.
 *
 * How to get the table:
 *  - from an extension module next to jitbridge: PyCapsule_Import("jitbridge._core._c_api", 0) (with the GIL, once),
 *    then jitbridge_c_api_check(table, JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, why, sizeof why);
 *  - from C++ linked with jitbridge::jitbridge: jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR,
 *    why, sizeof why).
 * Versioning: a major version change means the table's meaning changed; a consumer built against another major is
 * refused with the reason. Minor versions only append members at the end of JitbridgeCApi (and of the structs that
 * start with struct_size), so a consumer built against minor m works with every table of that major whose minor is
 * >= m. The table is static: it lives as long as the module that made it (for _core: the process).
 *
 * Every function is plain C, never throws, and touches no Python object (except kernel_from_python, which needs the
 * GIL). Each returns JITBRIDGE_OK (0) or an error code; the message (naming the argument and the reason, as the
 * Python API's exceptions do) is kept per thread until that thread's next failing call: last_error().
 * Thread-safe: any thread may call any function at any time.
 * Minor versions: 1.0 the members up to mem_free; 1.1 adds alloc_async and free_async. */
#ifndef JITBRIDGE_C_API_H
#define JITBRIDGE_C_API_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define JITBRIDGE_C_API_MAJOR 1
#define JITBRIDGE_C_API_MINOR 1
#define JITBRIDGE_C_API_CAPSULE "jitbridge._core._c_api"

/* Error codes. TYPE, OVERFLOW and VALUE are what the Python API raises as TypeError, OverflowError, ValueError. */
enum {
  JITBRIDGE_OK = 0,
  JITBRIDGE_ERROR_TYPE = 1,          /* an argument of the wrong kind or dtype */
  JITBRIDGE_ERROR_OVERFLOW = 2,      /* a scalar out of its parameter's range */
  JITBRIDGE_ERROR_VALUE = 3,         /* a wrong value: read-only array, other device, rank, count, alignment... */
  JITBRIDGE_ERROR_LAUNCH_CONFIG = 4, /* grid, block, shared memory, cluster beyond the device's or kernel's limits */
  JITBRIDGE_ERROR_LAUNCH = 5,        /* the driver refused the launch, or an earlier kernel faulted (cuda_result) */
  JITBRIDGE_ERROR_DRIVER = 6,        /* another driver call failed (cuda_result says which error) */
  JITBRIDGE_ERROR_NO_DRIVER = 7,     /* no usable CUDA driver on this machine */
  JITBRIDGE_ERROR_COMPILE = 8,       /* NVRTC rejected the source, or NVRTC itself failed */
  JITBRIDGE_ERROR_NOT_FOUND = 9,     /* no such kernel in the program */
  JITBRIDGE_ERROR_VERSION = 10,      /* a table or struct of another version */
  JITBRIDGE_ERROR_UNSUPPORTED = 11,  /* not available in this table (kernel_from_python outside _core) */
  JITBRIDGE_ERROR_INTERNAL = 12      /* a bug in jitbridge, or out of host memory */
};

/* A kernel of a compiled program: refcounted (kernel_retain / kernel_release), immutable, thread-safe. It keeps its
 * program and loaded modules alive. */
typedef struct jitbridge_kernel jitbridge_kernel;
/* A kernel resolved on one device (its module loaded there). Borrowed from its kernel: valid while the kernel is. */
typedef struct jitbridge_function jitbridge_function;
/* The driver's stream type (CUstream, cudaStream_t): declared so that this header needs no cuda.h. */
struct CUstream_st;

/* What to compile: everything that identifies a program across processes (the cache key is made from it, so a
 * second process gets the cached build). Borrowed during the call only. */
typedef struct jitbridge_source {
  uint32_t struct_size;                 /* sizeof(jitbridge_source) of the caller */
  const char* source;                   /* CUDA C++, NUL-terminated */
  const char* const* options;           /* NVRTC options as the Python API takes them ("-DN=4"); n_options of them */
  size_t n_options;
  const char* const* name_expressions;  /* template instantiations to lower ("scale<float>") */
  size_t n_name_expressions;
  const char* const* header_names;      /* in-memory headers: n_headers names and texts */
  const char* const* header_texts;
  size_t n_headers;
  const char* arch;                     /* "sm_90", ...; NULL or "": each device builds for its own architecture */
} jitbridge_source;

/* What kind of parameter. */
enum {
  JITBRIDGE_PARAM_POINTER = 0,  /* T*: takes an array (or NULL) */
  JITBRIDGE_PARAM_TENSOR = 1,   /* jitbridge::Tensor<T, N> by value: data pointer, shape and strides */
  JITBRIDGE_PARAM_SCALAR = 2,   /* int, float, __half, bool, complex...: a number */
  JITBRIDGE_PARAM_BY_VALUE = 3  /* any other type by value (a struct): its bytes */
};

/* One parameter of a kernel's signature (kernel_param). Strings are borrowed from the kernel. */
typedef struct jitbridge_param {
  uint32_t struct_size;  /* set by the caller to sizeof(jitbridge_param); members past it are not written */
  int32_t kind;          /* JITBRIDGE_PARAM_* */
  /* The dtype (DLPack codes: 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool, ...) of a pointer's or tensor
   * view's element, or of a scalar; has_dtype 0 for void* (any dtype), user structs and by-value parameters. */
  int32_t has_dtype;
  uint8_t dtype_code, dtype_bits;
  uint16_t dtype_lanes;  /* always 1: vector pointees are lanes of the scalar dtype */
  int32_t lanes;         /* float4*: 4 (arrays hold a multiple of 4 float32); 1 otherwise */
  int32_t rank;          /* tensor views: N; 0 otherwise */
  int32_t is_const;      /* pointers and tensor views: the element is const */
  size_t size, align;    /* the parameter's bytes and alignment in the parameter space */
  const char* type;      /* pointee or value type without const: "float", "jitbridge::Tensor<float, 2>" */
  const char* spelling;  /* the whole type as the compiler printed it: "float const*" */
} jitbridge_param;

/* One launch argument. `kind` says which member is read. Borrowed during launch() only. Fixed within a major
 * version (args come as an array). */
enum {
  JITBRIDGE_ARG_ARRAY = 0,    /* array: device memory */
  JITBRIDGE_ARG_NULL = 1,     /* a NULL pointer */
  JITBRIDGE_ARG_INT = 2,      /* i */
  JITBRIDGE_ARG_UINT = 3,     /* u */
  JITBRIDGE_ARG_FLOAT = 4,    /* f: double, converted as Python converts a float */
  JITBRIDGE_ARG_BOOL = 5,     /* i: 0 or 1 */
  JITBRIDGE_ARG_COMPLEX = 6,  /* f, im */
  JITBRIDGE_ARG_BYTES = 7     /* bytes, n_bytes: a struct's bytes */
};
typedef struct jitbridge_array {
  void* data;                    /* address of element 0 */
  int32_t device_type;           /* DLPack: 2 cuda, 13 cuda managed (kernels take only these), 1 cpu */
  int32_t device_id;
  uint8_t dtype_code, dtype_bits;
  uint16_t dtype_lanes;          /* DLPack dtype */
  int32_t ndim;                  /* 0 for a bare pointer (checked as one element) */
  const int64_t* shape;          /* ndim extents; read where the checks need them (tensor views, vector counts) */
  const int64_t* strides;        /* ndim strides in elements; NULL: C-contiguous */
  int32_t readonly;              /* nonzero: only const pointees take it */
} jitbridge_array;
typedef struct jitbridge_arg {
  int32_t kind;  /* JITBRIDGE_ARG_* */
  int32_t reserved;
  int64_t i;     /* INT, BOOL */
  uint64_t u;    /* UINT */
  double f;      /* FLOAT; COMPLEX: the real part */
  double im;     /* COMPLEX: the imaginary part */
  const void* bytes;
  size_t n_bytes;
  jitbridge_array array;
} jitbridge_arg;

typedef struct jitbridge_launch_config {
  uint32_t struct_size;                /* sizeof(jitbridge_launch_config) of the caller */
  uint32_t grid[3], block[3];          /* every dimension >= 1 */
  size_t shared_mem;                   /* dynamic shared memory per block; above 48 KiB the limit is raised */
  struct CUstream_st* stream;          /* the stream the launch is queued on (NULL: the legacy default stream) */
  uint32_t cluster[3];                 /* thread-block cluster dims; all 0: none */
  int32_t cooperative;
  int32_t programmatic_dependent;
} jitbridge_launch_config;

/* launch() flags. */
#define JITBRIDGE_LAUNCH_NO_ARG_CHECKS 1u /* as check_args=False: any array into any pointer (device memory and the
                                          * one-device rule still hold; scalars keep their rules) */

typedef struct JitbridgeCApi {
  uint32_t major;        /* JITBRIDGE_C_API_MAJOR of the jitbridge that made the table */
  uint32_t minor;
  uint32_t struct_size;  /* sizeof(JitbridgeCApi) there */
  uint32_t reserved;
  const char* jitbridge_version; /* "0.1.0" */

  /* The calling thread's last error: returns its code (JITBRIDGE_OK if none yet), *message (may be NULL) the text,
   * valid until this thread's next call that fails; *cuda_result (may be NULL) the CUresult for LAUNCH/DRIVER. */
  int (*last_error)(const char** message, int* cuda_result);

  /* Compiles `source` (through jitbridge's cache: a hit in memory or on disk compiles nothing) and returns its
   * kernel `name` (as the Python RawKernel takes it: extern "C" name, name expression or lowered name) in *out,
   * owned by the caller (kernel_release). Needs no GPU. Errors: COMPILE, NOT_FOUND (the message lists the kernels),
   * VALUE (bad arch), VERSION (a struct_size smaller than version 1.0's). */
  int (*kernel_from_source)(const jitbridge_source* source, const char* name, jitbridge_kernel** out);
  /* The kernel of a jitbridge.RawKernel (`py_kernel` is its PyObject*), sharing its program and modules; *out owned
   * by the caller. Needs the GIL (the only such call). Errors: TYPE when it is no RawKernel; UNSUPPORTED in a table
   * not made by jitbridge._core. */
  int (*kernel_from_python)(void* py_kernel, jitbridge_kernel** out);
  void (*kernel_retain)(jitbridge_kernel* kernel);
  void (*kernel_release)(jitbridge_kernel* kernel); /* NULL is ignored; the last release frees the kernel */

  /* The kernel's name (borrowed) and its parameter count; *count is -1 for kernels without a signature. */
  int (*kernel_info)(const jitbridge_kernel* kernel, const char** name, int64_t* count);
  /* Parameter `index` into *out (out->struct_size set by the caller). Errors: VALUE (index out of range). */
  int (*kernel_param)(const jitbridge_kernel* kernel, size_t index, jitbridge_param* out);

  /* The kernel on device `device` (an ordinal): loads its module there on first use (compiling for the device's
   * architecture when the program's target was left to the default), so call it before capturing a graph. *out is
   * borrowed from the kernel. Cheap after the first call per device. Errors: NO_DRIVER, DRIVER, VALUE (no such
   * device; an explicit arch that cannot run there), COMPILE. */
  int (*kernel_resolve)(jitbridge_kernel* kernel, int device, jitbridge_function** out);

  /* Checks `args` against the signature exactly as the Python API does (unless JITBRIDGE_LAUNCH_NO_ARG_CHECKS), the
   * configuration against the device and the kernel, then queues the kernel on config->stream, in the device's
   * primary context (the thread's current context is unchanged afterwards). Never synchronizes. Every array must be
   * on the function's device. Errors: TYPE, OVERFLOW, VALUE (naming the argument: "k: argument 1 (float const*):
   * ..."), LAUNCH_CONFIG, LAUNCH, NO_DRIVER. */
  int (*launch)(const jitbridge_function* function, const jitbridge_launch_config* config, const jitbridge_arg* args,
                size_t n_args, uint32_t flags);

  /* `bytes` of device memory on `device`, in stream order on `stream` (cuMemAllocAsync from the device's current
   * pool): usable by work queued on `stream` from now on. *out is owned by the caller (mem_free). bytes == 0 gives 0
   * and calls no driver function. Errors: NO_DRIVER, DRIVER (cuda_result 2: out of memory), VALUE (no such device). */
  int (*mem_alloc)(int device, size_t bytes, struct CUstream_st* stream, uint64_t* out);
  /* Frees `ptr` (from mem_alloc) in stream order on `stream`: work queued there before still sees valid memory.
   * ptr == 0 does nothing. */
  int (*mem_free)(int device, uint64_t ptr, struct CUstream_st* stream);

  /* ---- 1.1 ---- */
  /* `bytes` of device memory on `device` from the allocator jitbridge's own Tensors use (the process-wide one:
   * jitbridge.set_allocator, e.g. an RMM, CuPy or torch adapter; none set: jitbridge's pool, as mem_alloc), in
   * stream order on `stream`. Callable without the GIL: a Python allocator is called with the GIL, which this takes
   * (PyGILState_Ensure), so a thread the GIL holder waits for must not call it while a Python allocator is set
   * (mem_alloc never takes the GIL). *out is owned by the caller (free_async; not mem_free). bytes == 0 gives 0 and
   * calls nothing. Errors: NO_DRIVER, DRIVER, VALUE (no such device; what the allocator returned), TYPE, INTERNAL (the
   * allocator raised, or the interpreter is shutting down; the message says). */
  int (*alloc_async)(int device, size_t bytes, struct CUstream_st* stream, uint64_t* out);
  /* Gives `ptr` (from alloc_async on `device`) back in stream order: its allocator is told to free it after the work
   * queued on `stream` so far (when `stream` is not the allocation stream, the allocation stream first waits for it:
   * an event, no host sync). A Python allocator's deallocate runs with the GIL: at once if this thread holds it,
   * else queued for the main thread (this never waits for the GIL). ptr == 0 does nothing. Errors: VALUE (ptr not
   * from alloc_async on that device, or freed already), DRIVER. */
  int (*free_async)(int device, uint64_t ptr, struct CUstream_st* stream);
} JitbridgeCApi;

/* The bytes a table of this major must have to hold every member of version (major, minor): each later minor adds
 * a case here (the offset past its last member). */
static inline size_t jitbridge_c_api_size(uint32_t minor) {
  if (minor == 0) return offsetof(JitbridgeCApi, mem_free) + sizeof(((JitbridgeCApi*)0)->mem_free); /* 1.0 */
  return sizeof(JitbridgeCApi);                                                                      /* 1.1 */
}

/* Whether `api` serves a consumer built against (major, minor): same major, minor at least `minor`, and a table at
 * least as large as that minor's. Returns 1, or 0 with the reason in `why` (why_size bytes, NUL-terminated; may be
 * NULL). */
static inline int jitbridge_c_api_check(const JitbridgeCApi* api, uint32_t major, uint32_t minor, char* why,
                                        size_t why_size) {
  /* 0: fits; 1: no table; 2: another major; 3: an older minor; 4: a table smaller than its minor promises */
  int problem = 0;
  if (!api)
    problem = 1;
  else if (api->major != major)
    problem = 2;
  else if (api->minor < minor)
    problem = 3;
  else if (api->struct_size < jitbridge_c_api_size(minor))
    problem = 4;
  if (problem == 0) return 1;
  if (why && why_size) {
    if (problem == 1)
      snprintf(why, why_size, "jitbridge C API: no table to check");
    else if (problem == 2)
      snprintf(why, why_size,
               "jitbridge C API: this consumer was built against version %u.%u but jitbridge %s provides %u.%u (a "
               "different major version); rebuild it against this jitbridge",
               (unsigned)major, (unsigned)minor, api->jitbridge_version, (unsigned)api->major, (unsigned)api->minor);
    else if (problem == 3)
      snprintf(why, why_size,
               "jitbridge C API: this consumer needs version %u.%u but jitbridge %s provides only %u.%u; upgrade "
               "jitbridge or rebuild the consumer against it",
               (unsigned)major, (unsigned)minor, api->jitbridge_version, (unsigned)api->major, (unsigned)api->minor);
    else
      snprintf(why, why_size, "jitbridge C API: the %u.%u table of jitbridge %s has %u bytes, fewer than the %u "
               "version %u.%u needs", (unsigned)api->major, (unsigned)api->minor, api->jitbridge_version,
               (unsigned)api->struct_size, (unsigned)jitbridge_c_api_size(minor), (unsigned)major, (unsigned)minor);
  }
  return 0;
}

/* The table of the jitbridge library this code is linked with (C++ programs linking jitbridge::jitbridge; Python
 * extensions take _core's capsule instead: a second static copy would have its own caches), checked as
 * jitbridge_c_api_check does: NULL with the reason in `why` when it cannot serve (major, minor). kernel_from_python
 * is UNSUPPORTED in this table. */
const JitbridgeCApi* jitbridge_c_api_get(uint32_t major, uint32_t minor, char* why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif /* JITBRIDGE_C_API_H */
