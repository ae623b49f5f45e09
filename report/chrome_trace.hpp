// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): a process per rank, a
// thread per stream, a complete event ("X") per span with its op name, micro-batch and
// category; counter tracks for each rank's memory and the busiest links' utilisation over
// time when the trace has them (else each busy link's mean utilisation over the step).
#pragma once

#include <string>

#include "plan/program.hpp"
#include "report/trace.hpp"
#include "topology/cluster.hpp"

namespace parasim::report {

std::string chrome_trace_json(const Trace& trace, const plan::Program& program, const topology::Cluster& cluster);

}  // namespace parasim::report
