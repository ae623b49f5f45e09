// parasim import --megatron FILE: Megatron-LM's pretrain_gpt.py arguments (a launch script,
// or what `parasim export --megatron` printed) as a scenario on a cluster preset, so that a
// plan already running can be predicted, checked and planned from (scenario/megatron.hpp).
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/common.hpp"
#include "scenario/describe.hpp"
#include "scenario/diagnostics.hpp"
#include "scenario/load.hpp"
#include "scenario/megatron.hpp"

namespace parasim::cli {
namespace {

struct ImportArgs {
  std::string file;  // "-": standard input
  bool megatron = false;
  std::string cluster = "dgx-h100";
  int gpus = 0;
  std::string name;
  std::string out = "-";
};

std::string read_all(const std::string& file) {
  if (file == "-") return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot read it", file));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A YAML scalar that needs no quoting stays bare.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

void run_import(const ImportArgs& a) {
  const std::string source = a.file == "-" ? std::string("<stdin>") : a.file;
  const scenario::MegatronImport m = scenario::read_megatron_arguments(read_all(a.file), source);
  const int gpus = a.gpus > 0 ? a.gpus : m.gpus;
  if (gpus == 0) {
    throw UsageError(
        fmt::format("{}: how many GPUs run it? Give --gpus N (the arguments have no torchrun "
                    "--nnodes and --nproc-per-node)",
                    source));
  }
  const int model_parallel = m.tp * m.pp * m.cp;
  if (gpus % model_parallel != 0) {
    throw UsageError(
        fmt::format("{} GPUs do not divide by tp {} x pp {} x cp {} = {}: data parallelism is what is "
                    "left of the GPUs",
                    gpus, m.tp, m.pp, m.cp, model_parallel));
  }
  // The cluster preset's node size, from the preset itself.
  const scenario::Scenario probe = scenario::load_text(
      fmt::format("cluster: {}\nmodel: tiny-gpt\ntraining: {{global_batch: 1, micro_batch: 1}}\nplan: {{dp: 1}}\n",
                  a.cluster),
      "--cluster " + a.cluster);
  const int per_node = probe.cluster.gpus_per_node;
  const int nodes = (gpus + per_node - 1) / per_node;
  const std::string name = a.name.empty() ? "megatron-import" : a.name;
  std::vector<std::string> sets{"cluster=" + a.cluster};
  if (nodes != probe.cluster.nodes) sets.push_back(fmt::format("cluster.nodes={}", nodes));
  sets.push_back("model.name=" + name);
  sets.insert(sets.end(), m.sets.begin(), m.sets.end());
  sets.push_back(fmt::format("plan.dp={}", gpus / model_parallel));
  std::string yaml = fmt::format("# From Megatron-LM arguments in {} (parasim import --megatron), on {} x {} GPUs\n",
                                 source, nodes, per_node);
  for (const std::string& n : m.notes) yaml += "# note: " + n + "\n";
  if (!m.ignored.empty()) yaml += fmt::format("# ignored: {}\n", fmt::join(m.ignored, ", "));
  yaml += fmt::format("name: {}\ndescription: {}\n", name, quoted(fmt::format("imported from {}", source)));
  yaml += sets_yaml(sets);
  // What was written must load: an inconsistent set of arguments is refused here, naming
  // the setting, rather than in the next command.
  scenario::Scenario s;
  try {
    s = scenario::load_text(yaml, "the imported scenario");
  } catch (const scenario::ScenarioError& e) {
    throw UsageError(
        fmt::format("{}: the arguments do not make a plan parasim can run: {}: {}", source, e.key(), e.message()));
  }
  write_output(a.out, yaml);
  if (a.out != "-") {
    const std::string described = scenario::describe(s);
    fmt::print("wrote {}: {}\n", a.out, described.substr(0, described.find('\n')));
    if (!m.ignored.empty())
      fmt::print("ignored {} argument{} parasim does not model\n", m.ignored.size(), m.ignored.size() == 1 ? "" : "s");
  }
}

}  // namespace

void add_import(CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Read another tool's arguments as a scenario (--megatron: Megatron-LM's pretrain_gpt.py arguments)");
  cmd->add_option("FILE", a->file, "The arguments (a launch script or export's output; - for standard input)")
      ->required();
  cmd->add_flag("--megatron", a->megatron, "Megatron-LM's arguments")->required();
  cmd->add_option("--cluster", a->cluster, "Cluster preset the plan runs on")->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "GPUs in all (default: torchrun's --nnodes x --nproc-per-node in FILE)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--name", a->name, "The scenario's and model's name (default: megatron-import)");
  cmd->add_option("--out", a->out, "Scenario to write (default: standard output)")
      ->type_name("FILE")
      ->check(output_file());
  cmd->callback([a] { run_import(*a); });
}

}  // namespace parasim::cli
