// parasim topo SCENARIO: the cluster graph summarised, a route traced, Graphviz written.
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "report/table.hpp"
#include "topology/analysis.hpp"
#include "topology/dot.hpp"
#include "topology/routing.hpp"
#include "topology/units.hpp"

namespace parasim::cli {
namespace {

struct TopoArgs {
  ScenarioArgs scenario;
  JsonOption json;
  std::string dot;
  std::vector<int> route;
};

nlohmann::ordered_json route_json(const topology::Cluster& c, const topology::Route& r) {
  nlohmann::ordered_json hops = nlohmann::ordered_json::array();
  for (int id : r.links) hops.push_back(c.link_name(id));
  return {{"links", hops}, {"bottleneck", r.bottleneck}, {"latency", r.latency}};
}

void run_topo(const TopoArgs& a) {
  namespace u = units;
  const scenario::Scenario s = a.scenario.load();
  const topology::Cluster cluster(s.cluster);
  if (!a.route.empty()) {
    for (int r : a.route) {
      if (r < 0 || r >= cluster.gpu_count()) {
        throw UsageError(fmt::format("--route {}: the cluster has devices 0 to {}", r, cluster.gpu_count() - 1));
      }
    }
  }
  const topology::TopologySummary sum = topology::summarize(cluster);
  std::string dot;
  if (!a.dot.empty()) {
    std::ostringstream out;
    topology::write_dot(out, cluster);
    dot = out.str();
  }
  topology::Router router(cluster);
  const topology::Route* route = a.route.empty() ? nullptr : &router.route(a.route[0], a.route[1]);

  if (a.json.wanted()) {
    nlohmann::ordered_json j = {{"cluster", sum.name},
                                {"nodes", sum.nodes},
                                {"devices", sum.gpus},
                                {"devices_per_node", sum.gpus_per_node},
                                {"device", s.cluster.device.name},
                                {"vertices", sum.vertices_by_kind},
                                {"links", nlohmann::ordered_json::object()},
                                {"injection_bandwidth", {{"intra_node", sum.injection_intra}, {"inter_node", sum.injection_inter}}},
                                {"bisection_bandwidth", sum.bisection}};
    for (const auto* group : {&sum.links_by_class, &sum.links_by_kind}) {
      for (const auto& [name, l] : *group) {
        j["links"][name] = {{"count", l.links}, {"total_bandwidth", l.total_bandwidth},
                            {"min_bandwidth", l.min_bandwidth}, {"max_bandwidth", l.max_bandwidth}};
      }
    }
    if (route != nullptr) j["route"] = route_json(cluster, *route);
    write_output(a.json.path, stamped("topo", j).dump(2) + "\n");
  }
  if (!a.json.on_stdout()) {
    fmt::print("cluster {}: {} node(s) x {} {} = {} devices\n", sum.name, sum.nodes, sum.gpus_per_node,
               s.cluster.device.name, sum.gpus);
    std::string kinds;
    for (const auto& [k, n] : sum.vertices_by_kind) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
    fmt::print("vertices: {}\n\n", kinds);
    using A = report::Table::Align;
    report::Table t({"links", "count", "each way", "total each way"}, {A::left, A::right, A::right, A::right});
    auto each = [](const topology::LinkClassSummary& l) {
      return l.min_bandwidth == l.max_bandwidth
                 ? u::format_bandwidth(l.min_bandwidth)
                 : u::format_bandwidth(l.min_bandwidth) + " - " + u::format_bandwidth(l.max_bandwidth);
    };
    for (const auto& [name, l] : sum.links_by_kind) {
      t.add_row({"  " + name, std::to_string(l.links), each(l), u::format_bandwidth(l.total_bandwidth)});
    }
    for (const auto& [name, l] : sum.links_by_class) {
      t.add_row({name, std::to_string(l.links), each(l), u::format_bandwidth(l.total_bandwidth)});
    }
    fmt::print("{}\n", t.render());
    if (s.cluster.intra.efficiency < 1.0 || s.cluster.inter.efficiency < 1.0) {
      fmt::print("(usable rates: the links' datasheet rates x the share transfers carry as data, intra-node {:.3g}, "
                 "inter-node {:.3g})\n",
                 s.cluster.intra.efficiency, s.cluster.inter.efficiency);
    }
    fmt::print("injection bandwidth per device: {} intra-node, {} inter-node\n", u::format_bandwidth(sum.injection_intra),
               sum.injection_inter > 0 ? u::format_bandwidth(sum.injection_inter) : std::string("none (one node)"));
    auto span = [](int lo, int hi) { return lo == hi ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi); };
    if (sum.gpus > 1) {
      fmt::print("bisection bandwidth: {} (devices {} to {}, one direction)\n", u::format_bandwidth(sum.bisection),
                 span(0, sum.gpus / 2 - 1), span(sum.gpus / 2, sum.gpus - 1));
    }
    if (route != nullptr) {
      fmt::print("\nroute {} -> {}: {} hops, bottleneck {}, latency {}\n", a.route[0], a.route[1], route->links.size(),
                 u::format_bandwidth(route->bottleneck), u::format_duration(route->latency));
      for (int id : route->links) {
        fmt::print("  {:<40} {:>10}  {}\n", cluster.link_name(id), u::format_bandwidth(cluster.link(id).bandwidth),
                   topology::to_string(cluster.link(id).kind));
      }
    }
  }
  if (!a.dot.empty()) write_output(a.dot, dot);
}

}  // namespace

void add_topo(CLI::App& app) {
  auto args = std::make_shared<TopoArgs>();
  CLI::App* cmd = app.add_subcommand("topo", "Summarise the cluster graph: links, injection and bisection bandwidth");
  args->scenario.add_to(*cmd);
  args->json.add_to(*cmd, "The cluster, its links and the route");
  cmd->add_option("--dot", args->dot, "Write the graph in Graphviz format to FILE ('-' for standard output)")
      ->type_name("FILE")
      ->check(output_file());
  cmd->add_option("--route", args->route, "Trace the route from device A to device B")->expected(2)->type_name("A B");
  cmd->callback([args] { run_topo(*args); });
}

}  // namespace parasim::cli
