// parasim sweep SCENARIO --vary KEY=V1,V2 ...: predict every point of a grid of overrides
// and tabulate throughput and efficiency against GPU count, with a scaling plot.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "cli/progress.hpp"
#include "cli/output.hpp"
#include "report/table.hpp"
#include "planner/sweep.hpp"
#include "topology/units.hpp"

namespace parasim::cli {
namespace {

struct SweepArgs {
  ScenarioArgs scenario;
  std::vector<std::string> vary;
  std::string batch = "per-replica";
  bool fixed_nodes = false;
  JsonOption json;
  std::string csv;
  std::string plot;
};

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void run_sweep(const SweepArgs& a) {
  std::vector<planner::SweepAxis> axes;
  for (const std::string& v : a.vary) {
    try {
      axes.push_back(planner::parse_axis(v));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  if (!a.plot.empty() && !(a.plot.size() > 4 && a.plot.compare(a.plot.size() - 4, 4, ".svg") == 0)) {
    throw UsageError(fmt::format("--plot '{}': the plot is written as SVG; name the file *.svg", a.plot));
  }
  if (a.csv == "-" && a.json.on_stdout()) {
    throw UsageError("--csv - and --json both write to standard output: give one of them a file");
  }
  const std::string name = a.scenario.load().name;  // a bad scenario fails here, naming its file and line
  planner::SweepOptions o;
  o.per_replica_batch = a.batch == "per-replica";
  o.grow_nodes = !a.fixed_nodes;
  std::vector<planner::SweepPoint> points;
  Progress progress(a.json.on_stdout() || a.csv == "-");
  if (progress.shown()) {
    o.progress = [&progress](std::size_t done, std::size_t total) { progress.update("simulating the grid", done, total); };
  }
  try {
    points = planner::sweep(a.scenario.path, a.scenario.overrides, axes, o);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  progress.clear();

  // The whole run's figures, where the scenario gives its length.
  const bool runs = std::any_of(points.begin(), points.end(), [](const planner::SweepPoint& p) { return p.has_run; });
  // Outputs are written whole, as a set, once everything has run.
  OutputSet out;
  if (!a.csv.empty()) {
    std::string csv;
    for (const auto& axis : axes) csv += axis.key + ",";
    csv += "gpus,step_time,tokens_per_s,ideal_tokens_per_s,efficiency,mfu,fits,error";
    csv += runs ? ",time_to_train,goodput,interruptions,energy_mwh,device_hours\n" : "\n";
    for (const planner::SweepPoint& p : points) {
      for (const std::string& v : p.values) csv += csv_field(v) + ",";
      if (!p.error.empty()) {  // no figures: empty fields, and the reason
        csv += fmt::format(",,,,,,,{}{}\n", csv_field(p.error), runs ? ",,,,," : "");
        continue;
      }
      csv += fmt::format("{},{:.9g},{:.9g},{},{},{:.6g},{},", p.gpus, p.step_time, p.tokens_per_s,
                         p.scaling ? fmt::format("{:.9g}", p.ideal) : "", p.scaling ? fmt::format("{:.6g}", p.efficiency) : "",
                         p.mfu, p.fits ? "true" : "false");
      if (runs) {
        csv += fmt::format(",{:.9g},{:.6g},{:.6g},{},{:.9g}", p.time_to_train, p.goodput, p.interruptions,
                           p.energy > 0.0 ? fmt::format("{:.9g}", p.energy / 3.6e9) : "", p.device_hours);
      }
      csv += "\n";
    }
    out.add(a.csv, csv);
  }
  if (!a.plot.empty()) {
    out.add(a.plot, planner::sweep_svg(points, axes, fmt::format("{}: throughput against {}", name, axes.front().key)));
  }
  if (a.json.wanted()) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const planner::SweepPoint& p : points) {
      nlohmann::ordered_json set = nlohmann::ordered_json::object();
      for (std::size_t i = 0; i < axes.size(); ++i) set[axes[i].key] = p.values[i];
      nlohmann::ordered_json row{{"values", set}, {"gpus", p.gpus}};
      if (p.error.empty()) {
        row.update({{"step_time", p.step_time}, {"tokens_per_s", p.tokens_per_s}});
        if (p.scaling) row.update({{"ideal_tokens_per_s", p.ideal}, {"efficiency", p.efficiency}});
        row.update({{"mfu", p.mfu}, {"fits", p.fits}, {"bottleneck", p.bottleneck}});
        if (p.has_run) {
          row["run"] = {{"time_to_train", p.time_to_train}, {"goodput", p.goodput}, {"interruptions", p.interruptions},
                        {"energy_mwh", p.energy / 3.6e9},   {"device_hours", p.device_hours}};
        }
      } else {
        row["error"] = p.error;
      }
      rows.push_back(row);
    }
    out.add(a.json.path, stamped("sweep", {{"scenario", name}, {"points", rows}}).dump(2) + "\n");
  }
  out.commit();
  if (a.csv == "-" || a.json.on_stdout()) return;  // the CSV or the JSON alone on standard output
  using A = report::Table::Align;
  std::vector<std::string> header;
  std::vector<A> align;
  for (const auto& axis : axes) {
    header.push_back(axis.key);
    align.push_back(A::right);
  }
  for (const char* h : {"GPUs", "step time", "tokens/s", "ideal", "efficiency", "MFU", "memory"}) {
    header.emplace_back(h);
    align.push_back(A::right);
  }
  if (runs) {
    for (const char* h : {"time to train", "goodput", "interruptions"}) {
      header.emplace_back(h);
      align.push_back(A::right);
    }
  }
  report::Table t(header, align);
  std::vector<std::string> errors;
  for (const planner::SweepPoint& p : points) {
    std::vector<std::string> row = p.values;
    if (!p.error.empty()) {
      for (int i = 0; i < (runs ? 10 : 7); ++i) row.emplace_back("-");
      errors.push_back(fmt::format("{}: {}", fmt::join(p.values, ", "), p.error));
    } else {
      row.insert(row.end(), {std::to_string(p.gpus), units::format_duration(p.step_time), units::format_count(p.tokens_per_s),
                             p.scaling ? units::format_count(p.ideal) : "-",
                             p.scaling ? fmt::format("{:.1f} %", 100 * p.efficiency) : "-",
                             fmt::format("{:.1f} %", 100 * p.mfu), p.fits ? "fits" : "OUT OF MEMORY"});
      if (runs) {
        row.insert(row.end(), {p.has_run ? units::format_span(p.time_to_train) : "-",
                               p.has_run ? fmt::format("{:.1f} %", 100 * p.goodput) : "-",
                               p.has_run ? fmt::format("{:.3g}", p.interruptions) : "-"});
      }
    }
    t.add_row(std::move(row));
  }
  fmt::print("sweep of {} ({} points; {} batch per {}, {})\n{}", name, points.size(), "global",
             o.per_replica_batch ? "replica kept" : "step fixed", o.grow_nodes ? "nodes added as needed" : "nodes fixed",
             t.render());
  for (const std::string& e : errors) fmt::print("not simulated: {}\n", e);
  if (!a.plot.empty()) fmt::print("wrote {}\n", a.plot);
}

}  // namespace

void add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "Predict a grid of overrides: throughput and efficiency against GPU count");
  args->scenario.add_to(*cmd);
  cmd->add_option("--vary", args->vary, "An axis of the grid, KEY=V1,V2,... (repeatable), e.g. --vary plan.dp=1,2,4,8")
      ->type_name("KEY=VALUES")
      ->required();
  cmd->add_option("--batch", args->batch,
                  "per-replica: the global batch follows dp (weak scaling); fixed: as the scenario sets it")
      ->check(CLI::IsMember({"per-replica", "fixed"}))
      ->capture_default_str();
  cmd->add_flag("--fixed-nodes", args->fixed_nodes, "Keep the cluster's nodes (default: add nodes to hold each plan)");
  args->json.add_to(*cmd, "Every point's figures");
  cmd->add_option("--csv", args->csv, "Write the table as CSV to FILE")->type_name("FILE")
      ->check(output_file());
  cmd->add_option("--plot", args->plot, "Write the plot as SVG to FILE: tokens/s against the first --vary, a line per value of the others, the ideal line where the GPU count changes")
      ->type_name("FILE.svg")
      ->check(output_file());
  cmd->callback([args] { run_sweep(*args); });
}

}  // namespace parasim::cli
