// parasim validate SCENARIO: predict the plan, run it for real (--repeat N times), and put
// the prediction beside the measurement (the median run's, with the spread over the runs).
// Before it starts, it looks at how busy the host is: a loaded host, or a profile measured
// on another one, makes the comparison say less, and the command says so.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "cli/output.hpp"
#include "cli/run.hpp"
#include "exec/backend.hpp"
#include "workload/memory.hpp"
#include "report/chrome_trace.hpp"
#include "report/compare.hpp"
#include "report/metrics.hpp"
#include "report/table.hpp"
#include "sim/simulate.hpp"
#include "topology/units.hpp"

namespace parasim::cli {
namespace {

#ifdef PARASIM_HAVE_CPU_BACKEND

// A comparison row's name as an identifier: "expert load (busiest)" -> "expert_load_busiest".
std::string metric_id(const std::string& name) {
  std::string id;
  for (char c : name) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (word) {
      id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!id.empty() && id.back() != '_') {
      id += '_';
    }
  }
  while (!id.empty() && id.back() == '_') id.pop_back();
  return id;
}

// validate's folder: made (and so proven writable) before any rank starts.
std::string validate_dir(const RunArgs& a, const scenario::Scenario& s) {
  const std::string dir = a.out.empty() ? fmt::format("validate-{}", s.name) : a.out;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw UsageError(fmt::format("--out {}: cannot make the folder: {}", dir,
                                 ec ? ec.message() : std::string("a file of that name is in the way")));
  }
  for (const char* f : {"/predicted.trace.json", "/measured.trace.json", "/comparison.json"}) {
    check_output_path(dir + f, "--out");
  }
  return dir;
}

// The first line of /proc/stat, the CPU times summed over cores: (busy, steal, total).
struct CpuTimes {
  double busy = 0.0, steal = 0.0, total = 0.0;
};
CpuTimes cpu_times() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return {};
  const double busy = user + nice + system + irq + softirq;
  return {busy, steal, busy + idle + iowait + steal};
}

// How busy the host is before the ranks start: the cores' busy fraction over a quarter of a
// second (this process sleeps meanwhile) and the CPU time the hypervisor took (steal).
// Passed to the ranks in the environment, so that rank 0 writes it in comparison.json.
constexpr const char* host_busy_variable = "PARASIM_HOST_BUSY";
void sample_host_load() {
  if (std::getenv(host_busy_variable) != nullptr) return;
  const CpuTimes t0 = cpu_times();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const CpuTimes t1 = cpu_times();
  const double total = t1.total - t0.total;
  if (total <= 0.0) return;
  const std::string v = fmt::format("{:.3f},{:.3f}", (t1.busy - t0.busy) / total, (t1.steal - t0.steal) / total);
  ::setenv(host_busy_variable, v.c_str(), 1);
}

struct HostLoad {
  double busy = -1.0;   // before the run; -1: not sampled
  double steal = -1.0;  // before the run
  double steal_during = -1.0;
};

// The host a profile was measured on, from the line calibrate writes at its top
// ("# on HOST (CPU), DATE"); empty when the file does not say.
std::string profile_host(const std::string& path) {
  std::ifstream in(path);
  static const std::regex on(R"(^# on (\S+) \()");
  std::smatch m;
  for (std::string line; std::getline(in, line) && line.starts_with("#");) {
    if (std::regex_search(line, m, on)) return m[1];
  }
  return {};
}

// The warnings a comparison carries; printed and written to comparison.json.
std::vector<std::string> measurement_warnings(const scenario::Scenario& s, const HostLoad& load, int repeat,
                                              double spread) {
  std::vector<std::string> w;
  const auto cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  if (load.busy > 0.25) {
    w.push_back(
        fmt::format("the host's cores were {:.0f} % busy before the run started (other work on {} core{}): "
                    "the measurement is slower than the plan on an idle host",
                    100 * load.busy, cores, cores == 1 ? "" : "s"));
  }
  if (std::max(load.steal, load.steal_during) > 0.02) {
    w.push_back(
        fmt::format("the hypervisor took {:.0f} % of the CPU time (steal): the measurement depends on the "
                    "host's neighbours",
                    100 * std::max(load.steal, load.steal_during)));
  }
  if (s.run.backend == scenario::Backend::cpu && s.plan.world() > cores) {
    w.push_back(fmt::format("{} ranks share {} core{}: they take turns, which the prediction does not model",
                            s.plan.world(), cores, cores == 1 ? "" : "s"));
  }
  if (!s.hardware.profile.empty()) {
    const std::string measured_on = profile_host(s.hardware.profile);
    if (!measured_on.empty() && measured_on != host_name()) {
      w.push_back(fmt::format("the profile {} was measured on {}, this is {}: run parasim calibrate here",
                              s.hardware.profile, measured_on, host_name()));
    }
  }
  if (repeat > 1 && spread > 0.10) {
    w.push_back(
        fmt::format("the runs' step times spread over {:.0f} % of their median: the host is not steady", 100 * spread));
  }
  return w;
}

// Each metric measured in every run: the lowest, the median (the run's whose step time is
// the median one, as the table shows) and the highest.
struct Spread {
  double min = 0.0, max = 0.0;
};

void run_validate(const RunArgs& a) {
  const scenario::Scenario s = load_for_run(a);
  const std::string dir = validate_dir(a, s);
  if (!under_mpi()) sample_host_load();
  HostLoad load;
  if (const char* v = std::getenv(host_busy_variable); v != nullptr) {
    (void)std::sscanf(v, "%lf,%lf", &load.busy, &load.steal);
  }
  const CpuTimes before = cpu_times();
  const Job job = launch_and_run(s, a);
  if (!job.root) return;
  const CpuTimes after = cpu_times();
  if (after.total > before.total) load.steal_during = (after.steal - before.steal) / (after.total - before.total);
  const exec::Measurement& m = job.measured();
  std::optional<StdoutToStderr> json_alone;  // the tables to standard error while the JSON has standard output
  json_alone.emplace(a.json.on_stdout());

  const topology::Cluster cluster(s.cluster);
  const sim::Prediction prediction = sim::predict(s, {true, sim::FoldMode::never});
  const report::StepFigures pf = report::step_figures(s, prediction.trace, cluster);
  const workload::MemoryReport mem = workload::memory_per_rank(s);
  // The executor's allocator holds the model's tensors; the runtime's workspace is outside
  // it, so the comparison leaves it out of the prediction too.
  const std::vector<double> predicted_memory = rank_tensor_memory(s, mem);
  auto rows_of = [&](const exec::Measurement& run) {
    const report::StepFigures mf = report::step_figures(s, run.trace, cluster);
    std::vector<report::ComparisonRow> rows =
        report::compare(pf, prediction.trace, mf, run.trace, predicted_memory, run.peak_memory);
    // Expert parallelism: the routing the prediction assumed (model.moe_imbalance) against
    // the rows the busiest rank's experts computed.
    if (run.expert_load > 0.0)
      rows.push_back({"expert load (busiest)", "ratio", s.model.expert_load(), run.expert_load});
    return rows;
  };
  std::vector<std::vector<report::ComparisonRow>> per_run;
  for (const exec::Measurement& run : job.runs) per_run.push_back(rows_of(run));
  const std::vector<report::ComparisonRow>& rows = per_run[job.median];
  std::vector<Spread> spread(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) spread[i] = {rows[i].measured, rows[i].measured};
  for (const std::vector<report::ComparisonRow>& other : per_run) {
    for (std::size_t i = 0; i < rows.size() && i < other.size(); ++i) {
      spread[i].min = std::min(spread[i].min, other[i].measured);
      spread[i].max = std::max(spread[i].max, other[i].measured);
    }
  }
  const bool repeated = job.runs.size() > 1;

  using A = report::Table::Align;
  std::vector<std::string> head{"", "predicted", "measured", "error"};
  if (repeated) head.emplace_back(fmt::format("spread over {} runs", job.runs.size()));
  report::Table t(head, {A::left, A::right, A::right, A::right, A::right});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const report::ComparisonRow& r = rows[i];
    std::vector<std::string> row{r.name, report::format_value(r, r.predicted), report::format_value(r, r.measured),
                                 report::format_error(r)};
    if (repeated) {
      row.push_back(
          fmt::format("{} .. {}", report::format_value(r, spread[i].min), report::format_value(r, spread[i].max)));
    }
    t.add_row(row);
  }
  fmt::print("\nprediction against measurement (median step{}; profile: {})\n{}",
             repeated ? fmt::format(" of run {}, the median of {} runs", job.median + 1, job.runs.size()) : "",
             s.hardware.profile.empty() ? "datasheet defaults, not calibrated" : s.hardware.profile, t.render());
  if (const scenario::Dtype stored = topology::storage_dtype(s.training.precision);
      stored == scenario::Dtype::bf16 || stored == scenario::Dtype::fp16) {
    fmt::print(
        "note: the executor keeps {} weights and stored activations in 2 bytes, but computes on fp32\n"
        "      copies (the weights of the two layers in use, a layer's working tensors and gradients),\n"
        "      which the prediction's 2-byte tensors do not have: it holds somewhat more memory\n",
        topology::to_string(stored));
  }
  if (m.expert_load > 0.0 && std::abs(m.expert_load / s.model.expert_load() - 1.0) > 0.05) {
    fmt::print(
        "note: the router sent the busiest rank's experts {:.2f} x the mean's rows, the prediction assumed\n"
        "      {:.2f} x; --set model.moe_imbalance={:.2f} predicts with the routing measured\n",
        m.expert_load, s.model.expert_load(), m.expert_load);
  }
  if (s.training.precision == scenario::Dtype::fp8) {
    fmt::print(
        "note: fp8 runs here as FP8 values in fp32 GEMMs (each linear layer's operands rounded to E4M3 or\n"
        "      E5M2 under current scaling), at the bf16 rate, whatever training.fp8_recipe says\n");
  }
  const double step_spread =
      rows.front().measured > 0.0 ? (spread[0].max - spread[0].min) / rows.front().measured : 0.0;
  const std::vector<std::string> warnings =
      measurement_warnings(s, load, static_cast<int>(job.runs.size()), step_spread);
  for (const std::string& w : warnings) fmt::print("warning: {}\n", w);

  OutputSet out;
  out.add(dir + "/predicted.trace.json", report::chrome_trace_json(prediction.trace, prediction.program, cluster));
  out.add(dir + "/measured.trace.json", report::chrome_trace_json(m.trace, m.program, cluster));
  nlohmann::ordered_json cmp = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const report::ComparisonRow& r = rows[i];
    const double e = r.error();
    cmp.push_back({{"id", metric_id(r.name)},
                   {"metric", r.name},
                   {"unit", r.unit},
                   {"predicted", r.predicted},
                   {"measured", r.measured},
                   {"measured_min", spread[i].min},
                   {"measured_max", spread[i].max},
                   {"error", std::isnan(e) ? nlohmann::ordered_json() : nlohmann::ordered_json(e)}});
  }
  nlohmann::ordered_json host{{"name", host_name()}};
  if (load.busy >= 0.0) host["busy_before"] = load.busy;
  if (load.steal >= 0.0) host["steal_before"] = load.steal;
  if (load.steal_during >= 0.0) host["steal_during"] = load.steal_during;
  nlohmann::ordered_json j{{"scenario", s.name},
                           {"host", host_name()},
                           {"date", utc_now()},
                           {"ranks", s.plan.world()},
                           {"backend", to_string(s.run.backend)},
                           {"model", m.model_note},
                           {"kernel_paths", m.kernel_paths},
                           {"profile", s.hardware.profile.empty() ? std::string("datasheet") : s.hardware.profile},
                           {"runs", job.runs.size()},
                           {"median_run", job.median + 1},
                           {"host_load", host},
                           {"warnings", warnings},
                           {"traced_step", m.traced_step + 1},
                           {"comparison", cmp},
                           {"steps", steps_json(m)}};
  // Version 2: steps counted from 1 (traced_step and each step's `step`).
  const std::string comparison = stamped("comparison", j, 2).dump(2) + "\n";
  out.add(dir + "/comparison.json", comparison);
  if (a.json.wanted()) out.add(a.json.path, comparison);
  fmt::print("\nwrote {0}/predicted.trace.json, {0}/measured.trace.json, {0}/comparison.json\n", dir);
  json_alone.reset();
  out.commit();
  if (a.max_error) {
    const double e = std::abs(rows.front().error()) * 100.0;  // the step time's
    if (!(e <= *a.max_error)) {
      throw ExitStatus(exit_error_exceeded, fmt::format("the predicted {} is {:.1f} % off the measured one, past "
                                                        "--max-error {:g} %",
                                                        rows.front().name, e, *a.max_error));
    }
  }
}

#else

void run_validate(const RunArgs& a) {
  precheck(load_for_run(a));  // names the missing backend
  throw UsageError(fmt::format("this build has no CPU executor: {}", exec::cpu_status().detail));
}

#endif

}  // namespace

void add_validate(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Predict the plan, run it for real, and show prediction and measurement side by side");
  add_run_options(*cmd, *args);
  cmd->add_option("--out", args->out, "Folder for both traces and the JSON comparison (default: validate-NAME)")
      ->type_name("DIR")
      ->check(CLI::Validator([](const std::string& v) { return v.empty() ? std::string("expected a folder, not an empty name") : std::string(); },
                             "DIR"));
  args->json.add_to(*cmd, "The comparison (as comparison.json)");
  cmd->add_option("--repeat", args->repeat,
                  "Measure the plan N times and compare the median run, with each figure's spread over the runs")
      ->type_name("N")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--max-error", args->max_error,
                  "Exit with status 4 when the predicted step time is more than PCT percent off the measured one")
      ->type_name("PCT")
      ->check(CLI::Range(0.0, 1e6))
      ->check(CLI::Validator(
          [](const std::string& v) {  // CLI::Range lets NaN through: it compares false both ways
            return v.find_first_of("nN") != std::string::npos ? std::string("expected a number of percent, not NaN")
                                                               : std::string();
          },
          "PCT"));
  cmd->callback([args] { run_validate(*args); });
}

}  // namespace parasim::cli
