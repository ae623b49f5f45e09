// Megatron-LM's pretrain_gpt.py arguments read back as a scenario's settings: the inverse
// of `parasim export --megatron` (cli/export.cpp), for a plan that already runs.
//
// The text is a command line as a shell would take it: arguments separated by blanks,
// lines joined by a trailing backslash, quotes grouping, '#' starting a comment; a
// launcher's words before them (torchrun, python, the script) are skipped, and torchrun's
// --nnodes and --nproc-per-node give the GPU count. Arguments that set nothing parasim
// models (--train-iters, --save, --data-path, ...) are listed, not refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parasim::scenario {

struct MegatronImport {
  std::vector<std::string> sets;     // KEY=VALUE as --set takes them: model.*, training.*, plan.*
  int tp = 1, pp = 1, cp = 1;        // the model-parallel sizes (dp is what the GPUs leave)
  int gpus = 0;                      // torchrun's nnodes x nproc-per-node; 0 when not given
  std::vector<std::string> ignored;  // arguments that set nothing parasim models
  std::vector<std::string> notes;    // what was read approximately, or left at a default
};

// Throws ScenarioError naming `source`, the line and column, and the argument, for a value
// that is not what the argument takes, a missing value, or a model left incomplete (no
// --num-layers, --hidden-size, --num-attention-heads, --seq-length or --vocab-size).
MegatronImport read_megatron_arguments(std::string_view text, const std::string& source);

}  // namespace parasim::scenario
