// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): a process per rank, a
// thread per stream, a complete event ("X") per span with its op name, micro-batch and
// category; counter tracks for each rank's memory and the busiest links' utilisation over
// time when the trace has them (else each busy link's mean utilisation over the step).
// Written as text directly (no document tree): a 1,024-GPU step's trace in about the time
// and memory of its spans. A receive is drawn from its send's start to its arrival (the
// transfer), not from its posting. A folded trace names, per process, the ranks it stands
// for. Link utilisation is the mean per window of counter_window() picoseconds (1/2000 of
// the step, at least a microsecond), emitted when it changes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "program/program.hpp"
#include "report/trace.hpp"
#include "topology/cluster.hpp"

namespace parasim::report {

std::string chrome_trace_json(const Trace& trace, const program::Program& program, const topology::Cluster& cluster);
std::int64_t counter_window(const Trace& trace);
// A link's utilisation (a step function of (picoseconds, fraction) samples) as its mean over
// each window of `window` picoseconds up to `end`, emitted where it changes (to 1e-4), and
// back to 0 at `end`: flows switch links on and off thousands of times a step.
std::vector<std::pair<std::int64_t, double>> windowed_utilisation(const std::vector<std::pair<std::int64_t, double>>& samples,
                                                                  std::int64_t end, std::int64_t window);
// A process's name: "rank 3", or in a folded trace "rank 3 (for ranks 3, 67, 131 and 13
// more: 16 data-parallel replicas)".
std::string process_name(const Trace& trace, int r);
// Where each span is drawn from: its start, or for a receive its send's start (within the
// receive's span): the transfer, not the posting. The dashboard's timeline draws the same.
std::vector<std::int64_t> drawn_starts(const Trace& trace, const program::Program& program);
// The trace as the bytes of a file named `path`: Perfetto's protobuf format when the name
// ends in ".pftrace" or ".perfetto-trace" (report/perfetto_trace.hpp), Chrome JSON
// otherwise; gzip-compressed when it ends in ".gz" (Perfetto opens .json.gz as it is; a
// JSON trace shrinks about tenfold).
std::string chrome_trace_file(const Trace& trace, const program::Program& program, const topology::Cluster& cluster,
                              std::string_view path);

// The Chrome trace written while the simulation runs (sim::SimOptions::spans hands each
// block of spans to add() as they end): one worker thread formats them, and gzip-compresses
// them when asked, beside the simulation; finish() adds the counters and the closing. The
// text is chrome_trace_json's (tested), for a trace whose sends end before their receives,
// as a simulated one's do. The Program is the one of the first add(), read until the add()
// of the last block returns.
class ChromeTraceStream {
 public:
  explicit ChromeTraceStream(bool gzip = false);
  ~ChromeTraceStream();
  ChromeTraceStream(const ChromeTraceStream&) = delete;
  ChromeTraceStream& operator=(const ChromeTraceStream&) = delete;

  void add(const program::Program& program, std::span<const Span> spans, bool last);
  // The file's bytes; `trace` is the one whose spans were added.
  std::string finish(const Trace& trace, const topology::Cluster& cluster);

 private:
  struct State;
  std::unique_ptr<State> state_;
};
// Whether a trace file named `path` can be written by ChromeTraceStream (Chrome JSON, .gz
// or not); Perfetto's format is written whole.
bool chrome_trace_streamed(std::string_view path);

}  // namespace parasim::report
