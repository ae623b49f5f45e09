// Max-min fair sharing of links among flows (progressive filling).
//
// Model. Links l have capacity c_l (bytes/s). A flow f crosses a set of links L_f and may
// have its own bound b_f (e.g. a NIC's injection limit). A rate allocation r is feasible
// when sum_{f : l in L_f} r_f <= c_l for every link and r_f <= b_f. It is max-min fair
// when no flow's rate can grow without shrinking the rate of a flow whose rate is not
// larger. Progressive filling computes it: raise every unfrozen flow's rate together;
// the first link to saturate (smallest remaining capacity / unfrozen flows crossing it,
// or the smallest bound) freezes the flows it constrains at that level; repeat on the rest.
//
// Weights. A flow may cross a link with a weight w (default 1): it then uses w times its
// rate of that link's capacity. The simulator's folding of identical data-parallel
// replicas (simulate.hpp) uses it: one simulated flow stands for its copies in the other
// replicas, and a link stands for its class of equivalent links, so the flow's weight on
// a class is the number of its copies crossing the class per link of the class.
//
// Incremental. Adding or removing a flow only affects flows connected to it through
// shared links (its component in the flow-link graph). solve() recomputes exactly the
// components touched since the last solve and reports the flows whose rate changed, so an
// event engine reschedules only those. Flows and links of untouched components are never
// visited.
//
// Complexity, for a touched component with F flows, L links and E flow-link incidences:
// collecting it is O(F + L + E); filling it is O(E log L) with a lazy heap of link shares
// (each freeze updates the shares of the links the frozen flow crosses).
#pragma once

#include <limits>
#include <span>
#include <vector>

namespace parasim::sim::lmm {

class MaxMinSolver {
 public:
  static constexpr double unbounded = std::numeric_limits<double>::infinity();

  int add_link(double capacity);
  [[nodiscard]] int link_count() const { return static_cast<int>(links_.size()); }

  // Starts a flow over `links` (ids from add_link; repeats are ignored); returns its id.
  // Ids of removed flows are reused.
  int add_flow(std::span<const int> links, double bound = unbounded);
  // The same with a positive weight per link (links must be distinct).
  int add_flow(std::span<const int> links, std::span<const double> weights, double bound = unbounded);
  // Changes a link's capacity; only while no flow crosses it.
  void set_capacity(int link, double capacity);
  void remove_flow(int flow);
  [[nodiscard]] bool active(int flow) const;

  // Recomputes the rates of every component touched since the last call.
  void solve();
  // Flows whose rate changed in the last solve() (new flows included), ascending.
  [[nodiscard]] const std::vector<int>& changed() const { return changed_; }

  [[nodiscard]] double rate(int flow) const { return flows_[static_cast<std::size_t>(flow)].rate; }
  // Sum of the weighted rates of the flows crossing a link.
  [[nodiscard]] double load(int link) const;
  [[nodiscard]] double capacity(int link) const { return links_[static_cast<std::size_t>(link)].capacity; }
  [[nodiscard]] const std::vector<int>& flows_on(int link) const { return links_[static_cast<std::size_t>(link)].flows; }

  // Work counters, for benchmarks: flows and links visited by solve() so far.
  [[nodiscard]] long long flows_visited() const { return flows_visited_; }
  [[nodiscard]] long long links_visited() const { return links_visited_; }

 private:
  struct Link {
    double capacity = 0.0;
    std::vector<int> flows;  // active flows crossing it
    bool dirty = false;
  };
  struct Flow {
    std::vector<int> links;
    std::vector<double> weights;  // per link, empty when all are 1
    double bound = unbounded;
    double rate = 0.0;
    bool alive = false;
  };

  void check_links(std::span<const int> links) const;
  int take_slot();
  void enlist(int id);
  void fill(const std::vector<int>& flows, const std::vector<int>& links);
  [[nodiscard]] double weight(const Flow& f, std::size_t i) const { return f.weights.empty() ? 1.0 : f.weights[i]; }
  [[nodiscard]] double weight_on(int flow, int link) const;

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<int> free_ids_;
  std::vector<int> dirty_links_;
  std::vector<int> new_flows_;
  std::vector<int> changed_;
  // Scratch, indexed by id; valid where the stamp matches.
  std::vector<unsigned> flow_stamp_;
  std::vector<unsigned> link_stamp_;
  unsigned stamp_ = 0;
  long long flows_visited_ = 0;
  long long links_visited_ = 0;
};

}  // namespace parasim::sim::lmm
