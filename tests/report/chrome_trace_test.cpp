// The Chrome trace writer: exact times, receives drawn from their sends, a folded trace's
// processes naming the ranks they stand for, link counters as means per window, gzip.
#include "report/chrome_trace.hpp"

#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "report/gzip.hpp"
#include "sim/simulate.hpp"
#include "tests/report/pipeline_scenario.hpp"

using namespace parasim;

TEST_CASE("trace times are the spans' picoseconds as exact microseconds", "[report][trace]") {
  const scenario::Scenario s = test::pipeline_scenario();
  const program::Program prog = program::compile(s);
  report::Trace t;
  t.kind = "predicted";
  t.world = 1;
  // Op 0 from 1,234,567 ps for 2,000,000 ps (2 us); op 1 at 5 us sharp for 0.5 ps... 1 ps.
  t.spans.push_back(
      {0, program::Stream::compute, program::Category::forward, program::OpKind::compute, 0, 0, 1234567, 3234567});
  t.spans.push_back(
      {0, program::Stream::compute, program::Category::forward, program::OpKind::compute, 0, 1, 5000000, 5000001});
  t.step_end = 5000001;
  const std::string text = report::chrome_trace_json(t, prog, topology::Cluster(s.cluster));
  CHECK(text.find(R"("ts":1.234567,"dur":2,)") != std::string::npos);
  CHECK(text.find(R"("ts":5,"dur":0.000001,)") != std::string::npos);
  const auto doc = nlohmann::json::parse(text);
  CHECK(doc["otherData"]["kind"] == "predicted");
  CHECK(doc["otherData"]["folded"] == false);
}

TEST_CASE("a receive is drawn from its send's start to its arrival", "[report][trace]") {
  const scenario::Scenario s = test::pipeline_scenario();
  const program::Program prog = program::compile(s);
  const report::Trace trace = sim::simulate(s, prog);
  const auto doc = nlohmann::json::parse(report::chrome_trace_json(trace, prog, topology::Cluster(s.cluster)));
  std::map<std::int64_t, std::int64_t> send_start;  // match -> picoseconds
  for (const report::Span& sp : trace.spans) {
    if (sp.kind == program::OpKind::send) send_start[prog.ops[static_cast<std::size_t>(sp.op)].match] = sp.start;
  }
  // The events in the spans' order: the k-th complete event is the k-th span.
  std::size_t k = 0;
  int recvs = 0, posted_early = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const report::Span& sp = trace.spans[k++];
    if (sp.kind != program::OpKind::recv) continue;
    ++recvs;
    const std::int64_t from = std::max(sp.start, send_start.at(prog.ops[static_cast<std::size_t>(sp.op)].match));
    posted_early += from > sp.start ? 1 : 0;
    CHECK(e["ts"].get<double>() == Approx(static_cast<double>(from) * 1e-6));
    CHECK(e["ts"].get<double>() + e["dur"].get<double>() == Approx(static_cast<double>(sp.end) * 1e-6));
  }
  CHECK(recvs > 0);
  CHECK(posted_early > 0);  // the pipeline's receives are posted before their sends start
}

TEST_CASE("a folded trace names the ranks each process stands for", "[report][trace]") {
  const scenario::Scenario s = scenario::load_text(R"(cluster: {preset: hgx-h100, nodes: 2}
model: {layers: 4, hidden: 512, heads: 8, vocab: 1000, seq_len: 256}
training: {global_batch: 16}
plan: {tp: 2, dp: 8}
)",
                                                   "t.yaml");
  const sim::Prediction p = sim::predict(s, {false, sim::FoldMode::always});
  REQUIRE(p.trace.folded());
  const auto doc = nlohmann::json::parse(report::chrome_trace_json(p.trace, p.program, topology::Cluster(s.cluster)));
  std::vector<std::string> names;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] != 16) names.push_back(e["args"]["name"]);
  }
  REQUIRE(names.size() == 2);  // replica 0's two tp ranks
  CHECK(names[0] == "rank 0 (for ranks 0, 2, 4 and 5 more: 8 data-parallel replicas)");
  CHECK(names[1] == "rank 1 (for ranks 1, 3, 5 and 5 more: 8 data-parallel replicas)");
  CHECK(doc["otherData"]["folded"] == true);
  CHECK(doc["otherData"]["ranks"] == 16);
}

TEST_CASE("link counters are the utilisation's mean per window, emitted on change", "[report][trace]") {
  const scenario::Scenario s = test::pipeline_scenario();
  const program::Program prog = program::compile(s);
  report::Trace t;
  t.kind = "predicted";
  t.world = 1;
  t.step_end = 4000 * 1000000LL;  // 4 ms: windows of 2 us
  REQUIRE(report::counter_window(t) == 2000000);
  // Busy (1) for 1 us of the first window, idle in the second, busy through the third and
  // fourth: means 0.5, 0, 1, then 1 (not repeated) ... and 0 after.
  t.counters.push_back({"l", -1, 0, {{0, 1.0}, {1000000, 0.0}, {4000000, 1.0}, {8000000, 0.0}}});
  const auto doc = nlohmann::json::parse(report::chrome_trace_json(t, prog, topology::Cluster(s.cluster)));
  std::vector<std::pair<double, double>> got;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "C") got.emplace_back(e["ts"].get<double>(), e["args"]["utilisation"].get<double>());
  }
  const std::vector<std::pair<double, double>> want{{0.0, 0.5}, {2.0, 0.0}, {4.0, 1.0}, {8.0, 0.0}};
  CHECK(got == want);
}

TEST_CASE("a trace named .gz is its text gzip-compressed, and reads back", "[report][trace]") {
  const scenario::Scenario s = test::pipeline_scenario();
  const program::Program prog = program::compile(s);
  const report::Trace trace = sim::simulate(s, prog);
  const topology::Cluster cluster(s.cluster);
  const std::string text = report::chrome_trace_json(trace, prog, cluster);
  const std::string gz = report::chrome_trace_file(trace, prog, cluster, "t.json.gz");
  CHECK(report::is_gzip(gz));
  CHECK_FALSE(report::is_gzip(text));
  CHECK(gz.size() * 5 < text.size());
  CHECK(report::gunzip(gz) == text);
  CHECK(report::chrome_trace_file(trace, prog, cluster, "t.json") == text);
  CHECK_THROWS_WITH(report::gunzip(gz.substr(0, gz.size() / 2)), Catch::Contains("truncated"));
  // The same trace twice gives the same text (the spans are formatted on several threads).
  CHECK(report::chrome_trace_json(trace, prog, cluster) == text);
}

namespace {

// The trace written beside the simulation (ChromeTraceStream fed by predict's span sink):
// its bytes, and how many blocks the sink handed over.
std::pair<std::string, int> streamed(const scenario::Scenario& s, const sim::PredictOptions& how, bool gz,
                                     sim::Prediction& p) {
  report::ChromeTraceStream stream(gz);
  int blocks = 0;
  sim::PredictOptions o = how;
  o.spans = [&](const program::Program& prog, std::span<const report::Span> spans, bool last) {
    ++blocks;
    stream.add(prog, spans, last);
  };
  p = sim::predict(s, o);
  return {stream.finish(p.trace, topology::Cluster(s.cluster)), blocks};
}

}  // namespace

TEST_CASE("a trace written beside the simulation is the one written after it", "[report][trace]") {
  // 8 x 8 GPUs, pp 4 with 64 micro-batches: 91,296 spans, two blocks of 32,768 and
  // the rest; every stream, receives posted early, memory and link counters.
  const scenario::Scenario s = scenario::load_text(R"(cluster: {preset: dgx-h100, nodes: 8}
model: {layers: 8, hidden: 512, heads: 8, vocab: 1000, seq_len: 256}
training: {global_batch: 512, micro_batch: 1}
plan: {tp: 2, pp: 4, dp: 8}
)",
                                                   "t.yaml");
  const topology::Cluster cluster(s.cluster);
  sim::Prediction p;
  const auto [text, blocks] = streamed(s, {true, sim::FoldMode::never}, false, p);
  INFO(p.trace.spans.size() << " spans");
  CHECK(blocks == static_cast<int>(p.trace.spans.size() / 32768) + 1);
  CHECK(blocks >= 3);
  CHECK(text == report::chrome_trace_json(p.trace, p.program, cluster));
  // Folded, and through gzip.
  sim::Prediction folded;
  const auto [gz, gz_blocks] = streamed(s, {true, sim::FoldMode::always}, true, folded);
  REQUIRE(folded.trace.folded());
  CHECK(gz_blocks == static_cast<int>(folded.trace.spans.size() / 32768) + 1);
  CHECK(report::is_gzip(gz));
  CHECK(report::gunzip(gz) == report::chrome_trace_json(folded.trace, folded.program, cluster));
}

TEST_CASE("gzip a piece at a time reads back as the pieces joined", "[report][trace]") {
  std::string data;
  for (int i = 0; i < 200000; ++i) data += fmt::format("{{\"ts\":{},\"dur\":{}}},\n", i * 7, i % 13);
  report::GzipWriter w;
  for (std::size_t at = 0; at < data.size(); at += 100003) w.add(std::string_view(data).substr(at, 100003));
  w.add("");
  const std::string gz = w.finish();
  CHECK(report::gunzip(gz) == data);
  CHECK(gz.size() * 5 < data.size());
  CHECK(report::gunzip(report::gzip("")).empty());
  // A stream that unpacks past the reader's limit (a gzip bomb) stops there.
  const std::string zeros = report::gzip(std::string(1 << 20, '\0'));
  CHECK(zeros.size() * 100 < (1 << 20));
  CHECK(report::gunzip(zeros, 1 << 20).size() == (1 << 20));
  CHECK_THROWS_WITH(report::gunzip(zeros, (1 << 20) - 1), Catch::Contains("unpacks past 1048575 bytes"));
}
