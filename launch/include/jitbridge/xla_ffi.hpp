// jitbridge/xla_ffi.hpp — the generic XLA FFI handler (launch/src/xla_ffi.cpp): jitbridge kernels as XLA custom calls.
#pragma once

#include <stddef.h>

// The XLA FFI C API's types (third_party/xla_ffi/include/xla/ffi/api/c_api.h), declared so this header needs no XLA.
struct XLA_FFI_Error;
struct XLA_FFI_CallFrame;

extern "C" {

// The one handler of every jitbridge custom call (registered by jitbridge.jax with
// jax.ffi.register_ffi_target(..., platform="CUDA", api_version=1) for the "initialize" and "execute" stages).
// The call's string attribute "jitbridge" is a JSON payload (version 1) naming each launch by its compile request
// (source, options, name expressions, headers, arch) and kernel name, never by a pointer, so a program from JAX's
// persistent cache works in a new process (the kernel comes from jitbridge's cache). Per launch: grid, block,
// shared memory, whether arguments are checked, and one entry per kernel parameter: ["in", i] (the call's operand i,
// read-only), ["out", i] (its result i), or a constant ["int"|"uint"|"float"|"bool", v] / ["null"].
// A payload is parsed and its kernels made once per process (a table keyed by its hash, entries kept for the
// process's life); later calls are a lookup. A call may also carry the string attribute "jitbridge_key", a short
// digest of the payload (jitbridge.jax writes a BLAKE2b-128 hex digest): calls are then looked up by the key alone,
// so an execution hashes the key's bytes, not the payload's; the caller guarantees that a key stands for one payload. Initialize stage: the kernels are loaded on the call's device (before
// any command-buffer capture). Execute stage: each launch is checked against its kernel's signature and queued on
// XLA's stream (c_api.h's launch), in order. Answers XLA's metadata query (API version, command-buffer compatible).
// Never throws; a failure returns an XLA_FFI_Error (INVALID_ARGUMENT for bad payloads, arguments and compile errors,
// INTERNAL for driver and launch failures) whose message names the kernel and argument. Thread-safe.
XLA_FFI_Error* jitbridge_xla_ffi_handler(XLA_FFI_CallFrame* call_frame);

// What the initialize stage does, called by jitbridge.jax when it traces a call (so modules are loaded before XLA
// runs or records anything, whichever stages XLA calls): parses `payload` (`size` bytes) into the table, compiles
// its kernels and loads them on `device`. Returns 0, or 1 with the reason in `why` (why_size bytes, NUL-terminated;
// may be NULL). Never throws; thread-safe; no GIL needed.
int jitbridge_xla_ffi_prepare(const char* payload, size_t size, int device, char* why, size_t why_size);

}  // extern "C"
