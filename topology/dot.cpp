#include "topology/dot.hpp"

#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "topology/units.hpp"

namespace parasim::topology {
namespace {

std::string_view colour(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "darkgreen";
    case LinkKind::pcie: return "steelblue";
    case LinkKind::shared_memory: return "gray40";
    case LinkKind::network: return "darkorange";
    case LinkKind::wan: return "red";
    case LinkKind::host: return "purple";
  }
  return "black";
}

std::string_view shape(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return "box";
    case VertexKind::nic: return "cds";
    case VertexKind::host: return "folder";
    default: return "ellipse";
  }
}

}  // namespace

void write_dot(std::ostream& out, const Cluster& c) {
  const Graph& g = c.graph();
  fmt::print(out, "graph \"{}\" {{\n  graph [rankdir=TB, fontname=\"Helvetica\"];\n", c.spec().name);
  fmt::print(out, "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n");
  std::map<int, std::vector<VertexId>> by_node;
  for (auto v : boost::make_iterator_range(boost::vertices(g))) by_node[g[v].node].push_back(v);
  for (const auto& [node, vs] : by_node) {
    const bool boxed = node >= 0;
    if (boxed) fmt::print(out, "  subgraph cluster_n{} {{\n    label=\"node {}\";\n", node, node);
    for (VertexId v : vs) {
      fmt::print(out, "{}  v{} [label=\"{}\", shape={}];\n", boxed ? "  " : "", v, g[v].name, shape(g[v].kind));
    }
    if (boxed) fmt::print(out, "  }}\n");
  }
  for (int id = 0; id < c.link_count(); id += 2) {
    const Link& l = c.link(id);
    fmt::print(out, "  v{} -- v{} [label=\"{}\", color={}];\n", c.source(id), c.target(id),
               units::format_bandwidth(l.bandwidth), colour(l.kind));
  }
  fmt::print(out, "}}\n");
}

}  // namespace parasim::topology
