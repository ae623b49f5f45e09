#include "topology/analysis.hpp"

#include <cmath>
#include <cstdint>

#include <boost/graph/push_relabel_max_flow.hpp>

namespace parasim::topology {
namespace {

double nic_uplink(const Cluster& c, VertexId nic) {
  double up = 0.0;
  for (auto e : boost::make_iterator_range(boost::out_edges(nic, c.graph()))) {
    if (c.graph()[e].cls == LinkClass::inter) up += c.graph()[e].bandwidth;
  }
  return up;
}

}  // namespace

double intra_injection_bandwidth(const Cluster& c, int rank) {
  const Graph& g = c.graph();
  double sum = 0.0;
  for (auto e : boost::make_iterator_range(boost::out_edges(c.gpu(rank), g))) {
    if (g[boost::target(e, g)].kind != VertexKind::nic && g[e].kind != LinkKind::host) sum += g[e].bandwidth;
  }
  return sum;
}

double inter_injection_bandwidth(const Cluster& c, int rank) {
  const Graph& g = c.graph();
  const int node = c.node_of(rank);
  double sum = 0.0;
  for (auto v : boost::make_iterator_range(boost::vertices(g))) {
    if (g[v].kind != VertexKind::nic || g[v].node != node) continue;
    double attach = 0.0;
    for (auto e : boost::make_iterator_range(boost::in_edges(v, g))) {
      if (g[e].cls == LinkClass::intra) attach += g[e].bandwidth;
    }
    sum += std::min(attach, nic_uplink(c, v));
  }
  return sum / c.spec().gpus_per_node;
}

double bisection_bandwidth(const Cluster& c) {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  struct FlowEdge {
    std::int64_t capacity = 0;
    std::int64_t residual = 0;
    Traits::edge_descriptor reverse;
  };
  using FlowGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, FlowEdge>;

  const int n = c.gpu_count();
  if (n < 2) return 0.0;
  // Capacities in KB/s as integers: exact, and 16k devices x 1 TB/s stays far below 2^63.
  constexpr double unit = 1e3;
  const auto cap = [](double bw) { return static_cast<std::int64_t>(std::llround(bw / unit)); };

  const Graph& g = c.graph();
  FlowGraph f(boost::num_vertices(g) + 2);
  const auto source = boost::num_vertices(g);
  const auto sink = source + 1;
  auto add = [&f](std::size_t a, std::size_t b, std::int64_t capacity) {
    auto e = boost::add_edge(a, b, f).first;
    auto r = boost::add_edge(b, a, f).first;
    f[e].capacity = capacity;
    f[r].capacity = 0;
    f[e].reverse = r;
    f[r].reverse = e;
  };
  for (auto e : boost::make_iterator_range(boost::edges(g))) {
    if (g[e].kind == LinkKind::host) continue;  // offload copies' links, not between devices
    add(boost::source(e, g), boost::target(e, g), cap(g[e].bandwidth));
  }
  // Super edges carry a device's own total link capacity: never the binding cut, and
  // small enough that Boost's sum of the source's capacities cannot overflow.
  for (int r = 0; r < n; ++r) {
    const VertexId v = c.gpu(r);
    std::int64_t total = 0;
    if (r < n / 2) {
      for (auto e : boost::make_iterator_range(boost::out_edges(v, g))) total += cap(g[e].bandwidth);
      add(source, v, total);
    } else {
      for (auto e : boost::make_iterator_range(boost::in_edges(v, g))) total += cap(g[e].bandwidth);
      add(v, sink, total);
    }
  }
  const std::int64_t flow = boost::push_relabel_max_flow(
      f, source, sink, boost::get(&FlowEdge::capacity, f), boost::get(&FlowEdge::residual, f),
      boost::get(&FlowEdge::reverse, f), boost::get(boost::vertex_index, f));
  return static_cast<double>(flow) * unit;
}

TopologySummary summarize(const Cluster& c) {
  TopologySummary s;
  const Graph& g = c.graph();
  s.name = c.spec().name;
  s.nodes = c.spec().nodes;
  s.gpus = c.gpu_count();
  s.gpus_per_node = c.spec().gpus_per_node;
  for (auto v : boost::make_iterator_range(boost::vertices(g))) ++s.vertices_by_kind[std::string(to_string(g[v].kind))];
  for (int id = 0; id < c.link_count(); id += 2) {  // one direction of each physical link
    const Link& l = c.link(id);
    for (auto* m : {&s.links_by_class[std::string(to_string(l.cls))], &s.links_by_kind[std::string(to_string(l.kind))]}) {
      m->min_bandwidth = m->links == 0 ? l.bandwidth : std::min(m->min_bandwidth, l.bandwidth);
      m->max_bandwidth = std::max(m->max_bandwidth, l.bandwidth);
      ++m->links;
      m->total_bandwidth += l.bandwidth;
    }
  }
  if (s.gpus > 0) {
    s.injection_intra = intra_injection_bandwidth(c, 0);
    s.injection_inter = inter_injection_bandwidth(c, 0);
  }
  s.bisection = bisection_bandwidth(c);
  return s;
}

}  // namespace parasim::topology
