#include "sim/lmm/maxmin.hpp"

#include <algorithm>
#include <queue>
#include <stdexcept>

namespace parasim::sim::lmm {

int MaxMinSolver::add_link(double capacity) {
  if (!(capacity > 0.0)) throw std::invalid_argument("link capacity must be positive");
  links_.push_back(Link{capacity, {}, false});
  link_stamp_.push_back(0);
  return static_cast<int>(links_.size()) - 1;
}

int MaxMinSolver::add_flow(std::span<const int> links, double bound) {
  if (!(bound > 0.0)) throw std::invalid_argument("flow bound must be positive");
  check_links(links);
  const int id = take_slot();
  Flow& f = flows_[static_cast<std::size_t>(id)];
  f.links.assign(links.begin(), links.end());  // reuses the slot's capacity
  std::sort(f.links.begin(), f.links.end());
  f.links.erase(std::unique(f.links.begin(), f.links.end()), f.links.end());
  f.weights.clear();
  f.bound = bound;
  enlist(id);
  return id;
}

int MaxMinSolver::add_flow(std::span<const int> links, std::span<const double> weights, double bound) {
  if (!(bound > 0.0)) throw std::invalid_argument("flow bound must be positive");
  if (links.size() != weights.size()) throw std::invalid_argument("one weight per link");
  check_links(links);
  std::vector<std::size_t> order(links.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return links[a] < links[b]; });
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (!(weights[order[k]] > 0.0)) throw std::invalid_argument("flow weights must be positive");
    if (k > 0 && links[order[k]] == links[order[k - 1]]) throw std::invalid_argument("a weighted flow repeats a link");
  }
  const int id = take_slot();
  Flow& f = flows_[static_cast<std::size_t>(id)];
  f.links.clear();
  f.weights.clear();
  for (std::size_t i : order) {
    f.links.push_back(links[i]);
    f.weights.push_back(weights[i]);
  }
  f.bound = bound;
  enlist(id);
  return id;
}

void MaxMinSolver::check_links(std::span<const int> links) const {
  for (int l : links) {
    if (l < 0 || l >= link_count()) throw std::out_of_range("flow over an unknown link");
  }
}

int MaxMinSolver::take_slot() {
  if (!free_ids_.empty()) {
    const int id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }
  flows_.emplace_back();
  flow_stamp_.push_back(0);
  return static_cast<int>(flows_.size()) - 1;
}

// Makes a filled slot an active flow on its links.
void MaxMinSolver::enlist(int id) {
  Flow& f = flows_[static_cast<std::size_t>(id)];
  f.rate = 0.0;
  f.alive = true;
  for (int l : f.links) {
    Link& link = links_[static_cast<std::size_t>(l)];
    link.flows.push_back(id);
    if (!link.dirty) {
      link.dirty = true;
      dirty_links_.push_back(l);
    }
  }
  new_flows_.push_back(id);
}

void MaxMinSolver::set_capacity(int link, double capacity) {
  if (!(capacity > 0.0)) throw std::invalid_argument("link capacity must be positive");
  Link& l = links_.at(static_cast<std::size_t>(link));
  if (!l.flows.empty()) throw std::logic_error("changing the capacity of a link in use");
  l.capacity = capacity;
}

double MaxMinSolver::weight_on(int flow, int link) const {
  const Flow& f = flows_[static_cast<std::size_t>(flow)];
  if (f.weights.empty()) return 1.0;
  const auto it = std::lower_bound(f.links.begin(), f.links.end(), link);
  return f.weights[static_cast<std::size_t>(it - f.links.begin())];
}

void MaxMinSolver::remove_flow(int flow) {
  if (!active(flow)) throw std::invalid_argument("removing a flow that is not active");
  Flow& f = flows_[static_cast<std::size_t>(flow)];
  for (int l : f.links) {
    Link& link = links_[static_cast<std::size_t>(l)];
    std::erase(link.flows, flow);
    if (!link.dirty) {
      link.dirty = true;
      dirty_links_.push_back(l);
    }
  }
  f.alive = false;
  f.links.clear();
  f.weights.clear();
  f.rate = 0.0;
  std::erase(new_flows_, flow);
  free_ids_.push_back(flow);
}

bool MaxMinSolver::active(int flow) const {
  return flow >= 0 && flow < static_cast<int>(flows_.size()) && flows_[static_cast<std::size_t>(flow)].alive;
}

double MaxMinSolver::load(int link) const {
  double sum = 0.0;
  for (int f : links_[static_cast<std::size_t>(link)].flows) sum += weight_on(f, link) * flows_[static_cast<std::size_t>(f)].rate;
  return sum;
}

void MaxMinSolver::solve() {
  changed_.clear();
  ++stamp_;
  // Flows without links (bounded only by themselves) form components of their own.
  for (int f : new_flows_) {
    Flow& flow = flows_[static_cast<std::size_t>(f)];
    if (flow.links.empty()) {
      flow.rate = flow.bound;
      changed_.push_back(f);
    }
  }
  new_flows_.clear();
  // Each dirty link seeds a component: every flow and link reachable through sharing.
  std::vector<int> comp_flows;
  std::vector<int> comp_links;
  std::vector<int> stack;
  for (int seed : dirty_links_) {
    links_[static_cast<std::size_t>(seed)].dirty = false;
    if (link_stamp_[static_cast<std::size_t>(seed)] == stamp_) continue;
    comp_flows.clear();
    comp_links.clear();
    link_stamp_[static_cast<std::size_t>(seed)] = stamp_;
    stack.assign(1, seed);
    while (!stack.empty()) {
      const int l = stack.back();
      stack.pop_back();
      comp_links.push_back(l);
      for (int f : links_[static_cast<std::size_t>(l)].flows) {
        if (flow_stamp_[static_cast<std::size_t>(f)] == stamp_) continue;
        flow_stamp_[static_cast<std::size_t>(f)] = stamp_;
        comp_flows.push_back(f);
        for (int m : flows_[static_cast<std::size_t>(f)].links) {
          if (link_stamp_[static_cast<std::size_t>(m)] == stamp_) continue;
          link_stamp_[static_cast<std::size_t>(m)] = stamp_;
          stack.push_back(m);
        }
      }
    }
    fill(comp_flows, comp_links);
  }
  dirty_links_.clear();
  std::sort(changed_.begin(), changed_.end());
  changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
}

void MaxMinSolver::fill(const std::vector<int>& flows, const std::vector<int>& links) {
  flows_visited_ += static_cast<long long>(flows.size());
  links_visited_ += static_cast<long long>(links.size());
  // Per link of the component: capacity left, unfrozen flows crossing it and the sum of
  // their weights (their count when every weight is 1).
  struct State {
    double remaining;
    int unfrozen;
    double weight;
  };
  // Links and flows of the component, sorted so a binary search maps an id to its slot.
  std::vector<int> order = links;
  std::sort(order.begin(), order.end());
  auto idx = [&](int link) {
    return static_cast<std::size_t>(std::lower_bound(order.begin(), order.end(), link) - order.begin());
  };
  std::vector<State> state(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Link& l = links_[static_cast<std::size_t>(order[i])];
    double weight = 0.0;
    for (int f : l.flows) weight += weight_on(f, order[i]);
    state[i] = State{l.capacity, static_cast<int>(l.flows.size()), weight};
  }

  // Heap of (share, tie, link index or flow bound). Entries go stale as shares change;
  // a popped entry is used only if it still matches the current share.
  struct Item {
    double share;
    int kind;  // 0 link, 1 flow bound
    int id;    // index into order, or flow id
    bool operator>(const Item& o) const {
      if (share != o.share) return share > o.share;
      if (kind != o.kind) return kind > o.kind;
      return id > o.id;
    }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (state[i].unfrozen > 0) heap.push({state[i].remaining / state[i].weight, 0, static_cast<int>(i)});
  }
  std::vector<int> sorted_flows = flows;
  std::sort(sorted_flows.begin(), sorted_flows.end());
  std::vector<char> frozen(sorted_flows.size(), 0);
  auto fidx = [&](int f) {
    return static_cast<std::size_t>(std::lower_bound(sorted_flows.begin(), sorted_flows.end(), f) - sorted_flows.begin());
  };
  for (int f : sorted_flows) {
    const double b = flows_[static_cast<std::size_t>(f)].bound;
    if (b != unbounded) heap.push({b, 1, f});
  }

  auto freeze = [&](int f, double rate) {
    const std::size_t fi = fidx(f);
    if (frozen[fi]) return;
    frozen[fi] = 1;
    Flow& flow = flows_[static_cast<std::size_t>(f)];
    if (flow.rate != rate) changed_.push_back(f);
    flow.rate = rate;
    for (std::size_t k = 0; k < flow.links.size(); ++k) {
      const std::size_t i = idx(flow.links[k]);
      State& s = state[i];
      const double w = weight(flow, k);
      s.remaining = std::max(0.0, s.remaining - w * rate);
      --s.unfrozen;
      s.weight -= w;
      if (s.unfrozen > 0) heap.push({s.remaining / s.weight, 0, static_cast<int>(i)});
    }
  };

  while (!heap.empty()) {
    const Item top = heap.top();
    heap.pop();
    if (top.kind == 1) {
      if (!frozen[fidx(top.id)]) freeze(top.id, top.share);
      continue;
    }
    const State& s = state[static_cast<std::size_t>(top.id)];
    if (s.unfrozen == 0 || s.remaining / s.weight != top.share) continue;  // stale
    // This link saturates: every unfrozen flow on it gets the share.
    const std::vector<int> on = links_[static_cast<std::size_t>(order[static_cast<std::size_t>(top.id)])].flows;
    for (int f : on) freeze(f, top.share);
  }
}

}  // namespace parasim::sim::lmm
