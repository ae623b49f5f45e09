// cluster.degraded and cluster.jitter: the parts of a cluster below their nominal rate, and
// compute noise. docs/scenario-format.md documents the keys.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "scenario/load.hpp"
#include "topology/cluster.hpp"

namespace parasim::scenario {

// cluster.degraded (a list of {rank | node | link, factor}) and cluster.jitter ({sigma, seed}).
void read_heterogeneity(const Reader& r, topology::ClusterSpec& c, LocationMap& where) {
  if (const Value* list = r.get("degraded"); list != nullptr && list->kind != Value::Kind::null) {
    if (list->kind != Value::Kind::sequence) {
      r.fail("degraded", "expected a list of {rank, factor}, {node, factor} or {link, factor} entries");
    }
    std::vector<Reader> links;  // entries naming links, checked against the graph below
    for (std::size_t i = 0; i < list->items.size(); ++i) {
      Reader d(list->items[i], fmt::format("cluster.degraded[{}]", i), {"rank", "node", "link", "factor"}, &where);
      topology::Degraded g;
      const int named = (d.has("rank") ? 1 : 0) + (d.has("node") ? 1 : 0) + (d.has("link") ? 1 : 0);
      if (named != 1) {
        d.fail(named == 0      ? "factor"
               : d.has("rank") ? "rank"
                               : "node",
               "name one of rank (a device), node (its devices) or link (a link or a vertex's links)");
      }
      if (d.has("rank")) g.rank = d.integer("rank", std::nullopt, 0, c.total_gpus() - 1);
      if (d.has("node")) g.node = d.integer("node", std::nullopt, 0, c.nodes - 1);
      if (d.has("link")) {
        g.link = d.string("link", std::nullopt);
        links.push_back(d);
      }
      g.factor = d.number("factor", std::nullopt, 1e-3, 1.0);
      c.degraded.push_back(std::move(g));
      // Factors naming the same device multiply: their product keeps the single factor's
      // range (below it the simulator's clock overflows).
      if (c.degraded.back().rank >= 0 || c.degraded.back().node >= 0) {
        const topology::Degraded& last = c.degraded.back();
        const int first = last.rank >= 0 ? last.rank : last.node * c.gpus_per_node;
        const int end = last.rank >= 0 ? last.rank + 1 : first + c.gpus_per_node;
        for (int rank = first; rank < end; ++rank) {
          if (const double f = c.compute_factor(rank); f < 1e-3) {
            d.fail("factor", fmt::format("with the entries before it, device {} computes at {:.3g} of its speed; the "
                                         "factors naming a device multiply, and their product must be at least 0.001",
                                         rank, f));
          }
        }
      }
    }
    if (!links.empty()) {
      // The names the graph gives (links as "a -> b", vertices by name): built without the
      // degradations, which need them.
      topology::ClusterSpec plain = c;
      plain.degraded.clear();
      const topology::Cluster graph(plain);
      std::vector<double> product(static_cast<std::size_t>(graph.link_count()), 1.0);
      for (const Reader& d : links) {
        const std::string name = d.string("link", std::nullopt);
        const std::vector<int> named = graph.links_named(name);
        const double factor = d.number("factor", std::nullopt, 1e-3, 1.0);
        for (int l : named) {
          double& p = product[static_cast<std::size_t>(l)];
          p *= factor;
          if (p < 1e-3) {
            d.fail("factor", fmt::format("with the entries before it, link '{}' carries {:.3g} of its bandwidth; the "
                                         "factors naming a link multiply, and their product must be at least 0.001",
                                         graph.link_name(l), p));
          }
        }
        if (!named.empty()) continue;
        std::vector<std::string> names;
        for (auto [v, end] = boost::vertices(graph.graph()); v != end; ++v) names.push_back(graph.graph()[*v].name);
        const std::vector<std::string_view> views(names.begin(), names.end());
        const std::string device = name.substr(0, name.find(" -> "));
        d.fail("link",
               fmt::format("no link is named '{}': give a link as the reports name it (\"n0.nic0 -> leaf0\") or "
                           "a vertex whose links are meant (\"n0.nic0\"){}",
                           name, Reader::suggestion(device, views)));
      }
    }
  }
  if (const Value* j = r.get("jitter"); j != nullptr && j->kind != Value::Kind::null) {
    Reader jr(*j, "cluster.jitter", {"sigma", "seed"}, &where);
    c.jitter.sigma = jr.number("sigma", std::nullopt, 0.0, 2.0);
    c.jitter.seed = static_cast<std::uint64_t>(jr.integer("seed", 1, 0));
  }
}

}  // namespace parasim::scenario
