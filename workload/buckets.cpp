#include "workload/buckets.hpp"

#include <algorithm>

#include "scenario/model.hpp"
#include "workload/schedule.hpp"

namespace parasim::workload {

std::vector<GradientSource> gradient_sources(const scenario::Scenario& s, int stage, bool head, bool embedding) {
  const scenario::ModelSpec& m = s.model;
  const scenario::ParallelPlan& p = s.plan;
  const bool transformer = m.kind == scenario::ModelKind::transformer;
  const double word = transformer ? static_cast<double>(m.vocab) * m.hidden / p.tp : 0.0;
  // The last stage also holds the final norm, the first the learned positions (GPT), both
  // whole on every tp rank.
  const double final_norm = transformer ? 2.0 * m.hidden : 0.0;
  const double positions =
      transformer && m.mlp == scenario::Mlp::gelu ? static_cast<double>(m.seq_len) * m.hidden : 0.0;
  std::vector<GradientSource> sources;
  if (head) {
    const bool own_head = !m.tie_embeddings || p.pp > 1;
    sources.push_back({(own_head ? word : 0.0) + final_norm, m.layer_count()});
  }
  std::vector<int> layers;
  for (int c = 0; c < p.virtual_stages; ++c) {
    const auto [first, last] = chunk_layers(m.layer_count(), p.pp, p.virtual_stages, stage, c);
    for (int l = first; l < last; ++l) layers.push_back(l);
  }
  std::sort(layers.rbegin(), layers.rend());
  const double experts = p.ep > 1 ? expert_params_on_rank(m, p.tp, p.ep) : 0.0;
  for (int l : layers) sources.push_back({layer_params_on_rank(m, l, p.tp, p.ep), l, m.moe_layer(l) ? experts : 0.0});
  if (embedding) sources.push_back({word + positions, -1});
  return sources;
}

std::vector<GradientSource> split_experts(std::vector<GradientSource>& sources) {
  std::vector<GradientSource> experts;
  for (GradientSource& g : sources) {
    if (g.experts <= 0.0) continue;
    experts.push_back({g.experts, g.layer, g.experts});
    g.params -= g.experts;
  }
  return experts;
}

double optimizer_shard_params(const scenario::ParallelPlan& p, double params, double experts) {
  if (p.zero == 0) return params;
  return (params - experts) / p.shard_size() + experts / p.expert_grad_ranks();
}

std::vector<GradientBucket> gradient_buckets(const std::vector<GradientSource>& sources, double bytes_per_param,
                                             double bucket_bytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket b;
  bool open = false;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (!open) {
      b.above = sources[i].layer + 1;
      b.first = i;
      open = true;
    }
    b.lowest = sources[i].layer;
    b.params += sources[i].params;
    if (b.params * bytes_per_param < bucket_bytes && i + 1 < sources.size()) continue;
    b.end = i + 1;
    buckets.push_back(b);
    b = GradientBucket{};
    open = false;
  }
  return buckets;
}

}  // namespace parasim::workload
