/* c_header.c — jitbridge/c_api.h compiled as C99 with -Wpedantic: the interface is plain C. Gets the table the way a
 * C consumer would and launches one kernel through it (called by test_c_api.cpp). */
#include "jitbridge/c_api.h"

#include <string.h>

/* Launches `kernel`(x, n) on device 0 through the table, from C: JITBRIDGE_OK or the error code. */
int c_launch_one(jitbridge_kernel* kernel, void* x, int n) {
  char why[256];
  const JitbridgeCApi* api = jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, why, sizeof why);
  jitbridge_function* function = NULL;
  jitbridge_launch_config config;
  jitbridge_arg args[2];
  int64_t shape[1];
  int rc;
  if (!api) return JITBRIDGE_ERROR_VERSION;
  rc = api->kernel_resolve(kernel, 0, &function);
  if (rc != JITBRIDGE_OK) return rc;
  memset(&config, 0, sizeof config);
  config.struct_size = sizeof config;
  config.grid[0] = config.grid[1] = config.grid[2] = 1;
  config.block[0] = 128;
  config.block[1] = config.block[2] = 1;
  memset(args, 0, sizeof args);
  shape[0] = n;
  args[0].kind = JITBRIDGE_ARG_ARRAY;
  args[0].array.data = x;
  args[0].array.device_type = 2;
  args[0].array.device_id = 0;
  args[0].array.dtype_code = 2;
  args[0].array.dtype_bits = 32;
  args[0].array.dtype_lanes = 1;
  args[0].array.ndim = 1;
  args[0].array.shape = shape;
  args[1].kind = JITBRIDGE_ARG_INT;
  args[1].i = n;
  return api->launch(function, &config, args, 2, 0);
}

/* A table of another major, and one of an older minor: jitbridge_c_api_check's verdicts and reasons. */
int c_check_versions(char* why_major, char* why_minor, size_t size) {
  JitbridgeCApi other;
  const JitbridgeCApi* real = jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR, 0, NULL, 0);
  int accepted;
  if (!real) return -1;
  memcpy(&other, real, sizeof other);
  other.major = JITBRIDGE_C_API_MAJOR + 1;
  accepted = jitbridge_c_api_check(&other, JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, why_major, size);
  other.major = JITBRIDGE_C_API_MAJOR;
  accepted += jitbridge_c_api_check(real, JITBRIDGE_C_API_MAJOR, real->minor + 1, why_minor, size);
  accepted += jitbridge_c_api_check(real, JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, NULL, 0);
  return accepted; /* 1: only the matching table */
}

/* Version 1.1's check of older tables: a 1.0 table (its size ends at mem_free) serves a 1.0 consumer, not a 1.1 one;
 * a table that says 1.1 but is 1.0's size is refused with the reason in `why`. 1: all as expected. */
int c_check_minor_sizes(char* why, size_t size) {
  JitbridgeCApi older;
  const JitbridgeCApi* real = jitbridge_c_api_get(JITBRIDGE_C_API_MAJOR, 1, NULL, 0);
  int ok = 1;
  if (!real) return -1;
  memcpy(&older, real, sizeof older);
  older.minor = 0;
  older.struct_size = (uint32_t)jitbridge_c_api_size(0);
  ok &= jitbridge_c_api_size(0) < jitbridge_c_api_size(1);
  ok &= jitbridge_c_api_check(&older, JITBRIDGE_C_API_MAJOR, 0, NULL, 0) == 1;
  ok &= jitbridge_c_api_check(&older, JITBRIDGE_C_API_MAJOR, 1, NULL, 0) == 0;
  older.minor = 1;
  ok &= jitbridge_c_api_check(&older, JITBRIDGE_C_API_MAJOR, 1, why, size) == 0;
  return ok;
}
