#include "exec/model/generic.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "exec/model/batch_norm.hpp"
#include "exec/model/kernels.hpp"
#include "exec/model/random.hpp"

namespace parasim::exec {
namespace k = kernels;

GenericOffsets lay_out_generic_layer(std::size_t& at, const GenericShape& shape) {
  GenericOffsets o;
  o.weight = at;
  at += static_cast<std::size_t>(shape.side * shape.side);
  o.bias = at;
  at += static_cast<std::size_t>(shape.bias);
  const auto bn = static_cast<std::size_t>(shape.bn_layers * shape.bn_channels);
  o.gamma = at;
  at += bn;
  o.beta = at;
  at += bn;
  return o;
}

template <class T>
GenericNet<T>::GenericNet(const GenericConfig& config, std::uint64_t seed) : cfg_(config) {
  if (cfg_.layers.empty()) throw std::invalid_argument("generic model: no layers");
  std::size_t at = 0;
  for (const GenericShape& s : cfg_.layers) offsets_.push_back(lay_out_generic_layer(at, s));
  params_.assign(at, T(0));
  grads_.assign(at, T(0));
  std::uint64_t state = seed ^ 0x6e6e6e6e6e6e6e6eULL;
  for (std::size_t l = 0; l < cfg_.layers.size(); ++l) {
    const auto side = static_cast<double>(cfg_.layers[l].side);
    const double stddev = std::sqrt((l + 1 == cfg_.layers.size() ? 1.0 : 2.0) / side);
    const auto n = static_cast<std::size_t>(cfg_.layers[l].side * cfg_.layers[l].side);
    for (std::size_t i = 0; i < n; ++i) params_[offsets_[l].weight + i] = static_cast<T>(stddev * normal(state));
    // BatchNorm starts as the identity on normalised values: scales 1, shifts 0.
    const auto bn = static_cast<std::size_t>(cfg_.layers[l].bn_layers * cfg_.layers[l].bn_channels);
    std::fill_n(params_.begin() + static_cast<std::ptrdiff_t>(offsets_[l].gamma), bn, T(1));
  }
  mean_invstd_.resize(cfg_.layers.size());
}

template <class T>
void GenericNet<T>::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
T GenericNet<T>::forward(std::span<const T> inputs, std::span<const std::int32_t> labels) {
  const std::size_t group = labels.size() / static_cast<std::size_t>(cfg_.batch);
  if (group == 0 || static_cast<std::int64_t>(inputs.size()) != cfg_.in(0) * static_cast<std::int64_t>(group) ||
      labels.size() != group * static_cast<std::size_t>(cfg_.batch)) {
    throw std::invalid_argument("generic model: inputs must be group x batch x input_width, labels group x batch");
  }
  const int layers = static_cast<int>(cfg_.layers.size());
  in_.assign(group, std::vector<std::vector<T>>(cfg_.layers.size() + 1));
  x_.assign(group, std::vector<std::vector<T>>(cfg_.layers.size()));
  u_.assign(group, std::vector<std::vector<T>>(cfg_.layers.size()));
  for (std::size_t m = 0; m < group; ++m) {
    const auto n = static_cast<std::size_t>(cfg_.in(0));
    in_[m][0].assign(inputs.begin() + static_cast<std::ptrdiff_t>(m * n), inputs.begin() + static_cast<std::ptrdiff_t>((m + 1) * n));
  }
  for (int l = 0; l < layers; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const GenericShape& s = cfg_.layers[li];
    const GenericOffsets& o = offsets_[li];
    for (std::size_t m = 0; m < group; ++m) {
      auto& x = x_[m][li];
      x.assign(static_cast<std::size_t>(cfg_.gemm_values(l)), T(0));
      k::resample_forward(x.data(), cfg_.gemm_values(l), in_[m][li].data(), cfg_.in(l), l > 0);
      std::vector<T> y(x.size());
      const auto rows = static_cast<int>(s.rows);
      const auto side = static_cast<int>(s.side);
      k::gemm<T>(false, false, rows, side, side, T(1), x.data(), params_.data() + o.weight, T(0), y.data());
      auto& z = in_[m][li + 1];
      z.assign(static_cast<std::size_t>(cfg_.out(l)), T(0));
      k::resample_forward(z.data(), cfg_.out(l), y.data(), cfg_.gemm_values(l), false);
      if (s.bn_layers > 0) u_[m][li] = z;
    }
    // Each BatchNorm layer: the group's statistics merged, then every micro-batch normalised.
    mean_invstd_[li].assign(static_cast<std::size_t>(2 * s.bn_layers * s.bn_channels), T(0));
    for (int b = 0; b < s.bn_layers; ++b) {
      const BnShape shape = s.bn_shape(b, cfg_.batch);
      std::vector<T> gathered(group * static_cast<std::size_t>(shape.stats_size()));
      for (std::size_t m = 0; m < group; ++m) {
        k::bn_stats(gathered.data() + m * static_cast<std::size_t>(shape.stats_size()), u_[m][li].data(), shape);
      }
      T* mi = mean_invstd_[li].data() + static_cast<std::size_t>(2 * b * s.bn_channels);
      k::bn_merge(mi, gathered.data(), static_cast<int>(group), shape);
      const std::size_t c = static_cast<std::size_t>(b * s.bn_channels);
      for (std::size_t m = 0; m < group; ++m) {
        k::bn_normalize(in_[m][li + 1].data(), u_[m][li].data(), mi, params_.data() + o.gamma + c,
                        params_.data() + o.beta + c, shape);
      }
    }
    for (std::size_t m = 0; m < group; ++m) k::add_cyclic(in_[m][li + 1].data(), cfg_.out(l), params_.data() + o.bias, s.bias);
  }
  T loss = T(0);
  dlogits_.assign(group, {});
  for (std::size_t m = 0; m < group; ++m) {
    const auto& logits = in_[m].back();
    dlogits_[m].assign(logits.size(), T(0));
    loss += k::cross_entropy(dlogits_[m].data(), logits.data(), labels.data() + m * static_cast<std::size_t>(cfg_.batch),
                             cfg_.batch, cfg_.classes());
    for (T& d : dlogits_[m]) d /= static_cast<T>(group);  // the group's mean
  }
  return loss / static_cast<T>(group);
}

template <class T>
void GenericNet<T>::backward() {
  const int layers = static_cast<int>(cfg_.layers.size());
  const std::size_t group = dlogits_.size();
  std::vector<std::vector<T>> dz = dlogits_;  // per micro-batch: the gradient of the layer's output
  for (int l = layers - 1; l >= 0; --l) {
    const auto li = static_cast<std::size_t>(l);
    const GenericShape& s = cfg_.layers[li];
    const GenericOffsets& o = offsets_[li];
    for (std::size_t m = 0; m < group; ++m) k::cyclic_backward(grads_.data() + o.bias, s.bias, dz[m].data(), cfg_.out(l));
    // Each BatchNorm layer: every micro-batch's sums, added over the group, then the input
    // gradients (in place).
    for (int b = s.bn_layers - 1; b >= 0; --b) {
      const BnShape shape = s.bn_shape(b, cfg_.batch);
      const auto c = static_cast<std::size_t>(s.bn_channels);
      const T* mi = mean_invstd_[li].data() + 2 * static_cast<std::size_t>(b) * c;
      std::vector<T> sums(2 * c, T(0)), mine(2 * c);
      for (std::size_t m = 0; m < group; ++m) {
        k::bn_backward_reduce(mine.data(), grads_.data() + o.gamma + static_cast<std::size_t>(b) * c,
                              grads_.data() + o.beta + static_cast<std::size_t>(b) * c, dz[m].data(), u_[m][li].data(),
                              mi, shape);
        for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += mine[i];
      }
      for (std::size_t m = 0; m < group; ++m) {
        k::bn_backward_input(dz[m].data(), dz[m].data(), u_[m][li].data(), mi,
                             params_.data() + o.gamma + static_cast<std::size_t>(b) * c, sums.data(),
                             static_cast<double>(group) * cfg_.batch, shape);
      }
    }
    for (std::size_t m = 0; m < group; ++m) {
      const auto& x = x_[m][li];
      std::vector<T> dy(x.size());
      k::resample_backward(dy.data(), cfg_.gemm_values(l), dz[m].data(), cfg_.out(l), static_cast<const T*>(nullptr));
      const auto rows = static_cast<int>(s.rows);
      const auto side = static_cast<int>(s.side);
      k::gemm<T>(true, false, side, side, rows, T(1), x.data(), dy.data(), T(1), grads_.data() + o.weight);
      if (l == 0) continue;
      std::vector<T> dx(x.size());
      k::gemm<T>(false, true, rows, side, side, T(1), dy.data(), params_.data() + o.weight, T(0), dx.data());
      dz[m].assign(static_cast<std::size_t>(cfg_.in(l)), T(0));
      k::resample_backward(dz[m].data(), cfg_.in(l), dx.data(), cfg_.gemm_values(l), in_[m][li].data());
    }
  }
}

ImageBatch synthetic_images(int classes, int width, int batch, std::uint64_t seed, std::int64_t step) {
  std::vector<float> prototypes(static_cast<std::size_t>(classes) * static_cast<std::size_t>(width));
  std::uint64_t state = seed ^ 0x1a6e1a6e1a6e1a6eULL;
  for (float& v : prototypes) v = static_cast<float>(normal(state));
  ImageBatch out;
  out.inputs.resize(static_cast<std::size_t>(batch) * static_cast<std::size_t>(width));
  out.labels.resize(static_cast<std::size_t>(batch));
  for (int s = 0; s < batch; ++s) {
    std::uint64_t st = seed + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(step * 1000003 + s + 1);
    const auto c = static_cast<std::int32_t>(splitmix(st) % static_cast<std::uint64_t>(classes));
    out.labels[static_cast<std::size_t>(s)] = c;
    const float* proto = prototypes.data() + static_cast<std::size_t>(c) * static_cast<std::size_t>(width);
    float* x = out.inputs.data() + static_cast<std::size_t>(s) * static_cast<std::size_t>(width);
    for (int i = 0; i < width; ++i) x[i] = proto[i] + static_cast<float>(0.5 * normal(st));
  }
  return out;
}

template class GenericNet<float>;
template class GenericNet<double>;

}  // namespace parasim::exec
