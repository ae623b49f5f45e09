#include "report/perfetto_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "report/chrome_trace.hpp"

namespace parasim::report {
namespace {

// The protobuf wire format, written by hand: varints, length-delimited fields, doubles.
enum Wire : std::uint32_t { varint_wire = 0, fixed64_wire = 1, bytes_wire = 2 };

void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void key(std::string& out, std::uint32_t field, Wire wire) {
  varint(out, (std::uint64_t{field} << 3) | wire);
}
void field_varint(std::string& out, std::uint32_t field, std::uint64_t v) {
  key(out, field, varint_wire);
  varint(out, v);
}
void field_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  key(out, field, bytes_wire);
  varint(out, bytes.size());
  out += bytes;
}
void field_double(std::string& out, std::uint32_t field, double v) {
  key(out, field, fixed64_wire);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

// Field numbers (perfetto_trace.hpp lists their messages).
namespace f {
constexpr std::uint32_t trace_packet = 1;
constexpr std::uint32_t timestamp = 8, track_event = 11, track_descriptor = 60, sequence_id = 10, interned_data = 12,
                        sequence_flags = 13;
constexpr std::uint32_t event_type = 9, event_track = 11, event_name_iid = 10, event_categories = 22,
                        event_double_counter = 44, event_annotations = 4;
constexpr std::uint32_t track_uuid = 1, track_name = 2, track_process = 3, track_thread = 4, track_parent = 5,
                        track_counter = 8;
constexpr std::uint32_t process_pid = 1, process_name = 6;
constexpr std::uint32_t thread_pid = 1, thread_tid = 2, thread_name = 5;
constexpr std::uint32_t interned_event_names = 2, name_iid = 1, name_text = 2;
constexpr std::uint32_t annotation_name = 10, annotation_int = 4, annotation_double = 5;
}  // namespace f

enum EventType : std::uint64_t { slice_begin = 1, slice_end = 2, counter = 4 };
constexpr std::uint64_t incremental_state_cleared = 1, needs_incremental_state = 2;

class Writer {
 public:
  explicit Writer(std::size_t reserve) { out_.reserve(reserve); }

  // A packet: its body, stamped with the one sequence this trace is written on.
  void packet(std::string& body) {
    field_varint(body, f::sequence_id, 1);
    field_varint(body, f::sequence_flags, first_ ? incremental_state_cleared : needs_incremental_state);
    first_ = false;
    field_bytes(out_, f::trace_packet, body);
    body.clear();
  }
  std::string& text() { return out_; }

 private:
  std::string out_;
  bool first_ = true;
};

std::int64_t nanos(std::int64_t ps) {
  return (ps + (ps >= 0 ? 500 : -500)) / 1000;
}

struct Event {
  std::int64_t ns = 0;
  std::uint64_t track = 0;
  std::uint32_t what = 0;  // a span's index, or a counter value's
  EventType type = slice_begin;
};

}  // namespace

bool perfetto_name(std::string_view path) {
  if (path.ends_with(".gz")) path.remove_suffix(3);
  return path.ends_with(".pftrace") || path.ends_with(".perfetto-trace");
}

std::string perfetto_trace(const Trace& trace, const program::Program& program, const topology::Cluster& cluster) {
  Writer w(trace.spans.size() * 70 + 4096);
  std::string body, inner, deeper;
  std::uint64_t next_uuid = 1;
  std::int64_t next_tid = trace.world + 2;  // pids are 1 .. world + 1; tids unique over the trace
  // A track: its uuid and its process or thread descriptor (in `deeper`).
  auto described_track = [&](std::uint32_t kind) {
    const std::uint64_t uuid = next_uuid++;
    field_varint(inner, f::track_uuid, uuid);
    field_bytes(inner, kind, deeper);
    deeper.clear();
    field_bytes(body, f::track_descriptor, inner);
    inner.clear();
    w.packet(body);
    return uuid;
  };
  auto process_track = [&](int pid, const std::string& name) {
    field_varint(deeper, f::process_pid, static_cast<std::uint64_t>(pid));
    field_bytes(deeper, f::process_name, name);
    return described_track(f::track_process);
  };
  auto thread_track = [&](int pid, const std::string& name) {
    field_varint(deeper, f::thread_pid, static_cast<std::uint64_t>(pid));
    field_varint(deeper, f::thread_tid, static_cast<std::uint64_t>(next_tid++));
    field_bytes(deeper, f::thread_name, name);
    return described_track(f::track_thread);
  };
  auto counter_track = [&](std::uint64_t parent, const std::string& name) {
    const std::uint64_t uuid = next_uuid++;
    field_varint(inner, f::track_uuid, uuid);
    field_bytes(inner, f::track_name, name);
    field_varint(inner, f::track_parent, parent);
    field_bytes(inner, f::track_counter, "");
    field_bytes(body, f::track_descriptor, inner);
    inner.clear();
    w.packet(body);
    return uuid;
  };

  // Tracks: a process per rank simulated, and each stream's spans on as few nesting lanes as
  // they need (a slice must end before the one it starts inside).
  const std::vector<std::int64_t> starts = drawn_starts(trace, program);
  std::vector<std::uint64_t> process_uuid(static_cast<std::size_t>(trace.world), 0);
  std::vector<std::vector<std::uint32_t>> by_stream(static_cast<std::size_t>(trace.world) * program::stream_count);
  for (std::uint32_t i = 0; i < trace.spans.size(); ++i) {
    const Span& sp = trace.spans[i];
    by_stream[static_cast<std::size_t>(sp.rank) * program::stream_count + static_cast<std::size_t>(sp.stream)]
        .push_back(i);
  }
  std::vector<Event> events;
  events.reserve(trace.spans.size() * 2 + 1024);
  for (int r = 0; r < trace.world; ++r) {
    if (trace.mirror(r) != r) continue;
    process_uuid[static_cast<std::size_t>(r)] = process_track(r + 1, process_name(trace, r));
    for (int s = 0; s < program::stream_count; ++s) {
      std::vector<std::uint32_t>& spans =
          by_stream[static_cast<std::size_t>(r) * program::stream_count + static_cast<std::size_t>(s)];
      std::stable_sort(spans.begin(), spans.end(), [&](std::uint32_t a, std::uint32_t b) {
        return starts[a] != starts[b] ? starts[a] < starts[b] : trace.spans[a].end > trace.spans[b].end;
      });
      struct Lane {
        std::uint64_t uuid = 0;
        std::vector<std::int64_t> open;  // the ends of the slices still open, innermost last
      };
      std::vector<Lane> lanes;
      const std::string stream = std::string(to_string(static_cast<program::Stream>(s)));
      for (const std::uint32_t i : spans) {
        const std::int64_t start = starts[i], end = trace.spans[i].end;
        Lane* lane = nullptr;
        for (Lane& l : lanes) {
          while (!l.open.empty() && l.open.back() <= start) {
            events.push_back({nanos(l.open.back()), l.uuid, 0, slice_end});
            l.open.pop_back();
          }
          if (l.open.empty() || end <= l.open.back()) {
            lane = &l;
            break;
          }
        }
        if (lane == nullptr) {
          const std::string name = lanes.empty() ? stream : stream + " (" + std::to_string(lanes.size() + 1) + ")";
          lanes.push_back({thread_track(r + 1, name), {}});
          lane = &lanes.back();
        }
        events.push_back({nanos(start), lane->uuid, i, slice_begin});
        lane->open.push_back(end);
      }
      for (Lane& l : lanes) {
        while (!l.open.empty()) {
          events.push_back({nanos(l.open.back()), l.uuid, 0, slice_end});
          l.open.pop_back();
        }
      }
    }
  }
  // Counters: memory per rank, link utilisation on a "links" process.
  std::vector<double> values;
  auto sample = [&](std::uint64_t track, std::int64_t ps, double v) {
    events.push_back({nanos(ps), track, static_cast<std::uint32_t>(values.size()), counter});
    values.push_back(v);
  };
  const std::uint64_t links = process_track(trace.world + 1, "links");
  bool link_counters = false;
  const std::int64_t window = counter_window(trace);
  for (const Counter& c : trace.counters) {
    if (c.rank >= 0) {
      const std::uint64_t parent = process_uuid[static_cast<std::size_t>(trace.mirror(c.rank))];
      if (parent == 0) continue;
      const std::uint64_t track = counter_track(parent, c.name + " (GiB)");
      for (const auto& [t, v] : c.samples) sample(track, t, v / (1024.0 * 1024 * 1024));
      continue;
    }
    link_counters = true;
    const std::uint64_t track = counter_track(links, c.name + " (utilisation)");
    for (const auto& [t, v] : windowed_utilisation(c.samples, trace.step_end, window)) sample(track, t, v);
  }
  if (!link_counters) {
    const double step = trace.step_seconds();
    for (const LinkUse& l : trace.links) {
      const std::uint64_t track = counter_track(links, cluster.link_name(l.link) + " (utilisation)");
      sample(track, 0, step > 0 ? l.bytes / (cluster.link(l.link).bandwidth * step) : 0.0);
      sample(track, trace.step_end, 0.0);
    }
  }
  // In time order; at one instant each lane's ends before its begins, as generated.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ns < b.ns; });

  std::unordered_map<std::string, std::uint64_t> iids;  // interned event names
  std::unordered_map<std::int64_t, std::uint64_t> op_iid;
  for (const Event& e : events) {
    field_varint(body, f::timestamp, static_cast<std::uint64_t>(std::max<std::int64_t>(0, e.ns)));
    field_varint(inner, f::event_type, e.type);
    field_varint(inner, f::event_track, e.track);
    if (e.type == counter) {
      field_double(inner, f::event_double_counter, values[e.what]);
    } else if (e.type == slice_begin) {
      const Span& sp = trace.spans[e.what];
      const program::Op& op = program.ops[static_cast<std::size_t>(sp.op)];
      auto [at, fresh] = op_iid.try_emplace(sp.op, 0);
      if (fresh) {
        const std::string name = program::op_name(program, sp.op);
        auto [named, new_name] = iids.try_emplace(name, iids.size() + 1);
        at->second = named->second;
        if (new_name) {
          field_varint(deeper, f::name_iid, named->second);
          field_bytes(deeper, f::name_text, name);
          std::string names;
          field_bytes(names, f::interned_event_names, deeper);
          deeper.clear();
          field_bytes(body, f::interned_data, names);
        }
      }
      field_varint(inner, f::event_name_iid, at->second);
      field_bytes(inner, f::event_categories, to_string(sp.category));
      auto annotate = [&](const char* name, auto value) {
        field_bytes(deeper, f::annotation_name, name);
        if constexpr (std::is_floating_point_v<decltype(value)>) {
          field_double(deeper, f::annotation_double, value);
        } else {
          field_varint(deeper, f::annotation_int, static_cast<std::uint64_t>(value));
        }
        field_bytes(inner, f::event_annotations, deeper);
        deeper.clear();
      };
      if (sp.micro_batch >= 0) annotate("micro_batch", static_cast<std::int64_t>(sp.micro_batch));
      if (op.flops > 0) annotate("flops", op.flops);
      if (op.bytes > 0) annotate("bytes", op.bytes);
    }
    field_bytes(body, f::track_event, inner);
    inner.clear();
    w.packet(body);
  }
  return std::move(w.text());
}

}  // namespace parasim::report
