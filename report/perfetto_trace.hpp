// The step as a Perfetto trace in its native protobuf format (what the Perfetto UI and
// trace processor load fastest, and a little over half the JSON's size): the same content
// as the Chrome trace (report/chrome_trace.hpp), as TracePackets of TrackEvents.
//
//   * a process track per rank (named as in the JSON, folded ranks included) with a thread
//     track per stream; a stream's spans that do not nest (a receive drawn from its send's
//     start over a span already running) go to a further track of the stream, "comm (2)";
//   * each span a slice (SLICE_BEGIN and SLICE_END), its name interned, its category, and
//     its micro-batch, FLOPs and bytes as debug annotations;
//   * counter tracks: each rank's memory (GiB) and the busiest links' utilisation (the mean
//     per window, report::windowed_utilisation), or each busy link's mean over the step.
//
// Timestamps are in nanoseconds (the format's unit), rounded from the trace's picoseconds.
// The field numbers are perfetto/protos/perfetto/trace's: Trace.packet 1; TracePacket
// timestamp 8, track_event 11, track_descriptor 60, trusted_packet_sequence_id 10,
// interned_data 12, sequence_flags 13; TrackEvent type 9, track_uuid 11, name_iid 10,
// categories 22, double_counter_value 44, debug_annotations 4; TrackDescriptor uuid 1,
// name 2, process 3, thread 4, parent_uuid 5, counter 8; ProcessDescriptor pid 1,
// process_name 6; ThreadDescriptor pid 1, tid 2, thread_name 5; InternedData event_names 2
// (EventName iid 1, name 2); DebugAnnotation name 10, int_value 4, double_value 5.
#pragma once

#include <string>
#include <string_view>

#include "program/program.hpp"
#include "report/trace.hpp"
#include "topology/cluster.hpp"

namespace parasim::report {

std::string perfetto_trace(const Trace& trace, const program::Program& program, const topology::Cluster& cluster);

// Whether a trace file's name asks for this format: it ends in ".pftrace" or
// ".perfetto-trace", before a ".gz" (else it is Chrome JSON, report/chrome_trace.hpp).
bool perfetto_name(std::string_view path);

}  // namespace parasim::report
