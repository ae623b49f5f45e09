// The Perfetto protobuf writer, read back with a wire-format decoder of its own: every span
// is one slice with its name, drawn start and end (in ns), slices nest on every track, and
// the tracks are the ranks' streams and counters. protoc checks the same files against
// Perfetto's field numbers in tests/cli/cli_test.sh.
#include "report/perfetto_trace.hpp"

#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "report/chrome_trace.hpp"
#include "sim/simulate.hpp"
#include "tests/report/pipeline_scenario.hpp"

using namespace parasim;

namespace {

// A message's fields: number -> the varints, fixed64s or byte strings it holds, in order.
struct Message {
  std::multimap<std::uint32_t, std::uint64_t> ints;
  std::multimap<std::uint32_t, std::string> bytes;
  std::uint64_t get(std::uint32_t f) const { return ints.count(f) ? ints.find(f)->second : 0; }
  std::string text(std::uint32_t f) const { return bytes.count(f) ? bytes.find(f)->second : std::string(); }
};

Message decode(std::string_view in) {
  Message m;
  std::size_t at = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      REQUIRE(at < in.size());
      const auto byte = static_cast<unsigned char>(in[at++]);
      v |= std::uint64_t{byte & 0x7FU} << shift;
      if ((byte & 0x80U) == 0) return v;
    }
  };
  while (at < in.size()) {
    const std::uint64_t key = varint();
    const auto field = static_cast<std::uint32_t>(key >> 3);
    switch (key & 7) {
      case 0: m.ints.emplace(field, varint()); break;
      case 1: {
        std::uint64_t v = 0;
        std::memcpy(&v, in.data() + at, 8);
        at += 8;
        m.ints.emplace(field, v);
        break;
      }
      case 2: {
        const std::uint64_t n = varint();
        REQUIRE(at + n <= in.size());
        m.bytes.emplace(field, std::string(in.substr(at, n)));
        at += n;
        break;
      }
      default: FAIL("wire type " << (key & 7));
    }
  }
  return m;
}

}  // namespace

TEST_CASE("a Perfetto trace holds every span as a nested slice, by rank and stream", "[report][trace]") {
  const scenario::Scenario s = test::pipeline_scenario();
  const program::Program prog = program::compile(s);
  const report::Trace trace = sim::simulate(s, prog);
  const topology::Cluster cluster(s.cluster);
  const Message file = decode(report::perfetto_trace(trace, prog, cluster));
  std::map<std::uint64_t, std::string> names;      // interned
  std::map<std::uint64_t, std::string> thread_of;  // thread track -> "pid/stream name"
  std::set<std::uint64_t> counters;
  std::map<std::uint64_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> open;  // track -> (ts, name)
  std::multiset<std::tuple<std::string, std::uint64_t, std::uint64_t>> slices;         // (name, begin, end)
  std::uint64_t last_ts = 0;
  bool first = true;
  for (const auto& [field, bytes] : file.bytes) {
    REQUIRE(field == 1);  // Trace.packet
    const Message p = decode(bytes);
    CHECK(p.get(10) == 1);                  // one sequence
    CHECK(p.get(13) == (first ? 1U : 2U));  // its incremental state cleared once, then needed
    first = false;
    if (p.bytes.count(60)) {  // a track descriptor
      const Message d = decode(p.text(60));
      if (d.bytes.count(4)) {
        const Message t = decode(d.text(4));
        thread_of[d.get(1)] = std::to_string(t.get(1)) + "/" + t.text(5);
      }
      if (d.bytes.count(8)) counters.insert(d.get(1));
      continue;
    }
    if (p.bytes.count(12)) {
      const Message names_in = decode(decode(p.text(12)).text(2));
      names[names_in.get(1)] = names_in.text(2);
    }
    const Message e = decode(p.text(11));
    const std::uint64_t ts = p.get(8);
    CHECK(ts >= last_ts);  // in time order
    last_ts = ts;
    const std::uint64_t track = e.get(11);
    switch (e.get(9)) {
      case 1:  // begin
        REQUIRE(thread_of.count(track));
        REQUIRE(names.count(e.get(10)));
        open[track].emplace_back(ts, e.get(10));
        break;
      case 2:  // end: the innermost open slice of its track
        REQUIRE_FALSE(open[track].empty());
        slices.emplace(names[open[track].back().second], open[track].back().first, ts);
        open[track].pop_back();
        break;
      case 4: CHECK(counters.count(track) == 1); break;
      default: FAIL("event type " << e.get(9));
    }
  }
  for (const auto& [track, stack] : open) CHECK(stack.empty());
  // Every span, with its drawn start (a receive from its send's start), in nanoseconds.
  const std::vector<std::int64_t> starts = report::drawn_starts(trace, prog);
  std::multiset<std::tuple<std::string, std::uint64_t, std::uint64_t>> expected;
  auto ns = [](std::int64_t ps) { return static_cast<std::uint64_t>((ps + 500) / 1000); };
  for (std::size_t i = 0; i < trace.spans.size(); ++i) {
    expected.emplace(program::op_name(prog, trace.spans[i].op), ns(starts[i]), ns(trace.spans[i].end));
  }
  CHECK(slices == expected);
  // 8 ranks, each with its compute stream and its communication streams' tracks.
  std::set<std::string> ranks;
  for (const auto& [uuid, name] : thread_of) ranks.insert(name.substr(0, name.find('/')));
  CHECK(ranks.size() == 8);
  CHECK(std::count_if(thread_of.begin(), thread_of.end(),
                      [](const auto& t) { return t.second.ends_with("/compute"); }) == 8);
}

TEST_CASE("a trace file's name chooses Perfetto's format", "[report][trace]") {
  CHECK(report::perfetto_name("step.pftrace"));
  CHECK(report::perfetto_name("step.perfetto-trace"));
  CHECK(report::perfetto_name("step.pftrace.gz"));
  CHECK_FALSE(report::perfetto_name("step.json"));
  CHECK_FALSE(report::perfetto_name("step.json.gz"));
}
