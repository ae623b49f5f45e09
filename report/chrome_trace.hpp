// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): a process per rank, a
// thread per stream, a complete event ("X") per span with its op name, micro-batch and
// category, and a counter track per busy link with its utilisation over the step.
#pragma once

#include <string>

#include "plan/program.hpp"
#include "report/trace.hpp"
#include "topology/cluster.hpp"

namespace parasim::report {

std::string chrome_trace_json(const Trace& trace, const plan::Program& program, const topology::Cluster& cluster);

}  // namespace parasim::report
