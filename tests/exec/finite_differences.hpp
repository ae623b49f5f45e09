// Central finite differences of a loss, for the gradient tests of the host models.
#pragma once

#include <span>
#include <vector>

namespace parasim::exec::test {

// (loss(p_i + h) - loss(p_i - h)) / 2h for every parameter p_i, each put back after.
template <class Loss>
std::vector<double> central_differences(std::span<double> params, double h, Loss&& loss) {
  std::vector<double> numeric(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + h;
    const double up = loss();
    params[i] = keep - h;
    const double down = loss();
    params[i] = keep;
    numeric[i] = (up - down) / (2 * h);
  }
  return numeric;
}

}  // namespace parasim::exec::test
