// Semantic checks of a loaded scenario: constraints between keys that no single key's
// reader can see. Each failure points at the key that is most useful to change:
//   * dp x tp x pp must not exceed the cluster's devices              (plan.dp)
//   * hidden divisible by heads; heads, kv_heads, hidden and the MLP width divisible by tp
//   * layers divisible by pp x virtual_stages (generic models: at least that many layers)
//   * global_batch divisible by dp x micro_batch                        (training.global_batch)
//   * interleaved 1F1B: virtual_stages >= 2, pp >= 2, micro-batches a multiple of pp;
//     virtual_stages > 1 only with the interleaved schedule
//   * tensor and sequence parallelism only for transformer models
//   * sequence parallelism: seq_len divisible by tp
//   * the device supports the training precision; kv_heads <= heads
#pragma once

#include <string>

#include "scenario/diagnostics.hpp"
#include "scenario/scenario.hpp"

namespace parasim::scenario {

void check(const Scenario& s);  // throws ScenarioError

// Whether tensor-parallel communication overlap applies to the plan as check() allows it: a
// transformer without experts or latent attention, tp > 1 with sequence parallelism, no
// context parallelism, each tp group inside one node (Transformer Engine's userbuffers).
bool tp_overlap_possible(const Scenario& s);

// Where `key` was set in `s` (a defaulted key: its section), for an error about it found
// after loading.
Location key_location(const Scenario& s, const std::string& key);

// The key behind most of the simulated step's ops, and what to do about it: model.layers
// where layers outnumber micro-batches, else training.global_batch ("lower ... or raise
// training.micro_batch"). For the op limit's errors (check, program::ProgramTooLarge).
struct SizeKey {
  std::string key;
  std::string advice;
};
SizeKey program_size_key(const Scenario& s);

}  // namespace parasim::scenario
