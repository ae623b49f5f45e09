#include <catch2/catch.hpp>

#include <array>
#include <stdexcept>
#include <vector>

#include "sim/lmm/maxmin.hpp"

using parasim::sim::lmm::MaxMinSolver;

namespace {

int flow(MaxMinSolver& s, std::initializer_list<int> links, double bound = MaxMinSolver::unbounded) {
  const std::vector<int> l(links);
  return s.add_flow(l, bound);
}

}  // namespace

TEST_CASE("two flows on one link get half each", "[sim][maxmin]") {
  MaxMinSolver s;
  const int l = s.add_link(10.0);
  const int a = flow(s, {l});
  const int b = flow(s, {l});
  s.solve();
  CHECK(s.rate(a) == Approx(5.0));
  CHECK(s.rate(b) == Approx(5.0));
  CHECK(s.load(l) == Approx(10.0));
}

TEST_CASE("a flow limited elsewhere leaves its share to the others", "[sim][maxmin]") {
  // A crosses L1 (10) and L2 (2); B only L1. L2 caps A at 2, so B takes the other 8.
  MaxMinSolver s;
  const int l1 = s.add_link(10.0);
  const int l2 = s.add_link(2.0);
  const int a = flow(s, {l1, l2});
  const int b = flow(s, {l1});
  s.solve();
  CHECK(s.rate(a) == Approx(2.0));
  CHECK(s.rate(b) == Approx(8.0));
}

TEST_CASE("the textbook line network", "[sim][maxmin]") {
  // Links a, b of capacity 1; flow 0 crosses both, flow 1 only a, flow 2 only b:
  // every flow gets 1/2.
  MaxMinSolver s;
  const int a = s.add_link(1.0);
  const int b = s.add_link(1.0);
  const int f0 = flow(s, {a, b});
  const int f1 = flow(s, {a});
  const int f2 = flow(s, {b});
  s.solve();
  CHECK(s.rate(f0) == Approx(0.5));
  CHECK(s.rate(f1) == Approx(0.5));
  CHECK(s.rate(f2) == Approx(0.5));
}

TEST_CASE("progressive filling over two levels", "[sim][maxmin]") {
  // L1 (10) carries f1, f2, f3; L2 (4) carries f3, f4. L2's share 2 < L1's 10/3, so f3 and
  // f4 freeze at 2; L1 has 8 left for f1 and f2: 4 each.
  MaxMinSolver s;
  const int l1 = s.add_link(10.0);
  const int l2 = s.add_link(4.0);
  const int f1 = flow(s, {l1});
  const int f2 = flow(s, {l1});
  const int f3 = flow(s, {l1, l2});
  const int f4 = flow(s, {l2});
  s.solve();
  CHECK(s.rate(f1) == Approx(4.0));
  CHECK(s.rate(f2) == Approx(4.0));
  CHECK(s.rate(f3) == Approx(2.0));
  CHECK(s.rate(f4) == Approx(2.0));
}

TEST_CASE("a flow's own bound frees capacity for the rest", "[sim][maxmin]") {
  MaxMinSolver s;
  const int l = s.add_link(10.0);
  const int slow = flow(s, {l}, 1.0);
  const int fast = flow(s, {l});
  s.solve();
  CHECK(s.rate(slow) == Approx(1.0));
  CHECK(s.rate(fast) == Approx(9.0));
}

TEST_CASE("removing a flow gives its share back", "[sim][maxmin]") {
  MaxMinSolver s;
  const int l = s.add_link(12.0);
  const int a = flow(s, {l});
  const int b = flow(s, {l});
  const int c = flow(s, {l});
  s.solve();
  CHECK(s.rate(a) == Approx(4.0));
  s.remove_flow(b);
  s.solve();
  CHECK(s.rate(a) == Approx(6.0));
  CHECK(s.rate(c) == Approx(6.0));
  CHECK(s.changed() == std::vector<int>{a, c});
}

TEST_CASE("a change re-solves only the component it touches", "[sim][maxmin]") {
  // Two disjoint links, each with its own flows. Adding a flow on the second link changes
  // nothing on the first and visits none of its flows.
  MaxMinSolver s;
  const int l1 = s.add_link(10.0);
  const int l2 = s.add_link(10.0);
  const int a = flow(s, {l1});
  const int b = flow(s, {l2});
  s.solve();
  const long long visited = s.flows_visited();
  const int c = flow(s, {l2});
  s.solve();
  CHECK(s.changed() == std::vector<int>{b, c});
  CHECK(s.flows_visited() - visited == 2);  // b and c, not a
  CHECK(s.rate(a) == Approx(10.0));
  CHECK(s.rate(b) == Approx(5.0));
}

TEST_CASE("allocations are feasible and saturate a bottleneck of every flow", "[sim][maxmin]") {
  // A mesh of 12 links and 40 flows over pseudo-random routes: every link load is within
  // capacity, and every flow crosses a saturated link on which no flow is faster (the
  // definition of max-min fairness).
  MaxMinSolver s;
  std::vector<int> links;
  for (int i = 0; i < 12; ++i) links.push_back(s.add_link(1.0 + i % 5));
  std::vector<int> flows;
  unsigned x = 12345;
  auto next = [&x] { return (x = x * 1103515245u + 12345u) >> 16; };
  for (int f = 0; f < 40; ++f) {
    std::vector<int> route;
    const int hops = 1 + static_cast<int>(next() % 4);
    for (int h = 0; h < hops; ++h) route.push_back(links[next() % links.size()]);
    flows.push_back(s.add_flow(route));
  }
  s.solve();
  for (int l : links) CHECK(s.load(l) <= s.capacity(l) * (1 + 1e-12));
  for (int f : flows) {
    bool has_bottleneck = false;
    for (int l : links) {
      const auto& on = s.flows_on(l);
      if (std::find(on.begin(), on.end(), f) == on.end()) continue;
      bool fastest = true;
      for (int g : on) fastest = fastest && s.rate(g) <= s.rate(f) * (1 + 1e-12);
      has_bottleneck = has_bottleneck || (s.load(l) >= s.capacity(l) * (1 - 1e-12) && fastest);
    }
    CHECK(has_bottleneck);
  }
}

TEST_CASE("a flow of weight w on a link counts as w flows there", "[sim][maxmin]") {
  // A (weight 2) and B (weight 1) share a 9-unit link: 2r + r = 9, so both run at 3, and A
  // uses 6 of the link. The same as three unweighted flows at 3 each.
  MaxMinSolver s;
  const int l = s.add_link(9.0);
  const std::vector<int> links{l};
  const std::vector<double> two{2.0};
  const int a = s.add_flow(links, two);
  const int b = flow(s, {l});
  s.solve();
  CHECK(s.rate(a) == Approx(3.0));
  CHECK(s.rate(b) == Approx(3.0));
  CHECK(s.load(l) == Approx(9.0));
}

TEST_CASE("weighted flows: a flow capped elsewhere leaves the rest by weight", "[sim][maxmin]") {
  // L1 (10) carries A with weight 2 and B with weight 1; B also crosses L2 (2), which caps
  // B at 2. A takes what is left: 2 r_A + 2 = 10, r_A = 4. Fractional weights: C crosses
  // L3 (3) with weight 0.25 and nothing else, so it runs at 12.
  MaxMinSolver s;
  const int l1 = s.add_link(10.0);
  const int l2 = s.add_link(2.0);
  const int l3 = s.add_link(3.0);
  const std::vector<int> la{l1};
  const std::vector<double> wa{2.0};
  const int a = s.add_flow(la, wa);
  const int b = flow(s, {l1, l2});
  const std::vector<int> lc{l3};
  const std::vector<double> wc{0.25};
  const int c = s.add_flow(lc, wc);
  s.solve();
  CHECK(s.rate(b) == Approx(2.0));
  CHECK(s.rate(a) == Approx(4.0));
  CHECK(s.rate(c) == Approx(12.0));
  CHECK(s.load(l1) == Approx(10.0));
}

TEST_CASE("weights are checked", "[sim][maxmin]") {
  MaxMinSolver s;
  const int l = s.add_link(1.0);
  const std::vector<int> twice{l, l};
  const std::vector<double> w2{1.0, 1.0};
  CHECK_THROWS_AS(s.add_flow(twice, w2), std::invalid_argument);
  const std::vector<int> one{l};
  const std::vector<double> zero{0.0};
  CHECK_THROWS_AS(s.add_flow(one, zero), std::invalid_argument);
  const std::vector<double> none;
  CHECK_THROWS_AS(s.add_flow(one, none), std::invalid_argument);
}
