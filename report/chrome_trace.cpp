#include "report/chrome_trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace parasim::report {

std::string chrome_trace_json(const Trace& trace, const plan::Program& program, const topology::Cluster& cluster) {
  using nlohmann::json;
  json events = json::array();
  for (int r = 0; r < trace.world; ++r) {
    if (trace.mirror(r) != r) continue;  // folded: only replica 0's ranks have spans
    const std::string name = trace.folded() ? fmt::format("rank {} (and its data-parallel replicas)", r) : fmt::format("rank {}", r);
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"args", {{"name", name}}}});
    for (int s = 0; s < plan::stream_count; ++s) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", r},
                        {"tid", s},
                        {"args", {{"name", std::string(plan::to_string(static_cast<plan::Stream>(s)))}}}});
    }
  }
  for (const Span& sp : trace.spans) {
    json args = {{"category", std::string(plan::to_string(sp.category))}};
    if (sp.micro_batch >= 0) args["micro_batch"] = sp.micro_batch;
    const plan::Op& op = program.ops[static_cast<std::size_t>(sp.op)];
    if (op.flops > 0) args["flops"] = op.flops;
    if (op.bytes > 0) args["bytes"] = op.bytes;
    events.push_back({{"ph", "X"},
                      {"name", plan::op_name(program, sp.op)},
                      {"cat", std::string(plan::to_string(sp.category))},
                      {"pid", sp.rank},
                      {"tid", static_cast<int>(sp.stream)},
                      {"ts", static_cast<double>(sp.start) * 1e-6},
                      {"dur", static_cast<double>(sp.end - sp.start) * 1e-6},
                      {"args", args}});
  }
  // Counters: memory on each rank's process, link utilisation on a "links" process. A
  // trace without counters over time shows each busy link's mean utilisation instead.
  const int links_pid = trace.world;
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", links_pid}, {"args", {{"name", "links"}}}});
  bool link_counters = false;
  for (const Counter& c : trace.counters) {
    const bool memory = c.rank >= 0;
    link_counters = link_counters || !memory;
    for (const auto& [t, v] : c.samples) {
      json args = memory ? json{{"GiB", v / (1024.0 * 1024 * 1024)}} : json{{"utilisation", v}};
      events.push_back({{"ph", "C"}, {"name", c.name}, {"pid", memory ? c.rank : links_pid}, {"ts", static_cast<double>(t) * 1e-6},
                        {"args", args}});
    }
  }
  const double step = trace.step_seconds();
  if (!link_counters) {
    for (const LinkUse& l : trace.links) {
      const double util = step > 0 ? l.bytes / (cluster.link(l.link).bandwidth * step) : 0.0;
      const std::string name = cluster.link_name(l.link);
      events.push_back({{"ph", "C"}, {"name", name}, {"pid", links_pid}, {"ts", 0.0}, {"args", {{"utilisation", util}}}});
      events.push_back({{"ph", "C"}, {"name", name}, {"pid", links_pid}, {"ts", step * 1e6}, {"args", {{"utilisation", 0.0}}}});
    }
  }
  json other = {{"kind", trace.kind}};
  if (!trace.model.empty()) other["model"] = trace.model;
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  return doc.dump() + "\n";
}

}  // namespace parasim::report
