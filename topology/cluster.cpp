#include "topology/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace parasim::topology {
namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

std::string_view to_string(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return "gpu";
    case VertexKind::nvswitch: return "nvswitch";
    case VertexKind::pcie_switch: return "pcie-switch";
    case VertexKind::host: return "host";
    case VertexKind::nic: return "nic";
    case VertexKind::leaf_switch: return "leaf-switch";
    case VertexKind::spine_switch: return "spine-switch";
    case VertexKind::wan_gateway: return "wan-gateway";
  }
  return "?";
}

std::string_view to_string(LinkClass c) { return c == LinkClass::intra ? "intra-node" : "inter-node"; }

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::shared_memory: return "shared-memory";
    case LinkKind::network: return "network";
    case LinkKind::wan: return "wan";
    case LinkKind::host: return "host";
  }
  return "?";
}

Cluster::Cluster(ClusterSpec spec) : spec_(std::move(spec)) {
  hosts_.assign(static_cast<std::size_t>(spec_.nodes), Graph::null_vertex());
  build_devices_and_network();
  // The host tiers last, so that every other vertex and link keeps its id whether or not
  // the hosts are described.
  const auto g = static_cast<std::size_t>(spec_.gpus_per_node);
  for (int n = 0; n < spec_.nodes; ++n) {
    if (hosts_[static_cast<std::size_t>(n)] != Graph::null_vertex() || spec_.host.link_bandwidth <= 0.0) continue;
    const auto first = gpus_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(n) * g);
    hosts_[static_cast<std::size_t>(n)] = build_host(n, {first, first + static_cast<std::ptrdiff_t>(g)});
  }
  // Degraded links carry their share of the bandwidth (a link named twice, the product).
  for (const Degraded& d : spec_.degraded) {
    if (d.link.empty()) continue;
    const std::vector<int> ids = links_named(d.link);
    if (ids.empty()) throw std::invalid_argument(fmt::format("cluster.degraded: no link is named '{}'", d.link));
    for (int id : ids) graph_[edge(id)].bandwidth *= d.factor;
  }
}

std::vector<int> Cluster::links_named(std::string_view name) const {
  std::vector<int> out;
  const auto arrow = name.find(" -> ");
  for (int id = 0; id < link_count(); ++id) {
    const std::string& from = graph_[source(id)].name;
    const std::string& to = graph_[target(id)].name;
    const bool match = arrow == std::string_view::npos
                           ? from == name || to == name
                           : from == name.substr(0, arrow) && to == name.substr(arrow + 4);
    if (match) out.push_back(id);
  }
  return out;
}

void Cluster::build_devices_and_network() {
  const bool networked = spec_.nodes > 1 || spec_.wan.has_value();
  std::vector<VertexId> nics;  // node-major
  for (int n = 0; n < spec_.nodes; ++n) {
    std::vector<VertexId> node_nics = build_node(n, networked);
    nics.insert(nics.end(), node_nics.begin(), node_nics.end());
  }
  if (!networked) return;

  if (!spec_.wan) {
    build_network(nics, spec_.nodes, "");
    return;
  }
  // Two sites, each with its own network, joined through a pair of gateways.
  const int k = spec_.wan->first_group_nodes;
  const auto split = nics.begin() + static_cast<std::ptrdiff_t>(k) * spec_.inter.nics_per_node;
  const std::vector<VertexId> site_nics[2] = {{nics.begin(), split}, {split, nics.end()}};
  const int count[2] = {k, spec_.nodes - k};
  VertexId gateway[2];
  for (int s = 0; s < 2; ++s) {
    const std::string prefix = fmt::format("site{}.", s);
    std::vector<VertexId> tops = build_network(site_nics[s], count[s], prefix);
    gateway[s] = add_vertex(VertexKind::wan_gateway, fmt::format("site{}.wan-gateway", s), -1, s);
    for (VertexId top : tops) {
      double down = 0.0;  // non-blocking: as much as the switch receives from below
      for (auto e : boost::make_iterator_range(boost::in_edges(top, graph_))) down += graph_[e].bandwidth;
      connect(top, gateway[s], down, 0.0, LinkClass::inter, LinkKind::network);
    }
  }
  connect(gateway[0], gateway[1], spec_.wan->bandwidth, spec_.wan->latency, LinkClass::inter, LinkKind::wan);
}

VertexId Cluster::add_vertex(VertexKind kind, std::string name, int node, int index) {
  return boost::add_vertex(Vertex{kind, std::move(name), node, index}, graph_);
}

void Cluster::connect(VertexId a, VertexId b, double bandwidth, double latency, LinkClass cls, LinkKind kind) {
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    const int id = static_cast<int>(edges_.size());
    auto [e, added] = boost::add_edge(from, to, Link{id, bandwidth, latency, cls, kind}, graph_);
    (void)added;
    edges_.push_back(e);
  }
}

std::vector<VertexId> Cluster::build_node(int node, bool with_nics) {
  const int g = spec_.gpus_per_node;
  const IntraNodeSpec& in = spec_.intra;
  const double usable = in.bandwidth * in.efficiency;
  std::vector<VertexId> local;
  for (int l = 0; l < g; ++l) {
    const int rank = node * g + l;
    local.push_back(add_vertex(VertexKind::gpu, fmt::format("n{}.gpu{}", node, l), node, rank));
    gpus_.push_back(local.back());
  }

  std::vector<VertexId> pcie_switches;
  VertexId hub = Graph::null_vertex();  // where a NIC attaches when not to a device
  switch (in.fabric) {
    case IntraFabric::nvswitch: {
      VertexId sw = add_vertex(VertexKind::nvswitch, fmt::format("n{}.nvswitch", node), node, switch_count_++);
      for (VertexId v : local) connect(v, sw, usable, in.latency / 2, LinkClass::intra, LinkKind::nvlink);
      break;
    }
    case IntraFabric::nvlink_mesh:
      for (int i = 0; i < g; ++i) {
        for (int j = i + 1; j < g; ++j) {
          connect(local[static_cast<std::size_t>(i)], local[static_cast<std::size_t>(j)], usable / (g - 1),
                  in.latency, LinkClass::intra, LinkKind::nvlink);
        }
      }
      break;
    case IntraFabric::pcie: {
      hub = add_vertex(VertexKind::host, fmt::format("n{}.host", node), node, node);
      const int switches = ceil_div(g, in.gpus_per_switch);
      for (int s = 0; s < switches; ++s) {
        pcie_switches.push_back(
            add_vertex(VertexKind::pcie_switch, fmt::format("n{}.pcie{}", node, s), node, switch_count_++));
        connect(pcie_switches.back(), hub, usable, in.latency / 2, LinkClass::intra, LinkKind::pcie);
      }
      for (int l = 0; l < g; ++l) {
        connect(local[static_cast<std::size_t>(l)], pcie_switches[static_cast<std::size_t>(l / in.gpus_per_switch)],
                usable, in.latency / 2, LinkClass::intra, LinkKind::pcie);
      }
      break;
    }
    case IntraFabric::shared_memory:
      hub = add_vertex(VertexKind::host, fmt::format("n{}.host", node), node, node);
      for (VertexId v : local) connect(v, hub, usable, in.latency / 2, LinkClass::intra, LinkKind::shared_memory);
      break;
  }

  hosts_[static_cast<std::size_t>(node)] = hub;  // pcie, shared-memory: the fabric's own

  if (!with_nics) return {};
  const int nic_count = spec_.inter.nics_per_node;
  const double attach = spec_.inter.attach_bandwidth;
  std::vector<VertexId> node_nics;
  for (int k = 0; k < nic_count; ++k) {
    node_nics.push_back(add_vertex(VertexKind::nic, fmt::format("n{}.nic{}", node, k), node, node * nic_count + k));
  }
  for (int k = 0; k < nic_count; ++k) {
    VertexId nic = node_nics[static_cast<std::size_t>(k)];
    if (!pcie_switches.empty()) {
      const auto s = static_cast<std::size_t>(k * static_cast<int>(pcie_switches.size()) / nic_count);
      connect(pcie_switches[s], nic, attach, 0.0, LinkClass::intra, LinkKind::pcie);
    } else if (hub != Graph::null_vertex()) {
      connect(hub, nic, attach, 0.0, LinkClass::intra, LinkKind::pcie);
    } else if (nic_count > g) {  // a device with several NICs
      connect(local[static_cast<std::size_t>(k * g / nic_count)], nic, attach, 0.0, LinkClass::intra, LinkKind::pcie);
    }
  }
  if (pcie_switches.empty() && hub == Graph::null_vertex() && nic_count <= g) {
    for (int l = 0; l < g; ++l) {  // several devices share a NIC
      connect(local[static_cast<std::size_t>(l)], node_nics[static_cast<std::size_t>(l * nic_count / g)], attach, 0.0,
              LinkClass::intra, LinkKind::pcie);
    }
  }
  return node_nics;
}

VertexId Cluster::build_host(int node, const std::vector<VertexId>& local) {
  const NodeHostSpec& h = spec_.host;
  const VertexId host = add_vertex(VertexKind::host, fmt::format("n{}.host", node), node, node);
  const int per = std::max(1, h.devices_per_link);
  for (std::size_t l = 0; l < local.size(); l += static_cast<std::size_t>(per)) {
    const VertexId sw = add_vertex(VertexKind::pcie_switch, fmt::format("n{}.hostpcie{}", node, l / static_cast<std::size_t>(per)),
                                   node, switch_count_++);
    connect(sw, host, h.link_bandwidth, h.latency / 2, LinkClass::intra, LinkKind::host);
    for (std::size_t k = l; k < std::min(local.size(), l + static_cast<std::size_t>(per)); ++k) {
      connect(local[k], sw, h.link_bandwidth, h.latency / 2, LinkClass::intra, LinkKind::host);
    }
  }
  return host;
}

std::vector<VertexId> Cluster::build_network(const std::vector<VertexId>& nics, int node_count,
                                             const std::string& prefix) {
  const InterNodeSpec& net = spec_.inter;
  const double bw = net.nic_bandwidth * net.efficiency;
  const double half = net.latency / 2;
  auto link = [&](VertexId a, VertexId b) { connect(a, b, bw, half, LinkClass::inter, LinkKind::network); };

  if (net.shape == NetworkShape::single_switch) {
    VertexId sw = add_vertex(VertexKind::leaf_switch, prefix + "switch", -1, leaf_count_++);
    for (VertexId nic : nics) link(nic, sw);
    return {sw};
  }

  const int d = net.leaf_downlinks;
  std::vector<VertexId> leaves;
  if (net.shape == NetworkShape::fat_tree) {
    const int count = ceil_div(static_cast<int>(nics.size()), d);
    for (int l = 0; l < count; ++l) {
      leaves.push_back(add_vertex(VertexKind::leaf_switch, fmt::format("{}leaf{}", prefix, l), -1, leaf_count_++));
    }
    for (std::size_t i = 0; i < nics.size(); ++i) link(nics[i], leaves[i / static_cast<std::size_t>(d)]);
  } else {  // rail-optimized
    const int rails = net.nics_per_node;
    const int blocks = ceil_div(node_count, d);
    for (int b = 0; b < blocks; ++b) {
      for (int r = 0; r < rails; ++r) {
        leaves.push_back(
            add_vertex(VertexKind::leaf_switch, fmt::format("{}rail{}.leaf{}", prefix, r, b), -1, leaf_count_++));
      }
    }
    for (std::size_t i = 0; i < nics.size(); ++i) {
      const int node = static_cast<int>(i) / rails;  // within this site
      const int rail = static_cast<int>(i) % rails;
      link(nics[i], leaves[static_cast<std::size_t>((node / d) * rails + rail)]);
    }
  }
  if (leaves.size() == 1) return leaves;

  const int spines = static_cast<int>(std::ceil(d / net.oversubscription - 1e-9));
  std::vector<VertexId> tops;
  for (int s = 0; s < spines; ++s) {
    tops.push_back(add_vertex(VertexKind::spine_switch, fmt::format("{}spine{}", prefix, s), -1, spine_count_++));
    for (VertexId leaf : leaves) link(leaf, tops.back());
  }
  return tops;
}

std::string Cluster::link_name(int link_id) const {
  return fmt::format("{} -> {}", graph_[source(link_id)].name, graph_[target(link_id)].name);
}

}  // namespace parasim::topology
