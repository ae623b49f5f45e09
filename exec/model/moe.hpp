// A mixture-of-experts MLP on the host, as Mixtral and Megatron-Core's top-k router run it:
// each token row's router logits z = x · Wr (E of them), its top_k experts by logit (ties
// to the lower index), and their gates, the softmax of the chosen logits (so they sum to
// 1); the output is the gates' weighted sum of the chosen experts' MLPs (GELU, as the
// dense layer's), dropless. Backward: each expert's input gradient from its gated output
// gradient, each gate's gradient dy · (its expert's output), back through the softmax of
// the chosen logits into the router's.
#pragma once

#include <cstdint>
#include <vector>

namespace parasim::exec::moe {

// expert[i·k + j], gate[i·k + j]: row i's j-th expert (in descending logit order) and gate.
template <class T>
void route(int* expert, T* gate, const T* logits, int n, int experts, int k);
// dlogits (n x E, overwritten) from the gates' gradients dgate (n x k).
template <class T>
void route_backward(T* dlogits, const int* expert, const T* gate, const T* dgate, int n, int experts, int k);

// One expert's parameters: fc [C x F] and its bias, fc projection [F x C] and its bias.
template <class T>
struct Expert {
  const T* fcw;
  const T* fcb;
  const T* projw;
  const T* projb;
};
template <class T>
struct ExpertGrads {
  T* fcw;
  T* fcb;
  T* projw;
  T* projb;
};

// What a forward keeps for the backward: the routing, and per expert the rows it took
// (token row i's copy j as i·k + j), their inputs, pre-activation, activation and output.
template <class T>
struct Saved {
  std::vector<int> expert;
  std::vector<T> logits, gate;
  std::vector<std::vector<int>> rows;
  std::vector<std::vector<T>> in, pre, act, out;
};

// y [n x C] = sum over each row's chosen experts of gate · expert(x); `router` is Wr [C x E].
template <class T>
void forward(T* y, Saved<T>& s, const T* x, const T* router, const std::vector<Expert<T>>& experts, int n, int c, int f,
             int k);
// dx += d(y)/d(x) · dy, and the parameters' gradients (added).
template <class T>
void backward(T* dx, T* drouter, const std::vector<ExpertGrads<T>>& grads, const T* dy, const Saved<T>& s, const T* x,
              const T* router, const std::vector<Expert<T>>& experts, int n, int c, int f, int k);

}  // namespace parasim::exec::moe
