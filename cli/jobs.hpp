// ringkv CLI: `ringkv check --jobs N`. A pool that runs numbered tasks on N workers (golden cases on
// threads), and property shards in processes of their own.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "check.hpp"
#include "property_runner.hpp"

namespace ringkv::cli {

/// Runs tasks 0 .. n-1 on `jobs` workers (the calling thread and jobs - 1 threads); run(task, worker)
/// gets the worker's index, 0 .. jobs - 1. One job: in order, on the calling thread, an exception
/// ending the run at once. Several: the first exception (by task) is rethrown after every worker
/// stopped; no task starts after one has thrown.
void run_jobs(size_t n, int jobs, const std::function<void(size_t task, int worker)>& run);

/// Runs one property on one engine in a process of its own (`ringkv check --engine E --property-shard
/// NAME`, with every option of `opt` that the run depends on) and returns its outcome. A child that
/// crashes is that property's failure; a child that exits 2 (unusable input) throws InputError.
std::vector<PropertyOutcome> run_property_process(const CheckOptions& opt, const std::string& engine, const std::string& property);

}  // namespace ringkv::cli
