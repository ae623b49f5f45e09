// The report tests' scenario: a small GPT on one 8 x H100 node, dp 2 x tp 2 x pp 2, so that
// a trace has every stream (tp, pp and dp communication beside compute) and is quick.
#pragma once

#include "scenario/load.hpp"

namespace parasim::test {

inline scenario::Scenario pipeline_scenario() {
  return scenario::load_text(R"(cluster: {preset: hgx-h100}
model: {layers: 4, hidden: 512, heads: 8, vocab: 1000, seq_len: 256}
training: {global_batch: 8}
plan: {tp: 2, pp: 2, dp: 2}
)",
                             "t.yaml");
}

}  // namespace parasim::test
