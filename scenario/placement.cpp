#include "scenario/placement.hpp"

namespace parasim::scenario {

int rank_of(const ParallelPlan& p, const Coord& c) {
  int rank = 0;
  int stride = 1;
  Coord copy = c;
  for (Dim d : p.placement) {
    rank += coordinate(copy, d) * stride;
    stride *= extent(p, d);
  }
  return rank;
}

Coord coord_of(const ParallelPlan& p, int rank) {
  Coord c;
  for (Dim d : p.placement) {
    coordinate(c, d) = rank % extent(p, d);
    rank /= extent(p, d);
  }
  return c;
}

}  // namespace parasim::scenario
