#include "exec/model/generic.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

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
  }
  x_.resize(cfg_.layers.size());
  in_.resize(cfg_.layers.size() + 1);
}

template <class T>
void GenericNet<T>::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
T GenericNet<T>::forward(std::span<const T> inputs, std::span<const std::int32_t> labels) {
  if (static_cast<std::int64_t>(inputs.size()) != cfg_.in(0) || static_cast<int>(labels.size()) != cfg_.batch) {
    throw std::invalid_argument("generic model: inputs must be batch x input_width, labels batch");
  }
  const int layers = static_cast<int>(cfg_.layers.size());
  in_[0].assign(inputs.begin(), inputs.end());
  for (int l = 0; l < layers; ++l) {
    const GenericShape& s = cfg_.layers[static_cast<std::size_t>(l)];
    const GenericOffsets& o = offsets_[static_cast<std::size_t>(l)];
    auto& x = x_[static_cast<std::size_t>(l)];
    x.assign(static_cast<std::size_t>(cfg_.gemm_values(l)), T(0));
    k::resample_forward(x.data(), cfg_.gemm_values(l), in_[static_cast<std::size_t>(l)].data(), cfg_.in(l), l > 0);
    std::vector<T> y(x.size());
    const auto rows = static_cast<int>(s.rows);
    const auto side = static_cast<int>(s.side);
    k::gemm<T>(false, false, rows, side, side, T(1), x.data(), params_.data() + o.weight, T(0), y.data());
    auto& z = in_[static_cast<std::size_t>(l) + 1];
    z.assign(static_cast<std::size_t>(cfg_.out(l)), T(0));
    k::resample_forward(z.data(), cfg_.out(l), y.data(), cfg_.gemm_values(l), false);
    k::add_cyclic(z.data(), cfg_.out(l), params_.data() + o.bias, s.bias);
  }
  const auto& logits = in_.back();
  dlogits_.assign(logits.size(), T(0));
  return k::cross_entropy(dlogits_.data(), logits.data(), labels.data(), cfg_.batch, cfg_.classes());
}

template <class T>
void GenericNet<T>::backward() {
  const int layers = static_cast<int>(cfg_.layers.size());
  std::vector<T> dz = dlogits_;  // gradient of the layer's output
  for (int l = layers - 1; l >= 0; --l) {
    const GenericShape& s = cfg_.layers[static_cast<std::size_t>(l)];
    const GenericOffsets& o = offsets_[static_cast<std::size_t>(l)];
    const auto& x = x_[static_cast<std::size_t>(l)];
    k::cyclic_backward(grads_.data() + o.bias, s.bias, dz.data(), cfg_.out(l));
    std::vector<T> dy(x.size());
    k::resample_backward(dy.data(), cfg_.gemm_values(l), dz.data(), cfg_.out(l), static_cast<const T*>(nullptr));
    const auto rows = static_cast<int>(s.rows);
    const auto side = static_cast<int>(s.side);
    k::gemm<T>(true, false, side, side, rows, T(1), x.data(), dy.data(), T(1), grads_.data() + o.weight);
    if (l == 0) break;
    std::vector<T> dx(x.size());
    k::gemm<T>(false, true, rows, side, side, T(1), dy.data(), params_.data() + o.weight, T(0), dx.data());
    dz.assign(static_cast<std::size_t>(cfg_.in(l)), T(0));
    k::resample_backward(dz.data(), cfg_.in(l), dx.data(), cfg_.gemm_values(l), in_[static_cast<std::size_t>(l)].data());
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
