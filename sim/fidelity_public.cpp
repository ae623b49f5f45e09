// Published runs in the columns of tests/data/fidelity/public/*.csv (the files' README):
// one row per published figure, quoted as its source prints it, every field free text that
// starts with its value ("8 (assumed)", "unknown (4h=49152 assumed)", "bf16 (torch AMP)").
// Each row becomes a scenario by the rules below; what a row leaves unknown takes the
// default of the framework that ran it, and every such choice is listed in the file's
// README and in docs/validation.md.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "scenario/diagnostics.hpp"
#include "sim/fidelity.hpp"

namespace parasim::sim {

namespace {

// One CSV record: cells split at commas outside double quotes, "" inside quotes a quote.
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has(const std::string& text, std::string_view what) { return lower(text).find(what) != std::string::npos; }

// The number a field starts with ("5,762 TPS", "8 (assumed)"), commas between digits
// dropped; nullopt for "unknown" and other words.
std::optional<double> leading_number(const std::string& field) {
  std::string digits;
  std::size_t i = 0;
  while (i < field.size() && std::isspace(static_cast<unsigned char>(field[i])) != 0) ++i;
  for (; i < field.size(); ++i) {
    const char c = field[i];
    if (std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.') {
      digits += c;
    } else if (c == ',' && !digits.empty() && i + 1 < field.size() &&
               std::isdigit(static_cast<unsigned char>(field[i + 1])) != 0) {
      continue;
    } else {
      break;
    }
  }
  if (digits.empty()) return std::nullopt;
  return std::stod(digits);
}

// The first match of `pattern`'s group 1 as a number (commas dropped), scaled by 1000
// when group 2 is "k".
std::optional<double> find_number(const std::string& text, const std::regex& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, pattern)) return std::nullopt;
  std::string digits = m[1].str();
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  double v = std::stod(digits);
  if (m.size() > 2 && (m[2].str() == "k" || m[2].str() == "K")) v *= 1e3;
  return v;
}

struct Columns {
  std::vector<std::string> names;
  int at(const std::string& name, const std::string& path) const {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      throw scenario::ScenarioError(scenario::Location{path, 1, 1}, name,
                                    fmt::format("missing column '{}' (expected the public files' columns: source, "
                                                "gpu_type, total_gpus, ...)",
                                                name));
    }
    return static_cast<int>(it - names.begin());
  }
};

}  // namespace

std::string framework_of_row(const std::string& source, const std::string& model, const std::string& notes,
                             const std::string& sharding) {
  const std::string all = lower(source + " " + model + " " + notes + " " + sharding);
  if (has(all, "torchtitan")) return "torchtitan";
  if (has(all, "llm-foundry") || has(all, "fsdp full_shard")) return "pytorch-fsdp";
  if (has(all, "bigscience") || has(all, "megatron-deepspeed") || has(all, "deepspeed")) return "megatron-deepspeed";
  if (has(all, "megascale") || has(all, "megatron-lm @") || has(all, "megatron-lm:")) return "megatron-lm";
  // NeMo's own runs, and the Nemotron models, whose published recipes are NeMo's
  // (NeMo-Framework-Launcher, launcher_scripts/conf/training/nemotron/).
  if (has(all, "nemo")) return "nemo";
  return "megatron-core";
}

std::vector<MeasuredRun> read_public_runs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw scenario::ScenarioError(scenario::Location{path, 0, 0}, "", "cannot open the measurements");
  std::string line;
  if (!std::getline(in, line)) {
    throw scenario::ScenarioError(scenario::Location{path, 1, 1}, "", "empty file: expected a header row");
  }
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const Columns cols{csv_cells(line)};
  const char* names[] = {"source",    "gpu_type",   "total_gpus", "gpus_per_node",     "interconnect", "model",
                         "layers",    "hidden",     "heads",      "kv_heads",          "ffn_hidden",   "mlp",
                         "vocab",     "seq_len",    "global_batch_seqs", "micro_batch", "precision",    "recompute",
                         "flash_attn", "tp",        "pp",         "vpp",               "dp",           "cp",
                         "ep",        "sp",         "zero_fsdp",  "measured",          "notes"};
  std::map<std::string, int> at;
  for (const char* n : names) at[n] = cols.at(n, path);

  static const std::regex iteration(R"((?:time per iteration|iteration time)\s*(?:\(ms\))?\s*[:=]?\s*([0-9][0-9,]*\.?[0-9]*)\s*s\b)",
                                    std::regex::icase);
  static const std::regex per_gpu_tokens(R"(([0-9][0-9,]*\.?[0-9]*)\s*(k?)\s*(?:tokens/s/GPU|TPS/GPU))", std::regex::icase);
  // TorchTitan prints its throughput per GPU as "tokens/sec" (the first figure: vanilla tp).
  static const std::regex titan_tokens(R"(([0-9][0-9,]*\.?[0-9]*)\s*(k?)\s*tokens/sec\b)", std::regex::icase);
  static const std::regex tflops(R"(([0-9][0-9,]*\.?[0-9]*)\s*()TFLOPs?\b)", std::regex::icase);
  static const std::regex nics_speed(R"(([0-9]+)\s*x\s*([0-9]+)\s*G)", std::regex::icase);
  static const std::regex speed_each(R"(([0-9]+)\s*Gbps\s*(?:per|each))", std::regex::icase);
  static const std::regex links_per_node(R"(([0-9]+)x?\s+[A-Za-z -]*(?:\([A-Z]+\)\s*)?links per node)", std::regex::icase);
  static const std::regex per_node_total(R"(([0-9]+)\s*Gbps node-to-node)", std::regex::icase);
  static const std::regex per_gpu_speed(R"(([0-9]+)\s*Gb/s per GPU)", std::regex::icase);

  std::vector<MeasuredRun> runs;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> cells = csv_cells(line);
    const scenario::Location where{path, number, 1};
    if (cells.size() < cols.names.size()) {
      throw scenario::ScenarioError(where, "",
                                    fmt::format("expected {} cells, found {}", cols.names.size(), cells.size()));
    }
    const auto cell = [&](const char* name) -> const std::string& { return cells[static_cast<std::size_t>(at[name])]; };
    const auto whole = [&](const char* name, std::optional<int> fallback) {
      const std::optional<double> v = leading_number(cell(name));
      if (v && *v >= 1 && *v < 1e9) return static_cast<int>(*v);
      if (fallback) return *fallback;
      throw scenario::ScenarioError(where, name, fmt::format("expected a positive whole number, got '{}'", cell(name)));
    };
    MeasuredRun r;
    r.line = number;
    r.gpus = whole("total_gpus", std::nullopt);
    const int per_node = std::min(r.gpus, whole("gpus_per_node", 8));
    const int layers = whole("layers", std::nullopt), hidden = whole("hidden", std::nullopt);
    const int heads = whole("heads", std::nullopt), kv_heads = whole("kv_heads", heads);
    const int seq = whole("seq_len", std::nullopt), batch = whole("global_batch_seqs", std::nullopt);
    const int tp = whole("tp", 1), pp = whole("pp", 1), vpp = whole("vpp", 1), cp = whole("cp", 1), ep = whole("ep", 1);
    const int dp = whole("dp", std::max(1, r.gpus / std::max(1, tp * pp * cp)));
    const std::string framework = framework_of_row(cell("source"), cell("model"), cell("notes"), cell("zero_fsdp"));
    // Megatron's default micro-batch is 1; FSDP's runs state theirs.
    const int micro = whole("micro_batch", 1);
    // ffn_hidden: its value, else the value a note assumes (the first number of three digits
    // or more: "4h=49152 assumed", "24576 = 4h in NeMo config"), else 4 x hidden.
    int ffn = 4 * hidden;
    if (const auto v = leading_number(cell("ffn_hidden"))) {
      ffn = static_cast<int>(*v);
    } else if (const auto a = find_number(cell("ffn_hidden"), std::regex(R"(([0-9]{3,}))"))) {
      ffn = static_cast<int>(*a);
    }
    const int vocab = whole("vocab", 50257);
    const int pad = 128 * tp;  // Megatron pads the vocabulary to a multiple of 128 x tp
    const int padded = (vocab + pad - 1) / pad * pad;
    const std::string mlp_text = lower(cell("mlp"));
    // The field's leading word ("squared ReLU (neither SwiGLU nor GeLU)" is no SwiGLU): a
    // squared ReLU has GeLU's GEMM shapes.
    const std::string mlp = mlp_text.rfind("swiglu", 0) == 0 ? "swiglu" : "gelu";
    std::smatch moe;
    const std::string mlp_cell = cell("mlp");
    const bool experts = std::regex_search(mlp_cell, moe, std::regex(R"(([0-9]+)\s*experts\s*top-([0-9]+))", std::regex::icase));

    // Precision: FP8 linears (TorchTitan's float8, Transformer Engine) over bf16, or the
    // leading format.
    const std::string prec = lower(cell("precision"));
    std::string precision = "bf16";
    if (has(prec, "fp8") || has(prec, "float8")) {
      precision = "fp8";
    } else if (prec.rfind("fp16", 0) == 0) {
      precision = "fp16";
    }
    const std::string rc = lower(cell("recompute"));
    const bool megatron = framework == "megatron-lm" || framework == "megatron-core" || framework == "nemo";
    std::string recompute = megatron ? "selective" : "none";
    if (rc.rfind("full", 0) == 0) recompute = "full";
    if (rc.rfind("selective", 0) == 0) recompute = "selective";
    if (rc.rfind("none", 0) == 0) recompute = "none";
    // The attention as stated, else the framework's default (training.framework).
    const std::string fa = lower(cell("flash_attn"));
    std::string attention;
    // TorchTitan's is PyTorch SDPA's flash backend, FlashAttention-2 (its framework default).
    if (fa.rfind('y', 0) == 0) attention = framework == "torchtitan" ? ", attention: flash-v2" : ", attention: flash";
    // llm-foundry's benchmark tables were written (commits up to 5e85bd62d, January 2024)
    // while scripts/train/benchmarking/submit_benchmarks.py defaulted to --attn_impl triton,
    // MPT's Triton port of FlashAttention-1, and setup.py's gpu extra pinned flash-attn 1.0.x
    // (the second generation only in the separate gpu-flash2 extra): FlashAttention-1.
    if (fa.rfind('y', 0) == 0 && has(lower(cell("source")), "llm-foundry")) attention = ", attention: flash-v1";
    if (fa.rfind('n', 0) == 0) attention = ", attention: naive";
    // torch.compile where the row names it (TorchTitan's "FSDP + torch.compile").
    const bool compiled = has(lower(cell("notes") + " " + cell("measured")), "torch.compile");
    const std::string sp_cell = lower(cell("sp"));
    const bool sp = tp > 1 && (sp_cell.rfind('y', 0) == 0 ||
                               (sp_cell.rfind("unknown", 0) == 0 &&
                                megatron));
    // Sharding: FSDP / ZeRO-3 shard parameters, gradients and optimizer state; ZeRO-1 and
    // Megatron's distributed optimizer the optimizer state. FSDP2 sharding over fewer ranks
    // than dp is hybrid sharding.
    const std::string z = lower(cell("zero_fsdp"));
    int zero = 0;
    if (has(z, "fsdp") || has(z, "zero-3") || has(z, "zero3")) zero = 3;
    if (has(z, "zero-1") || has(z, "distributed optimizer")) zero = 1;
    int shard_group = 0;
    if (zero == 3) {
      if (const auto k = find_number(z, std::regex(R"((?:shard|dp_shard=)\s*([0-9]+))"))) {
        if (*k < dp) shard_group = static_cast<int>(*k);
      }
    }

    // The cluster: A100 (40 / 80 GB) in DGX A100 nodes, H100 in DGX H100; the NICs the row
    // states (count and speed), else the preset's.
    const std::string gpu = lower(cell("gpu_type"));
    std::string cluster = "dgx-a100", device = "a100-80gb";
    if (has(gpu, "h100")) {
      cluster = "dgx-h100";
      device = "h100-sxm";
    }
    if (has(gpu, "a100") && has(gpu, "40gb")) device = "a100-40gb";
    std::vector<std::string> sets;
    if (has(gpu, "h100") && has(gpu, "96gb")) sets.push_back("cluster.device.memory=96GiB");
    // A power cap the row states ("500W power limit"): the device's power_limit.
    if (const auto watts = find_number(cell("gpu_type"), std::regex(R"(([0-9]{3,4})\s*W\b)"))) {
      sets.push_back(fmt::format("cluster.device.power_limit={}W", *watts));
    }
    const std::string net = cell("interconnect");
    std::optional<double> nics, gbps;
    std::smatch m;
    if (std::regex_search(net, m, nics_speed)) {
      nics = std::stod(m[1].str());
      gbps = std::stod(m[2].str());
    } else if (const auto links = find_number(net, links_per_node)) {
      nics = *links;
      gbps = find_number(net, speed_each);
      if (!gbps) gbps = find_number(net, std::regex(R"(([0-9]+)\s*Gbps)"));
    } else if (const auto total = find_number(net, per_node_total)) {
      nics = per_node;
      gbps = *total / per_node;
    } else if (const auto each = find_number(net, per_gpu_speed)) {
      nics = per_node;
      gbps = *each;
    }
    if (nics && gbps) {
      sets.push_back(fmt::format("cluster.inter_node.nics_per_node={}", static_cast<int>(*nics)));
      sets.push_back(fmt::format("cluster.inter_node.nic_bandwidth={}Gb/s", *gbps));
    }

    // The measured step: an iteration time as printed, else tokens/s per GPU over the
    // step's tokens, else TFLOP/s per GPU over the model's FLOPs (measured_flops_rate:
    // the prediction's FLOPs per step divided by it, see predict_runs).
    const std::string measured = cell("measured");
    const double tokens = static_cast<double>(batch) * seq;
    if (const auto s = find_number(measured, iteration)) {
      r.measured = *s;
    } else if (const auto tps = find_number(measured, per_gpu_tokens)) {
      r.measured = tokens / (*tps * r.gpus);
    } else if (const auto titan = framework == "torchtitan" ? find_number(measured, titan_tokens) : std::nullopt) {
      r.measured = tokens / (*titan * r.gpus);
    } else if (const auto tf = find_number(measured, tflops)) {
      r.measured_flops_rate = *tf * 1e12;
    } else {
      throw scenario::ScenarioError(where, "measured",
                                    fmt::format("no iteration time, tokens/s/GPU or TFLOP/s in '{}'", measured));
    }

    static const std::regex logged_memory(R"(memory\s*:?\s*([0-9]+\.?[0-9]*)\s*GiB)", std::regex::icase);
    if (const auto gib = framework == "torchtitan" ? find_number(measured, logged_memory) : std::nullopt)
      r.measured_memory = *gib * 1024.0 * 1024.0 * 1024.0;

    r.dims = {{"gpus", r.gpus},     {"global batch", batch}, {"micro batch", micro}, {"hidden", hidden},
              {"heads", heads},     {"layers", layers},      {"seq", seq},           {"tp", tp},
              {"dp", dp},           {"pp", pp}};
    r.labels = {{"framework", framework}, {"gpu", device}, {"model", cell("model")}};
    r.yaml = fmt::format(
        "name: public-line-{}\n"
        "cluster: {{preset: {}, nodes: {}, gpus_per_node: {}, device: {}}}\n"
        "model: {{name: published, layers: {}, hidden: {}, heads: {}, kv_heads: {}, ffn_hidden: {}, vocab: {}, "
        "seq_len: {}, mlp: {}{}}}\n"
        "training: {{framework: {}, global_batch: {}, micro_batch: {}, precision: {}, recompute: {}{}{}}}\n"
        "plan: {{tp: {}, dp: {}, pp: {}, cp: {}, ep: {}, zero: {}{}{}{}}}\n",
        number, cluster, (r.gpus + per_node - 1) / per_node, per_node, device, layers, hidden, heads, kv_heads, ffn,
        padded, seq, mlp, experts ? fmt::format(", experts: {}, top_k: {}", moe[1].str(), moe[2].str()) : "", framework, batch,
        micro, precision, recompute, attention, compiled ? ", compile: true" : "", tp, dp, pp, cp, ep, zero, sp ? ", sequence_parallel: true" : "",
        vpp > 1 ? fmt::format(", schedule: interleaved-1f1b, virtual_stages: {}", vpp) : "",
        shard_group > 0 ? fmt::format(", shard_group: {}", shard_group) : "");
    r.overrides = std::move(sets);
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace parasim::sim
