/* libringkv_plugin_bad_version.so: a plugin built against an ABI major that
   does not exist (99). ringkv must refuse it with a message naming both
   versions, before calling anything in its table. */
#include <string.h>

#include "ringkv/engine_abi.h"

static ringkv_status bad_caps(ringkv_capabilities* caps) {
  (void)caps;
  return RINGKV_ERR_VERSION;
}

RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_abi_major) {
  static ringkv_engine_api api;
  (void)host_abi_major;
  memset(&api, 0, sizeof api);
  api.struct_size = (uint32_t)sizeof api;
  api.abi_version = RINGKV_ABI_MAKE_VERSION(99, 0);
  api.get_capabilities = bad_caps;
  return &api;
}
