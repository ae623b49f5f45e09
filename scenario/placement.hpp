// A rank's place in the parallel plan: its coordinate along each dimension (tp, dp, pp, cp)
// and its rank under the plan's placement (ParallelPlan::placement, innermost dimension
// first), both ways. What the checks, the Program, the executor and the reports share.
#pragma once

#include "scenario/scenario.hpp"

namespace parasim::scenario {

struct Coord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
  int cp = 0;
};

// Size of a dimension under the plan, and a coordinate's index along it.
inline int extent(const ParallelPlan& p, Dim d) {
  return d == Dim::tp ? p.tp : d == Dim::dp ? p.dp : d == Dim::pp ? p.pp : p.cp;
}
inline int& coordinate(Coord& c, Dim d) {
  return d == Dim::tp ? c.tp : d == Dim::dp ? c.dp : d == Dim::pp ? c.pp : c.cp;
}

// A rank's index among the ranks holding the same weights (ParallelPlan::grad_ranks(), the
// gradients' group: dp x cp, cp innermost), and the coordinate at such an index.
inline int grad_index(const ParallelPlan& p, const Coord& c) {
  return c.dp * p.cp + c.cp;
}
inline Coord at_grad_index(const ParallelPlan& p, Coord c, int i) {
  c.dp = i / p.cp;
  c.cp = i % p.cp;
  return c;
}

// Rank of a coordinate under the plan's placement (innermost dimension first), and back.
int rank_of(const ParallelPlan& p, const Coord& c);
Coord coord_of(const ParallelPlan& p, int rank);

}  // namespace parasim::scenario
