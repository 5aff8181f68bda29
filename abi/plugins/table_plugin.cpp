// libringkv_plugin_<what>.so: the reference engine behind a table (ringkv_engine_api) that is
// broken, or newer than the host, at load time (abi/tests/plugin_test.cpp, "Faulty tables"; the
// gallery in docs/reliability.md). The variant is picked at compile time:
//  - hang_at_load:          ringkv_engine_api_get never returns
//  - hang_in_capabilities:  get_capabilities never returns
//  - null_table:            ringkv_engine_api_get returns NULL
//  - null_step:             the table's step (a required function) is NULL
//  - null_snapshot:         snapshot is NULL although the capabilities declare snapshot = 1
//  - abi_1_next:            an ABI 1.<host minor + 1> plugin: abi_version says so, and its table is
//                           larger (a function appended after poison_empty_slots); the host reads
//                           only what it knows and judges it like the reference
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "export_engine.hpp"
#include "ringkv/reference_engine.hpp"

namespace {

[[maybe_unused]] ringkv::abi::ExportSpec make_spec() {
  ringkv::abi::ExportSpec s;
  s.factory = ringkv::reference_engine_factory();
  s.factory.name = "table";
  return s;
}

[[noreturn, maybe_unused]] void hang() {
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// The table of a plugin one minor version ahead: ABI 1.x's table, then a function this host does not know.
struct NextTable {
  ringkv_engine_api api;
  ringkv_status (*appended_in_the_next_minor)(ringkv_engine*);
};

[[maybe_unused]] ringkv_status appended_function(ringkv_engine*) { return RINGKV_ERR_UNSUPPORTED; }

[[maybe_unused]] ringkv_status hanging_capabilities(ringkv_capabilities*) { hang(); }

}  // namespace

extern "C" RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_major) {
#if defined(RINGKV_TABLE_hang_at_load)
  (void)host_major;
  hang();
#elif defined(RINGKV_TABLE_null_table)
  (void)host_major;
  return nullptr;
#else
  static NextTable table;
  static const ringkv_engine_api* api = [host_major]() -> const ringkv_engine_api* {
    const ringkv_engine_api* inner = ringkv::abi::export_engine(make_spec, host_major);
    if (inner == nullptr) return nullptr;
    std::memset(&table, 0, sizeof table);
    table.api = *inner;
#if defined(RINGKV_TABLE_hang_in_capabilities)
    table.api.get_capabilities = hanging_capabilities;
#elif defined(RINGKV_TABLE_null_step)
    table.api.step = nullptr;
#elif defined(RINGKV_TABLE_null_snapshot)
    table.api.snapshot = nullptr;  // the export helper still declares snapshot = 1
#elif defined(RINGKV_TABLE_abi_1_next)
    table.api.struct_size = static_cast<uint32_t>(sizeof table);
    table.api.abi_version = RINGKV_ABI_MAKE_VERSION(RINGKV_ABI_VERSION_MAJOR, RINGKV_ABI_VERSION_MINOR + 1);
    table.appended_in_the_next_minor = appended_function;
#else
#error "define one RINGKV_TABLE_x"
#endif
    return &table.api;
  }();
  return api;
#endif
}
