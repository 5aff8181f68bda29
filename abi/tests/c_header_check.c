/* Compiles engine_abi.h as C99 (with -Wall -Wextra -Wpedantic -Wconversion) and pins the layout
   of every struct on LP64 Linux, so that a change that moves a field breaks the build instead of
   every plugin already compiled. */
#include <stddef.h>

#include "ringkv/engine_abi.h"

#define RINGKV_CHECK(name, cond) typedef char ringkv_check_##name[(cond) ? 1 : -1]

RINGKV_CHECK(version, RINGKV_ABI_VERSION == 0x10003u);
RINGKV_CHECK(profile_size, sizeof(ringkv_precision_profile) == 32);
RINGKV_CHECK(caps_head_dims, offsetof(ringkv_capabilities, head_dims) == 72);
RINGKV_CHECK(caps_max_window, offsetof(ringkv_capabilities, max_window) == 200);
RINGKV_CHECK(caps_precision, offsetof(ringkv_capabilities, precision) == 216);
RINGKV_CHECK(profile2_size, sizeof(ringkv_precision_profile2) == 20);
RINGKV_CHECK(caps_precision2, offsetof(ringkv_capabilities, precision2) == 312); /* ABI 1.1: after the 1.0 fields */
RINGKV_CHECK(caps_max_sliding_windows, offsetof(ringkv_capabilities, max_sliding_windows) == 332); /* ABI 1.2 */
RINGKV_CHECK(caps_min_window, offsetof(ringkv_capabilities, min_window) == 352);
RINGKV_CHECK(caps_max_position, offsetof(ringkv_capabilities, max_position) == 360);
RINGKV_CHECK(caps_kv_formats_differ, offsetof(ringkv_capabilities, kv_formats_differ) == 368);
RINGKV_CHECK(caps_reserved_1_3, offsetof(ringkv_capabilities, reserved_1_3) == 372); /* ABI 1.3: the 1.2 tail padding */
RINGKV_CHECK(caps_max_rollback_reserve, offsetof(ringkv_capabilities, max_rollback_reserve) == 376);
RINGKV_CHECK(caps_rollback, offsetof(ringkv_capabilities, rollback) == 384);
RINGKV_CHECK(caps_size, sizeof(ringkv_capabilities) == 392);
RINGKV_CHECK(info_precision2, offsetof(ringkv_engine_info, precision2) == 104);
RINGKV_CHECK(info_size, sizeof(ringkv_engine_info) == 124);
RINGKV_CHECK(tensor_shape, offsetof(ringkv_tensor, shape) == 24);
RINGKV_CHECK(tensor_data, offsetof(ringkv_tensor, data) == 88);
RINGKV_CHECK(tensor_size, sizeof(ringkv_tensor) == 96);
RINGKV_CHECK(reset_size, sizeof(ringkv_reset) == 16);
RINGKV_CHECK(append_q, offsetof(ringkv_append, q) == 16);
RINGKV_CHECK(append_size, sizeof(ringkv_append) == 400);
RINGKV_CHECK(batch_appends, offsetof(ringkv_batch, appends) == 24);
RINGKV_CHECK(batch_num_rollbacks, offsetof(ringkv_batch, num_rollbacks) == 32); /* ABI 1.3: after the 1.2 struct */
RINGKV_CHECK(batch_rollbacks, offsetof(ringkv_batch, rollbacks) == 40);
RINGKV_CHECK(batch_size, sizeof(ringkv_batch) == 48);
RINGKV_CHECK(rollback_n_tokens, offsetof(ringkv_rollback, n_tokens) == 8);
RINGKV_CHECK(rollback_size, sizeof(ringkv_rollback) == 16);
RINGKV_CHECK(request_size, sizeof(ringkv_snapshot_request) == 24);
RINGKV_CHECK(result_capacity, offsetof(ringkv_snapshot_result, capacity_rows) == 72);
RINGKV_CHECK(result_size, sizeof(ringkv_snapshot_result) == 80);
RINGKV_CHECK(api_first_fn, offsetof(ringkv_engine_api, get_capabilities) == 8);
RINGKV_CHECK(api_size, sizeof(ringkv_engine_api) == 8 + 10 * sizeof(void*));

/* Uses the inline helpers and the field macro, so that they are compiled too. */
int ringkv_abi_c_header_check(const ringkv_batch* batch, const ringkv_capabilities* caps);
int ringkv_abi_c_header_check(const ringkv_batch* batch, const ringkv_capabilities* caps) {
  int n = 0;
  uint32_t i;
  for (i = 0; i < batch->num_resets; ++i) n += ringkv_batch_reset(batch, i)->sequence;
  for (i = 0; i < batch->num_appends; ++i) n += (int)ringkv_batch_append(batch, i)->n_tokens;
  for (i = 0; i < ringkv_batch_num_rollbacks(batch); ++i) n += (int)ringkv_batch_rollback(batch, i)->n_tokens;
  if (RINGKV_HAS_FIELD(caps, ringkv_capabilities, name)) n += caps->name[0];
  if (RINGKV_HAS_FIELD(caps, ringkv_capabilities, rollback)) n += caps->rollback;
  return n;
}
