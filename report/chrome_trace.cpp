#include "report/chrome_trace.hpp"

#include <nlohmann/json.hpp>

namespace parasim::report {

std::string chrome_trace_json(const Trace& trace, const plan::Program& program, const topology::Cluster& cluster) {
  using nlohmann::json;
  json events = json::array();
  for (int r = 0; r < trace.world; ++r) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
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
  // Link use as counters on a separate process: average utilisation over the step.
  const int links_pid = trace.world;
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", links_pid}, {"args", {{"name", "links"}}}});
  const double step = trace.step_seconds();
  for (const LinkUse& l : trace.links) {
    const double util = step > 0 ? l.bytes / (cluster.link(l.link).bandwidth * step) : 0.0;
    const std::string name = cluster.link_name(l.link);
    events.push_back({{"ph", "C"}, {"name", name}, {"pid", links_pid}, {"ts", 0.0}, {"args", {{"utilisation", util}}}});
    events.push_back({{"ph", "C"}, {"name", name}, {"pid", links_pid}, {"ts", step * 1e6}, {"args", {{"utilisation", 0.0}}}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"kind", trace.kind}}}};
  return doc.dump() + "\n";
}

}  // namespace parasim::report
