// Prediction against public measurements of real training runs.
//
//   parasim_fidelity [CSV] [--every K] [--threads T] [--svg FILE] [--csv FILE] [--by-layer] [--set KEY=VALUE]...
//   parasim_fidelity --allreduce DIR
//
// Reads a CSV of measured step times (vTrain's columns, plus optional cluster, precision
// and other columns; or the public files' columns, tests/data/fidelity/public:
// sim/fidelity.hpp), predicts each row with the built-in (datasheet)
// profiles and prints MAE, mean, median, p90 and max relative error overall and by tp,
// pp, dp, micro-batch, hidden size, layers and GPUs. --svg draws predicted against
// measured; --csv writes every row with its prediction; --set overrides a scenario key of
// every row (to try a device constant, e.g. cluster.device.host.forward=40us); --by-layer
// splits each error into a layer's cost and a micro-batch's (sim::layer_sweeps): the rows
// that differ only in their layer count, fitted against it, by hidden size, tp and
// micro-batch.
// --allreduce DIR compares the all-reduce model with the measured files AR_GPUn_a100 in DIR
// (tests/data/fidelity/a100-allreduce). Default CSV: the vTrain file in
// tests/data/fidelity.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "scenario/diagnostics.hpp"
#include "sim/fidelity.hpp"

using namespace parasim;

int main(int argc, char** argv) {
  std::string csv = std::string(PARASIM_SOURCE_DIR) + "/tests/data/fidelity/vtrain-single-node.csv";
  std::string svg, out_csv, allreduce;
  bool by_layer = false;
  std::vector<std::string> sets;
  int every = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (std::strcmp(argv[i], "--every") == 0 && more) {
      every = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--threads") == 0 && more) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--svg") == 0 && more) {
      svg = argv[++i];
    } else if (std::strcmp(argv[i], "--allreduce") == 0 && more) {
      allreduce = argv[++i];
    } else if (std::strcmp(argv[i], "--set") == 0 && more) {
      sets.emplace_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--by-layer") == 0) {
      by_layer = true;
    } else if (std::strcmp(argv[i], "--csv") == 0 && more) {
      out_csv = argv[++i];
    } else if (argv[i][0] != '-') {
      csv = argv[i];
    } else {
      std::fprintf(stderr, "usage: %s [CSV] [--every K] [--threads T] [--svg FILE] [--csv FILE] [--by-layer] [--set KEY=VALUE]... | --allreduce DIR\n", argv[0]);
      return 2;
    }
  }
  if (!allreduce.empty()) {
    fmt::print("all-reduce on one DGX A100 node: measured ({}) against predicted\n\n{}", allreduce,
               sim::allreduce_report(allreduce, "dgx-a100"));
    return 0;
  }
  std::vector<sim::MeasuredRun> runs;
  try {
    // The public files' columns (tests/data/fidelity/public) or vTrain's.
    std::ifstream head(csv);
    std::string first;
    std::getline(head, first);
    runs = first.find("gpu_type") != std::string::npos ? sim::read_public_runs(csv) : sim::read_measured_runs(csv);
  } catch (const scenario::ScenarioError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  std::vector<sim::MeasuredRun> chosen;
  for (std::size_t i = 0; i < runs.size(); i += static_cast<std::size_t>(every)) {
    chosen.push_back(runs[i]);
    chosen.back().overrides.insert(chosen.back().overrides.end(), sets.begin(), sets.end());
  }
  const auto rows = sim::predict_runs(chosen, threads);
  fmt::print("{}: {} rows, relative error (predicted - measured) / measured\n\n{}", csv, rows.size(),
             sim::fidelity_report(rows));
  if (by_layer) {
    fmt::print("\nby layer count: a layer's cost per micro-batch and a micro-batch's besides its layers, fitted over\n"
               "the rows that differ only in layers (medians of the sweeps)\n\n{}",
               sim::layer_sweep_report(sim::layer_sweeps(rows)));
  }
  if (!svg.empty()) {
    std::ofstream(svg) << sim::fidelity_svg(rows, fmt::format("predicted against measured step time ({} rows)", rows.size()));
  }
  if (!out_csv.empty()) {
    std::ofstream o(out_csv);
    o << "line,gpus,tp,pp,dp,micro batch,hidden,layers,measured ms,predicted ms,error,measured GiB,predicted GiB\n";
    for (const auto& r : rows) {
      const auto& d = r.run->dims;
      constexpr double gib = 1024.0 * 1024.0 * 1024.0;
      o << fmt::format("{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.4f},{:.2f},{:.2f}\n", r.run->line, r.run->gpus,
                       d.at("tp"), d.at("pp"), d.at("dp"), d.at("micro batch"), d.at("hidden"), d.at("layers"),
                       r.measured() * 1e3, r.predicted * 1e3, r.error.empty() ? r.relative_error() : 0.0,
                       r.run->measured_memory / gib, r.predicted_memory / gib);
    }
  }
  return 0;
}
