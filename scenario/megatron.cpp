#include "scenario/megatron.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "scenario/diagnostics.hpp"

namespace parasim::scenario {
namespace {

struct Token {
  std::string text;
  int line = 1, column = 1;
};

// Splits as a shell would: blanks separate, a backslash before a line break joins the
// lines, quotes group (and are dropped), '#' at a word's start comments to the line's end.
std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> out;
  int line = 1, column = 1;
  bool in_word = false;
  char quote = 0;
  auto advance = [&](char c) {
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (quote == '"' && c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {  // a line join inside "..."
        ++i;
        ++line;
        column = 1;
        continue;
      }
      if (c == quote) {
        quote = 0;
      } else {
        out.back().text += c;
      }
      advance(c);
      continue;
    }
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      ++i;
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      column = 1;
      in_word = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      in_word = false;
      advance(c);
      continue;
    }
    if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (!in_word) {
      out.push_back({{}, line, column});
      in_word = true;
    }
    if (c == '\'' || c == '"') {
      quote = c;
    } else {
      out.back().text += c;
    }
    advance(c);
  }
  return out;
}

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// A launch script's own variables, as bash would expand them where Megatron-LM's examples
// use them: NAME=value (or `export NAME=value`) sets, $NAME, ${NAME} and ${NAME:-default}
// expand to the value last set before the use (an unset one to its default, or is left as
// written), and a word that was only a variable splits at blanks as an unquoted expansion
// does. Arrays (`ARGS=( --num-layers 24 ... )`, used as `${ARGS[@]}`) need nothing: their
// words are read where they are written.
std::vector<Token> expand(const std::vector<Token>& tokens) {
  std::map<std::string, std::string> vars;
  std::vector<Token> out;
  auto substitute = [&](const std::string& word) {
    std::string result;
    for (std::size_t i = 0; i < word.size();) {
      if (word[i] != '$' || i + 1 >= word.size()) {
        result += word[i++];
        continue;
      }
      std::string name, fallback;
      bool has_fallback = false;
      std::size_t end = i + 1;
      if (word[end] == '{') {
        const std::size_t close = word.find('}', end);
        if (close == std::string::npos) {
          result += word.substr(i);
          break;
        }
        std::string inner = word.substr(end + 1, close - end - 1);
        if (const auto dash = inner.find(":-"); dash != std::string::npos) {
          fallback = inner.substr(dash + 2);
          has_fallback = true;
          inner.resize(dash);
        }
        name = inner;
        end = close + 1;
      } else {
        while (end < word.size() && name_char(word[end])) name += word[end++];
      }
      if (const auto v = vars.find(name); v != vars.end() && !name.empty()) {
        result += v->second;
      } else if (has_fallback) {
        result += fallback;
      } else {
        result += word.substr(i, end - i);  // unknown ($1, an array, the environment's): as written
      }
      i = std::max(end, i + 1);
    }
    return result;
  };
  for (const Token& t : tokens) {
    const std::string text = substitute(t.text);
    const auto eq = t.text.find('=');
    if (eq != std::string::npos && eq > 0 && !t.text.starts_with("-") &&
        std::all_of(t.text.begin(), t.text.begin() + static_cast<std::ptrdiff_t>(eq), name_char) &&
        std::isdigit(static_cast<unsigned char>(t.text[0])) == 0) {
      const std::string value = substitute(t.text.substr(eq + 1));
      if (value != "(") vars[t.text.substr(0, eq)] = value;  // an array's opening: its words follow
      continue;
    }
    if (text != t.text && t.text.starts_with("$") && text.find_first_of(" \t\n") != std::string::npos) {
      for (const Token& w : tokenize(text)) out.push_back({w.text, t.line, t.column});
      continue;
    }
    out.push_back({text, t.line, t.column});
  }
  return out;
}

// The vocabulary a tokenizer fixes, before Megatron pads it; 0 where it is not known here.
// GPT-2's BPE 50,257; Llama 2's and Mistral's SentencePiece 32,000; Llama 3's tiktoken
// 128,256 (the Hugging Face names of each).
int tokenizer_vocabulary(const std::string& type, const std::string& model) {
  if (type == "GPT2BPETokenizer") return 50257;
  if (type == "Llama2Tokenizer") return 32000;
  if (type == "HuggingFaceTokenizer" || type == "GPTSentencePieceTokenizer" || type == "SentencePieceTokenizer") {
    std::string m = model;
    std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (m.find("llama-3") != std::string::npos || m.find("llama3") != std::string::npos) return 128256;
    if (m.find("llama-2") != std::string::npos || m.find("llama2") != std::string::npos ||
        m.find("mistral") != std::string::npos || m.find("mixtral") != std::string::npos) {
      return 32000;
    }
    if (m.find("gpt2") != std::string::npos) return 50257;
  }
  return 0;
}

}  // namespace

MegatronImport read_megatron_arguments(std::string_view text, const std::string& source) {
  MegatronImport r;
  const std::vector<Token> tokens = expand(tokenize(text));
  auto fail = [&](const Token& at, const std::string& arg, const std::string& what) -> ScenarioError {
    return ScenarioError({source, at.line, at.column}, arg, what);
  };
  std::map<std::string, std::string> seen;  // argument -> value ("" for a flag)
  std::map<std::string, Token> where;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (!t.text.starts_with("--")) continue;  // the launcher and the script, or a stray word
    std::string name = t.text;
    std::string value;
    bool has_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    } else if (i + 1 < tokens.size() && !tokens[i + 1].text.starts_with("--") && tokens[i + 1].text != ")" &&
               tokens[i + 1].text != "(") {  // an array's parentheses are no values
      value = tokens[++i].text;
      has_value = true;
    }
    // torchrun and Megatron spell some with '_' as well as '-'.
    std::replace(name.begin() + 2, name.end(), '_', '-');
    seen[name] = has_value ? value : std::string();
    where[name] = t;
  }
  auto integer = [&](const std::string& arg) -> int {
    const std::string& v = seen.at(arg);
    int out = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || end != v.data() + v.size() || out < 0) {
      throw fail(where.at(arg), arg,
                 fmt::format("expected a whole number, got '{}'{}", v,
                             v.starts_with("$") ? " (a variable this script does not set: give its value)" : ""));
    }
    return out;
  };
  auto real = [&](const std::string& arg) -> double {
    const std::string& v = seen.at(arg);
    char* end = nullptr;
    const double out = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(out)) {
      throw fail(where.at(arg), arg, fmt::format("expected a number, got '{}'", v));
    }
    return out;
  };
  auto has = [&](const std::string& arg) { return seen.count(arg) > 0; };
  auto set = [&](const std::string& key, const std::string& value) { r.sets.push_back(key + "=" + value); };
  std::map<std::string, bool> used;
  auto take = [&](const std::string& arg) {
    used[arg] = true;
    return has(arg);
  };
  auto count = [&](const std::string& arg, const std::string& key) {
    if (take(arg)) set(key, std::to_string(integer(arg)));
  };

  // The model.
  for (const char* required : {"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length"}) {
    if (!has(required)) {
      throw ScenarioError({source, 0, 0}, required,
                          "missing: the model needs it (parasim export --megatron writes it)");
    }
  }
  const int layers = integer("--num-layers");
  count("--num-layers", "model.layers");
  count("--hidden-size", "model.hidden");
  count("--ffn-hidden-size", "model.ffn_hidden");
  count("--num-attention-heads", "model.heads");
  take("--group-query-attention");
  count("--num-query-groups", "model.kv_heads");
  count("--seq-length", "model.seq_len");
  take("--max-position-embeddings");
  const std::string tokenizer = has("--tokenizer-type") ? seen.at("--tokenizer-type")
                                : has("--merge-file")    ? "GPT2BPETokenizer"  // a BPE merges file: GPT-2's
                                                         : "";
  const std::string tokenizer_model = has("--tokenizer-model") ? seen.at("--tokenizer-model") : "";
  if (take("--vocab-size")) {
    set("model.vocab", std::to_string(integer("--vocab-size")));
  } else if (const int words = tokenizer_vocabulary(tokenizer, tokenizer_model); words > 0) {
    // Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by (128)
    // times tp, so each tp rank's share of the embedding is even
    // (megatron/training/tokenizer/tokenizer.py, _vocab_size_with_padding).
    const int tp = take("--tensor-model-parallel-size") ? integer("--tensor-model-parallel-size") : 1;
    const int divisible = take("--make-vocab-size-divisible-by") ? integer("--make-vocab-size-divisible-by") : 128;
    const long long multiple = static_cast<long long>(std::max(1, divisible)) * std::max(1, tp);
    const long long padded = (words + multiple - 1) / multiple * multiple;
    set("model.vocab", std::to_string(padded));
    r.notes.push_back(fmt::format("{}{}: vocabulary {} padded to {} (a multiple of {} x tp {})", tokenizer,
                                  tokenizer_model.empty() ? "" : " " + tokenizer_model, words, padded,
                                  std::max(1, divisible), std::max(1, tp)));
  } else {
    throw ScenarioError({source, 0, 0}, "--vocab-size",
                        tokenizer.empty()
                            ? "missing: give the vocabulary's size, or the tokenizer (--tokenizer-type, --tokenizer-model)"
                            : fmt::format("missing: the vocabulary of {}{} is not known here; give --vocab-size", tokenizer,
                                          tokenizer_model.empty() ? "" : " " + tokenizer_model));
  }
  take("--tokenizer-type");
  take("--tokenizer-model");
  take("--vocab-file");
  take("--merge-file");
  if (take("--swiglu")) set("model.mlp", "swiglu");
  for (const char* implied :
       {"--normalization", "--position-embedding-type", "--disable-bias-linear", "--use-rotary-position-embeddings"}) {
    take(implied);  // what the mlp form implies in parasim's model (RMSNorm, rotary, no biases with swiglu)
  }
  if (take("--untie-embeddings-and-output-weights")) set("model.tie_embeddings", "false");
  take("--attention-dropout");
  if (take("--hidden-dropout")) set("model.dropout", fmt::format("{:g}", real("--hidden-dropout")));
  if (take("--multi-latent-attention")) {
    count("--kv-lora-rank", "model.kv_lora_rank");
    count("--q-lora-rank", "model.q_lora_rank");
    count("--qk-head-dim", "model.qk_nope_head_dim");
    count("--qk-pos-emb-head-dim", "model.qk_rope_head_dim");
    count("--v-head-dim", "model.v_head_dim");
  }
  count("--num-experts", "model.experts");
  count("--moe-router-topk", "model.top_k");
  count("--moe-ffn-hidden-size", "model.expert_ffn_hidden");
  count("--moe-shared-expert-intermediate-size", "model.shared_expert_ffn_hidden");
  take("--moe-token-dispatcher-type");
  take("--moe-grouped-gemm");
  if (take("--moe-expert-capacity-factor"))
    set("model.capacity_factor", fmt::format("{:g}", real("--moe-expert-capacity-factor")));
  if (take("--moe-layer-freq")) {
    static const std::regex dense_first(R"(^\(?\[0\]\*(\d+)\+\[1\]\*(\d+)\)?$)");
    const std::string& v = seen.at("--moe-layer-freq");
    std::smatch m;
    if (v == "1") {
      // every layer has experts: the default
    } else if (std::regex_match(v, m, dense_first) && m[1].length() <= 9 && m[2].length() <= 9 &&
               std::stoll(m[1]) + std::stoll(m[2]) == layers) {  // digits past 9 overflow std::stoi
      set("model.dense_layers", m[1]);
    } else {
      throw fail(
          where.at("--moe-layer-freq"), "--moe-layer-freq",
          fmt::format("expected 1 or '([0]*D+[1]*M)' with D + M = {} layers (the first D dense), got '{}'", layers, v));
    }
  }

  // Batch, precision, the optimizer; the framework is Megatron-LM's training loop.
  set("training.framework", "megatron-lm");
  count("--micro-batch-size", "training.micro_batch");
  count("--global-batch-size", "training.global_batch");
  if (take("--fp8-format")) {
    set("training.precision", "fp8");
    if (take("--fp8-recipe")) {
      const std::string& v = seen.at("--fp8-recipe");
      if (v != "delayed" && v != "tensorwise") {
        throw fail(where.at("--fp8-recipe"), "--fp8-recipe",
                   fmt::format("expected delayed or tensorwise, got '{}'", v));
      }
      set("training.fp8_recipe", v == "delayed" ? "delayed" : "current");
    }
    take("--bf16");
  } else if (take("--bf16")) {
    set("training.precision", "bf16");
  } else if (take("--fp16")) {
    set("training.precision", "fp16");
    if (take("--initial-loss-scale")) set("training.loss_scale", fmt::format("{:g}", real("--initial-loss-scale")));
  } else {
    set("training.precision", "fp32");
    r.notes.push_back("neither --bf16 nor --fp16: fp32 (PyTorch may run the matmuls in TF32)");
  }
  take("--fp8-recipe");
  if (take("--use-flash-attn")) set("training.attention", "flash");
  if (take("--recompute-granularity")) {
    const std::string& v = seen.at("--recompute-granularity");
    if (v != "selective" && v != "full") {
      throw fail(where.at("--recompute-granularity"), "--recompute-granularity",
                 fmt::format("expected selective or full, got '{}'", v));
    }
    set("training.recompute", v);
    // Full recompute of some layers only: --recompute-method block recomputes the first N
    // layers of each stage (uniform: every layer, in groups of N). parasim recomputes every
    // layer or none: said, not hidden.
    if (v == "full" && take("--recompute-method") && seen.at("--recompute-method") == "block" &&
        take("--recompute-num-layers")) {
      const int per_stage = layers / std::max(1, has("--pipeline-model-parallel-size")
                                                     ? integer("--pipeline-model-parallel-size")
                                                     : 1);
      const int n = integer("--recompute-num-layers");
      if (n < per_stage) {
        r.notes.push_back(fmt::format("--recompute-method block --recompute-num-layers {}: {} of each stage's {} layers "
                                      "recomputed; predicted as full recompute of every layer (an upper bound on "
                                      "the time, a lower one on the memory)",
                                      n, n, per_stage));
      }
    }
  } else if (take("--recompute-activations")) {
    set("training.recompute", "selective");  // Megatron: --recompute-activations is selective granularity
  }
  take("--recompute-activations");
  take("--recompute-method");
  take("--recompute-num-layers");
  if (take("--optimizer")) {
    const std::string& v = seen.at("--optimizer");
    if (v != "adam" && v != "sgd")
      throw fail(where.at("--optimizer"), "--optimizer", fmt::format("expected adam or sgd, got '{}'", v));
    set("training.optimizer", v == "adam" ? "adamw" : "sgd");
  }
  if (take("--lr")) set("training.learning_rate", fmt::format("{:g}", real("--lr")));

  // The plan.
  if (take("--tensor-model-parallel-size")) r.tp = integer("--tensor-model-parallel-size");
  if (take("--pipeline-model-parallel-size")) r.pp = integer("--pipeline-model-parallel-size");
  if (take("--context-parallel-size")) r.cp = integer("--context-parallel-size");
  set("plan.tp", std::to_string(r.tp));
  set("plan.pp", std::to_string(r.pp));
  if (r.cp > 1) set("plan.cp", std::to_string(r.cp));
  count("--expert-model-parallel-size", "plan.ep");
  if (take("--virtual-pipeline-model-parallel-size")) {
    const int v = integer("--virtual-pipeline-model-parallel-size");
    if (v < 1 || r.pp < 2 || layers % (v * r.pp) != 0) {
      throw fail(where.at("--virtual-pipeline-model-parallel-size"), "--virtual-pipeline-model-parallel-size",
                 fmt::format("expected a count of chunks that divides {} layers / {} stages (and a pipeline), got {}",
                             layers, r.pp, v));
    }
    set("plan.virtual_stages", std::to_string(v));
    set("plan.schedule", v > 1 ? "interleaved-1f1b" : "1f1b");
    take("--num-layers-per-virtual-pipeline-stage");
  } else if (take("--num-layers-per-virtual-pipeline-stage")) {
    const int per = integer("--num-layers-per-virtual-pipeline-stage");
    if (per == 0 || layers % (per * r.pp) != 0) {
      throw fail(where.at("--num-layers-per-virtual-pipeline-stage"), "--num-layers-per-virtual-pipeline-stage",
                 fmt::format("expected a divisor of {} layers / {} stages, got {}", layers, r.pp, per));
    }
    set("plan.virtual_stages", std::to_string(layers / (per * r.pp)));
    set("plan.schedule", "interleaved-1f1b");
  } else if (r.pp > 1) {
    set("plan.schedule", "1f1b");
  }
  if (take("--sequence-parallel")) set("plan.sequence_parallel", "true");
  if (take("--tp-comm-overlap")) set("plan.tp_comm_overlap", "true");
  if (take("--use-torch-fsdp2")) {
    set("plan.zero", "3");
  } else if (take("--use-distributed-optimizer")) {
    set("plan.zero", "1");
  }
  take("--use-distributed-optimizer");
  if (take("--overlap-grad-reduce")) set("plan.overlap_dp", "true");
  if (take("--overlap-param-gather")) set("plan.overlap_param_gather", "true");
  if (take("--ddp-bucket-size")) {
    // Elements of the main gradients (fp32, 4 bytes, as Megatron-LM accumulates them).
    set("plan.bucket_size", fmt::format("{}B", static_cast<long long>(integer("--ddp-bucket-size")) * 4));
  }
  if (take("--optimizer-cpu-offload")) set("plan.offload_optimizer", "true");
  if (take("--cpu-offloading")) set("plan.offload_activations", "true");
  take("--cpu-offloading-num-layers");

  // torchrun's, for the GPU count.
  const int nodes = take("--nnodes") ? integer("--nnodes") : 0;
  const int per_node = take("--nproc-per-node") ? integer("--nproc-per-node") : 0;
  if (nodes > 0 && per_node > 0) r.gpus = nodes * per_node;
  for (const char* launcher : {"--node-rank", "--master-addr", "--master-port", "--rdzv-backend", "--rdzv-endpoint",
                               "--rdzv-id", "--standalone"}) {
    take(launcher);
  }
  for (const auto& [name, value] : seen) {
    if (!used.count(name)) r.ignored.push_back(value.empty() ? name : name + " " + value);
  }
  return r;
}

}  // namespace parasim::scenario
