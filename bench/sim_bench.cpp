// Simulator speed: GPT-3 175B (tp 8, pp 8, interleaved 1F1B with 2 model chunks per stage,
// micro-batch 1, 96 micro-batches per pipeline) on N GPUs of DGX H100 nodes, one full
// training step with every transfer sharing the links max-min fairly. Prints the wall
// time of compiling and simulating, peak resident memory, and the simulator's counts.
//
//   parasim_sim_bench [--gpus N] [--fold auto|always|never] [--json] [--trace FILE]
//
// --trace FILE: the step simulated with its counters and written as a Chrome trace
// (FILE.gz: gzip-compressed; FILE.pftrace: Perfetto's format), as `parasim simulate
// --trace` writes it: a Chrome trace's spans formatted beside the simulation, on another
// core, and its counters after it. Prints the time of the simulation (with the trace's
// spans) and of the rest of the writing, the file's size and the peak memory of both.
//
// By default the data-parallel replicas are folded as `parasim simulate` folds them
// (sim/simulate.hpp); --fold never simulates every rank.
//
// One size per process, so the resident-memory peak is that size's alone; bench/run.sh
// runs the sizes of docs/performance.md.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "program/program.hpp"
#include "report/chrome_trace.hpp"
#include "report/gzip.hpp"
#include "report/metrics.hpp"
#include "topology/cluster.hpp"
#include "sim/simulate.hpp"

using namespace parasim;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int main(int argc, char** argv) {
  int gpus = 1024;
  bool json = false;
  std::string trace_file;
  sim::FoldMode fold = sim::FoldMode::automatic;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
      gpus = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--fold") == 0 && i + 1 < argc) {
      const std::string m = argv[++i];
      fold = m == "never" ? sim::FoldMode::never : m == "always" ? sim::FoldMode::always : sim::FoldMode::automatic;
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
      trace_file = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--gpus N] [--fold auto|always|never] [--json] [--trace FILE]   (N a multiple of 64)\n",
                   argv[0]);
      return 2;
    }
  }
  if (gpus < 64 || gpus % 64 != 0) {
    std::fprintf(stderr, "--gpus must be a multiple of 64 (tp 8 x pp 8), got %d\n", gpus);
    return 2;
  }
  const int dp = gpus / 64;
  const std::string text = fmt::format(R"(name: gpt3-175b-{0}
cluster: {{preset: dgx-h100, nodes: {1}}}
model: gpt3-175b
training: {{global_batch: {2}, micro_batch: 1, precision: bf16, recompute: selective}}
plan: {{tp: 8, pp: 8, dp: {3}, virtual_stages: 2, schedule: interleaved-1f1b, sequence_parallel: true}}
)",
                                       gpus, gpus / 8, 96 * dp, dp);
  const auto t0 = std::chrono::steady_clock::now();
  const scenario::Scenario s = scenario::load_text(text, "bench.yaml");
  // The trace as `parasim simulate --trace` writes it: a Chrome trace beside the simulation.
  sim::PredictOptions options{!trace_file.empty(), fold, {}, {}};
  std::optional<report::ChromeTraceStream> stream;
  if (!trace_file.empty() && report::chrome_trace_streamed(trace_file)) {
    stream.emplace(report::gzip_name(trace_file));
    options.spans = [&stream](const program::Program& program, std::span<const report::Span> spans, bool last) {
      stream->add(program, spans, last);
    };
  }
  const sim::Prediction p = sim::predict(s, options);
  const sim::SimStats& stats = p.stats;
  const double simulate_s = seconds_since(t0);
  double write_s = 0.0;
  double file_s = 0.0;  // of write_s, the file's
  std::size_t trace_bytes = 0;
  if (!trace_file.empty()) {
    const auto tw = std::chrono::steady_clock::now();
    const topology::Cluster cluster(s.cluster);
    const std::string bytes =
        stream ? stream->finish(p.trace, cluster) : report::chrome_trace_file(p.trace, p.program, cluster, trace_file);
    file_s = seconds_since(tw);
    std::FILE* f = std::fopen(trace_file.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", trace_file.c_str());
      return 1;
    }
    trace_bytes = bytes.size();
    write_s = seconds_since(tw);
    file_s = write_s - file_s;
  }
  const auto t1 = std::chrono::steady_clock::now();
  const report::StepFigures f = report::step_figures(s, p.trace, topology::Cluster(s.cluster));
  const double report_s = seconds_since(t1);
  const double total_s = seconds_since(t0);
  const int simulated = p.simulated_ranks();
  const double rss = peak_rss_mib();
  if (json) {
    fmt::print(R"({{"gpus": {}, "simulated_ranks": {}, "exact": {}, "ops": {}, "events": {}, "flows": {}, )"
               R"("simulate_s": {:.3f}, "report_s": {:.3f}, "total_s": {:.3f}, "peak_rss_mib": {:.0f}, )"
               R"("events_per_s": {:.0f}, "step_time_s": {:.6f}, "mfu": {:.4f}, "trace_write_s": {:.3f}, "trace_file_s": {:.3f}, "trace_bytes": {}}})"
               "\n",
               gpus, simulated, stats.exact, stats.ops, stats.events, stats.flows, simulate_s, report_s, total_s, rss,
               static_cast<double>(stats.events) / simulate_s, f.step_time, f.mfu, write_s, file_s, trace_bytes);
  } else {
    fmt::print("GPT-3 175B on {} GPUs (tp 8 x pp 8 x dp {}, interleaved 1F1B v 2, 96 micro-batches)\n", gpus, dp);
    fmt::print("  ranks       {} simulated{}\n", simulated,
               simulated < gpus ? fmt::format(" ({} data-parallel replicas folded, {})", dp,
                                              stats.exact ? "exact" : "approximate")
                                : p.not_folded.empty() ? "" : " (not folded: " + p.not_folded + ")");
    fmt::print("  simulation  {} ops, {} events, {} flows in {:.2f} s with compiling ({:.2f} M events/s)\n", stats.ops,
               stats.events, stats.flows, simulate_s, static_cast<double>(stats.events) / simulate_s / 1e6);
    fmt::print("  total       {:.2f} s wall, peak resident memory {:.0f} MiB\n", total_s, rss);
    fmt::print("  prediction  step {:.6f} s, MFU {:.1f} %\n", f.step_time, 100 * f.mfu);
    if (!trace_file.empty()) {
      fmt::print("  trace       {} spans: {:.2f} s simulating with counters{}, then {:.2f} s writing ({:.2f} s of it the "
                 "file): {:.2f} s, {:.0f} MB\n",
                 p.trace.spans.size(), simulate_s, stream ? " and spans" : "", write_s, file_s, simulate_s + write_s,
                 static_cast<double>(trace_bytes) / 1e6);
    }
  }
  return 0;
}
