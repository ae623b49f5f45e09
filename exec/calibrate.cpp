#include "exec/calibrate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace parasim::exec {

double GemmSample::size() const { return std::cbrt(m * static_cast<double>(n) * k); }

double bus_factor(std::string_view op, int group) {
  const double n = group;
  if (op == "all-reduce") return 2.0 * (n - 1.0) / n;
  if (op == "reduce-scatter" || op == "all-gather") return (n - 1.0) / n;
  if (op == "send/recv") return 1.0;
  throw std::invalid_argument(fmt::format("no bus bandwidth factor for '{}'", op));
}

double CommSample::busbw() const { return algbw() * bus_factor(op, group); }

namespace {

using Shape = std::array<int, 3>;

std::vector<Shape> gemm_grid(bool quick, bool large) {
  std::vector<Shape> g;
  if (large) {
    // A GPU's: squares, then a transformer layer's GEMMs for 2048 and 8192 tokens at
    // hidden 1024 to 12288 (QKV, projection, MLP up and down), then attention per head.
    for (int s : {256, 512, 1024, 2048, 4096, 8192}) g.push_back({s, s, s});
    for (int tokens : {2048, 8192}) {
      for (int h : {1024, 2048, 4096, 8192, 12288}) {
        g.push_back({tokens, 3 * h, h});
        g.push_back({tokens, h, h});
        g.push_back({tokens, 4 * h, h});
        g.push_back({tokens, h, 4 * h});
      }
    }
    for (int t : {512, 2048, 4096}) {
      for (int d : {64, 128}) {
        g.push_back({t, t, d});
        g.push_back({t, d, t});
      }
    }
    return g;
  }
  for (int s : quick ? std::vector<int>{32, 64, 128} : std::vector<int>{32, 64, 128, 256, 512, 1024, 2048}) {
    g.push_back({s, s, s});
  }
  if (quick) {
    g.push_back({256, 384, 128});
    return g;
  }
  // A transformer layer's GEMMs for tokens x hidden: QKV, projection, MLP up and down.
  for (int tokens : {256, 1024}) {
    for (int h : {64, 128, 256, 512, 1024}) {
      g.push_back({tokens, 3 * h, h});
      g.push_back({tokens, h, h});
      g.push_back({tokens, 4 * h, h});
      g.push_back({tokens, h, 4 * h});
    }
  }
  // Attention per head: scores (t x t x d) and context (t x d x t).
  for (int t : {64, 256, 1024}) {
    for (int d : {32, 64, 128}) {
      g.push_back({t, t, d});
      g.push_back({t, d, t});
    }
  }
  return g;
}

// Fills device memory from the host: value(i) for each float of `b`.
template <typename Value>
void fill(Device& dev, Buffer& b, Value&& value) {
  std::vector<float> host(b.floats());
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = value(i);
  dev.upload(b.f(), host.data(), host.size() * sizeof(float));
}

// The measurements done and to do, for the progress callback (calibrate() sets it up).
struct Meter {
  CalibrateProgress progress;  // empty off rank 0
  std::string phase;
  std::size_t done = 0, total = 0;
  void begin(std::string_view name) {
    phase = name;
    if (progress) progress(phase, done, total);
  }
  void tick() {
    ++done;
    if (progress) progress(phase, done, total);
  }
};
Meter* meter = nullptr;  // while calibrate() runs

// One measurement: the time of one call, as the median of three rounds' means, and how far
// the rounds lie apart ((slowest - fastest) / median).
struct Timing {
  double seconds = 0.0;
  double spread = 0.0;
};

// Repeats `body` in three rounds that last `seconds` together (one call each at least, one
// untimed call first). The count is agreed over every rank, so collectives inside `body`
// stay matched.
template <typename Body>
Timing time_call(Device& dev, double seconds, Body&& body) {
  constexpr int rounds = 3;
  body();
  dev.synchronize();
  std::int64_t t0 = dev.now_ns();
  body();
  dev.synchronize();
  std::array<double, 1> once{static_cast<double>(dev.now_ns() - t0) * 1e-9};
  dev.max_to_all(once);
  const int reps = std::clamp(static_cast<int>(seconds / rounds / std::max(once[0], 1e-9)), 1, 100000);
  std::array<double, rounds> t{};
  for (double& round : t) {
    dev.barrier();
    t0 = dev.now_ns();
    for (int i = 0; i < reps; ++i) body();
    dev.synchronize();
    round = static_cast<double>(dev.now_ns() - t0) * 1e-9 / reps;
  }
  std::sort(t.begin(), t.end());
  if (meter != nullptr) meter->tick();
  return {t[1], t[1] > 0.0 ? (t[2] - t[0]) / t[1] : 0.0};
}

double mean_over_ranks(Device& dev, double v) {
  std::array<double, 1> x{v};
  dev.sum_to_all(x);
  return x[0] / dev.world();
}

double max_over_ranks(Device& dev, double v) {
  std::array<double, 1> x{v};
  dev.max_to_all(x);
  return x[0];
}

// The ranks' mean time (compute: each rank's own work) and their largest spread.
Timing mean_over_ranks(Device& dev, Timing t) { return {mean_over_ranks(dev, t.seconds), max_over_ranks(dev, t.spread)}; }
// The slowest rank's time (communication: it ends when the last rank has its data).
Timing max_over_ranks(Device& dev, Timing t) { return {max_over_ranks(dev, t.seconds), max_over_ranks(dev, t.spread)}; }

// A training step reads each weight and activation once per GEMM, mostly from memory
// rather than cache; so each shape cycles through enough copies of its operands to
// overflow the caches (cold_cache_bytes in all), as cold-cache GEMM benchmarks do.

void measure_gemms(Device& dev, const CalibrateOptions& o, Calibration& c) {
  for (const Shape& s : gemm_grid(o.quick, o.large_shapes)) {
    const int m = s[0], n = s[1], k = s[2];  // not a structured binding: lambdas below capture them
    const std::size_t a_n = static_cast<std::size_t>(m) * k;
    const std::size_t b_n = static_cast<std::size_t>(k) * n;
    const std::size_t c_n = static_cast<std::size_t>(m) * n;
    const std::size_t copies = std::clamp<std::size_t>(cold_cache_bytes / ((a_n + b_n + c_n) * sizeof(float)), 1, 256);
    Buffer a = dev.allocate_floats(a_n * copies);  // filled below
    Buffer b = dev.allocate_floats(b_n * copies);
    Buffer out = dev.zeroed_floats(c_n * copies);
    fill(dev, a, [](std::size_t i) { return static_cast<float>(i % 7) * 0.01F; });
    fill(dev, b, [](std::size_t i) { return static_cast<float>(i % 5) * 0.01F; });
    // The three forms a layer runs: forward (NN), input gradient (NT), weight gradient (TN).
    std::size_t next = 0;
    for (const scenario::Dtype d : o.gemm_precisions) {
      dev.set_gemm_precision(d);
      if (d == scenario::Dtype::fp8) {  // FP8 operands, as the shard hands them: on a GPU with FP8 tensor cores these
                                        // run there
        for (std::size_t i = 0; i < copies; ++i) {
          dev.fake_quantize_fp8(a.f() + i * a_n, a.f() + i * a_n, static_cast<std::int64_t>(a_n), false);
          dev.fake_quantize_fp8(b.f() + i * b_n, b.f() + i * b_n, static_cast<std::int64_t>(b_n), false);
        }
      }
      for (const int form : {0, 1, 2}) {
        const Timing t = time_call(dev, o.seconds_per_point, [&] {
          const std::size_t i = next++ % copies;
          const float* pa = a.f() + i * a_n;
          const float* pb = b.f() + i * b_n;
          float* pc = out.f() + i * c_n;
          if (form == 0) dev.gemm(false, false, m, n, k, 1.0F, pa, k, pb, n, 0.0F, pc, n);
          if (form == 1) dev.gemm(false, true, m, n, k, 1.0F, pa, k, pb, k, 0.0F, pc, n);
          if (form == 2) dev.gemm(true, false, m, n, k, 1.0F, pa, m, pb, n, 0.0F, pc, n);
        });
        const Timing all = mean_over_ranks(dev, t);
        c.gemms.push_back({m, n, k, d, all.seconds, form == 1 ? "NT" : form == 2 ? "TN" : "NN", all.spread});
      }
    }
  }
  dev.set_gemm_precision(scenario::Dtype::fp32);
}

std::vector<std::int64_t> kernel_sizes(const CalibrateOptions& o) {
  std::vector<std::int64_t> sizes =
      o.quick ? std::vector<std::int64_t>{1 << 16} : std::vector<std::int64_t>{1 << 16, 1 << 20, 1 << 22};
  if (o.large_shapes) sizes.push_back(1 << 26);  // 256 MiB: beyond a GPU's L2
  return sizes;
}

void measure_kernels(Device& dev, const CalibrateOptions& o, Calibration& c) {
  constexpr int width = 256;  // layer-norm row
  constexpr int t = 128;      // softmax block
  for (const std::int64_t n : kernel_sizes(o)) {
    Buffer x = dev.zeroed_floats(static_cast<std::size_t>(n));
    Buffer y = dev.zeroed_floats(static_cast<std::size_t>(n));
    Buffer z = dev.zeroed_floats(static_cast<std::size_t>(n));
    Buffer w = dev.zeroed_floats(static_cast<std::size_t>(n));
    Buffer stats = dev.zeroed_floats(static_cast<std::size_t>(2 * n / width));
    Buffer gamma = dev.zeroed_floats(width);
    Buffer beta = dev.zeroed_floats(width);
    fill(dev, x, [](std::size_t i) { return static_cast<float>(i % 13) * 0.1F - 0.6F; });
    fill(dev, y, [](std::size_t i) { return static_cast<float>(i % 11) * 0.05F; });
    fill(dev, gamma, [](std::size_t) { return 1.0F; });
    const int rows = static_cast<int>(n / width);
    const int blocks = static_cast<int>(n / (t * t));
    float* mean = stats.f();
    float* rstd = stats.f() + rows;
    const double e = sizeof(float);
    const auto nd = static_cast<double>(n);
    auto add = [&](std::string name, double bytes, auto&& body) {
      const Timing all = mean_over_ranks(dev, time_call(dev, o.seconds_per_point, body));
      c.kernels.push_back({std::move(name), n, bytes, all.seconds, all.spread});
    };
    add("layer_norm_forward", 2 * e * nd,
        [&] { dev.layer_norm_forward(y.f(), mean, rstd, x.f(), gamma.f(), beta.f(), rows, width); });
    add("layer_norm_backward", 4 * e * nd, [&] {
      dev.layer_norm_backward(z.f(), w.f(), w.f() + width, y.f(), x.f(), mean, rstd, gamma.f(), rows, width);
    });
    add("gelu_forward", 2 * e * nd, [&] { dev.gelu_forward(y.f(), x.f(), n); });
    add("gelu_backward", 4 * e * nd, [&] { dev.gelu_backward(z.f(), x.f(), y.f(), n); });
    add("causal_softmax_forward", 2 * e * nd,
        [&] { dev.causal_softmax_forward(y.f(), x.f(), blocks, t, 0.125F); });
    add("causal_softmax_backward", 3 * e * nd,
        [&] { dev.causal_softmax_backward(z.f(), y.f(), x.f(), blocks, t, 0.125F); });
    add("residual_add", 3 * e * nd, [&] { dev.add(z.f(), x.f(), y.f(), n); });
    add("accumulate", 3 * e * nd, [&] { dev.accumulate(z.f(), x.f(), n); });
    int step = 0;
    add("adamw", 7 * e * nd,
        [&] { dev.adamw(w.f(), y.f(), z.f(), x.f(), n, 1e-9, 0.9, 0.999, 1e-8, 0.0, ++step); });
  }
  Buffer tiny = dev.zeroed_floats(16);
  c.launch_seconds = mean_over_ranks(dev, time_call(dev, o.seconds_per_point, [&] {
                                       dev.accumulate(tiny.f(), tiny.f(), 1);
                                     }).seconds);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// On a device that queues its kernels: each round keeps the device busy for a few ms with
// large additions, then issues `n` tiny kernels between two events. The host's clock
// around the issuing gives the issue time (the calls return before the kernels run); the
// events, with the tiny kernels queued behind the busy work, give the device's time per
// kernel run back to back. Then `n` one-float all-reduces over every rank, their posting
// timed on the host. Medians over the rounds.
void measure_issue(Device& dev, Calibration& c) {
  c.sms = dev.multiprocessors();
  if (c.sms <= 0) return;
  constexpr int n = 256;
  constexpr int rounds = 7;
  constexpr std::int64_t half = std::int64_t{1} << 24;  // 2 x 64 MiB: past any L2
  Buffer busy = dev.zeroed_floats(static_cast<std::size_t>(2 * half));
  Buffer tiny = dev.zeroed_floats(16);
  dev.align_clock();  // the events' time base
  std::vector<double> issue;
  std::vector<double> device;
  for (int r = 0; r < rounds; ++r) {
    dev.synchronize();
    for (int i = 0; i < 32; ++i) dev.accumulate(busy.f(), busy.f() + half, half);
    const std::int64_t t0 = dev.now_ns();
    const Event e0 = dev.record();
    for (int i = 0; i < n; ++i) dev.accumulate(tiny.f(), tiny.f() + 8, 1);
    const Event e1 = dev.record();
    const std::int64_t t1 = dev.now_ns();
    dev.synchronize();
    issue.push_back(static_cast<double>(t1 - t0) * 1e-9 / n);
    device.push_back(static_cast<double>(dev.event_time_ns(e1) - dev.event_time_ns(e0)) * 1e-9 / n);
    dev.forget_events();
  }
  c.issue_seconds = mean_over_ranks(dev, median(issue));
  c.device_launch_seconds = mean_over_ranks(dev, median(device));
  if (dev.world() < 2) return;
  std::vector<int> all(static_cast<std::size_t>(dev.world()));
  std::iota(all.begin(), all.end(), 0);
  const Comm comm = dev.comm_create(all, 899);
  std::vector<double> post;
  std::vector<Request> posted;
  for (int r = 0; r < rounds; ++r) {
    dev.barrier();
    const std::int64_t t0 = dev.now_ns();
    for (int i = 0; i < n / 8; ++i) posted.push_back(dev.all_reduce(tiny.f() + (i % 8), 1, comm));
    post.push_back(static_cast<double>(dev.now_ns() - t0) * 1e-9 / (n / 8));
    for (Request q : posted) dev.wait(q);
    posted.clear();
  }
  c.post_seconds = mean_over_ranks(dev, median(post));
}

std::vector<int> group_sizes(int world) {
  std::vector<int> g;
  for (int n = 2; n < world; n *= 2) g.push_back(n);
  if (world >= 2) g.push_back(world);
  return g;
}

// The CPU a transfer between nodes costs its two ranks (calibrate --emulated on the CPU
// backend): rank 0 and the first rank of the next node time a GEMM alone, then while rank 0
// sends `bytes` to the other, both computing GEMMs until the transfer is done (each GEMM
// drives the transfer's progress, as the executor's kernels do). A rank's compute loses
// 1 - alone / during of its speed to the network stack while the transfer moves at its
// rate; that share over the rate is its CPU seconds per byte. The median of three rounds.
void measure_network_cpu(Device& dev, const CalibrateOptions& o, Calibration& c) {
  if (o.node_ranks <= 0 || dev.multiprocessors() > 0 || dev.world() <= o.node_ranks) return;
  meter->begin("the CPU a transfer between nodes takes");
  const int me = dev.rank();
  const int peer = o.node_ranks;
  const bool in = me == 0 || me == peer;
  constexpr int n = 256;
  const std::int64_t count = std::min<std::int64_t>(o.max_comm_bytes, std::int64_t{4} << 20) / 4;
  Buffer a = dev.zeroed_floats(n * n), b = dev.zeroed_floats(n * n), out = dev.zeroed_floats(n * n);
  Buffer data = dev.zeroed_floats(static_cast<std::size_t>(count));
  auto gemm = [&] { dev.gemm(false, false, n, n, n, 1.0f, a.f(), n, b.f(), n, 0.0f, out.f(), n); };
  std::vector<double> shares;
  for (int round = 0; round < 3; ++round) {
    double alone = 0.0, during = 0.0, rate = 0.0;
    dev.barrier();
    if (in) {
      std::int64_t t0 = dev.now_ns();
      int k = 0;
      for (; k < 8 || dev.now_ns() - t0 < 50'000'000; ++k) gemm();
      alone = static_cast<double>(dev.now_ns() - t0) * 1e-9 / k;
    }
    dev.barrier();
    if (in) {
      const Request r = me == 0 ? dev.send(data.f(), count, peer, 11) : dev.recv(data.f(), count, 0, 11);
      const std::int64_t t0 = dev.now_ns();
      int k = 0;
      std::int64_t end = 0;
      while (!dev.test(r, &end)) {
        gemm();
        ++k;
      }
      const double seconds = static_cast<double>(std::max(end, t0 + 1) - t0) * 1e-9;
      during = k > 0 ? seconds / k : alone;
      rate = static_cast<double>(count) * 4.0 / seconds;
    }
    // Rank 0's share as the sender, the peer's as the receiver, to every rank.
    std::vector<double> share(2, 0.0);
    if (in && during > 0.0 && rate > 0.0) share[me == 0 ? 0 : 1] = std::max(0.0, 1.0 - alone / during) / rate;
    dev.sum_to_all(share);
    shares.push_back(share[0]);
    shares.push_back(share[1]);
  }
  std::vector<double> send{shares[0], shares[2], shares[4]}, receive{shares[1], shares[3], shares[5]};
  std::sort(send.begin(), send.end());
  std::sort(receive.begin(), receive.end());
  c.send_cpu_per_byte = send[1];
  c.receive_cpu_per_byte = receive[1];
}

void measure_comms(Device& dev, const CalibrateOptions& o, Calibration& c) {
  const int world = dev.world();
  if (world < 2) return;
  // Buffers cycle through cold_cache_bytes (or the largest message, if larger), so each
  // call meets memory a training step's gradients or activations would: not in cache.
  const std::int64_t max_floats = o.max_comm_bytes / 4;
  const std::int64_t region = std::max<std::int64_t>(max_floats, static_cast<std::int64_t>(cold_cache_bytes / 4));
  Buffer pool = dev.zeroed_floats(static_cast<std::size_t>(region));
  std::int64_t next = 0;
  auto cold = [&](std::int64_t count) {
    if (next + count > region) next = 0;
    float* p = pool.f() + next;
    next += count;
    return p;
  };
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = o.min_comm_bytes; b <= o.max_comm_bytes; b *= 4) sizes.push_back(b);
  const int me = dev.rank();
  // Between nodes: the first rank of each; else every rank.
  const int stride = std::max(1, o.node_ranks);
  const int peer = o.node_ranks > 0 ? stride : 1;
  const int leaders = o.node_ranks > 0 ? (world + stride - 1) / stride : world;

  meter->begin(fmt::format("send/recv between ranks 0 and {}", peer));
  for (const std::int64_t bytes : sizes) {
    const std::int64_t count = bytes / 4;
    const Timing round_trip = time_call(dev, o.seconds_per_point, [&] {
      float* buf = cold(count);
      if (me == 0) {
        dev.wait(dev.send(buf, count, peer, 7));
        dev.wait(dev.recv(buf, count, peer, 8));
      } else if (me == peer) {
        dev.wait(dev.recv(buf, count, 0, 7));
        dev.wait(dev.send(buf, count, 0, 8));
      }
    });
    const Timing slowest = max_over_ranks(dev, round_trip);
    c.comms.push_back({"send/recv", 2, static_cast<double>(bytes), slowest.seconds / 2, slowest.spread});
  }

  int key = 900;
  for (const int g : group_sizes(leaders)) {
    meter->begin(fmt::format("collectives on {} ranks", g));
    std::vector<int> members(static_cast<std::size_t>(g));
    for (int i = 0; i < g; ++i) members[static_cast<std::size_t>(i)] = i * stride;
    const bool in = me % stride == 0 && me / stride < g;
    const Comm comm = in ? dev.comm_create(members, key) : -1;
    ++key;
    for (const std::string op : {"all-reduce", "reduce-scatter", "all-gather"}) {
      for (const std::int64_t bytes : sizes) {
        const std::int64_t count = bytes / 4 / g * g;  // whole blocks of g
        if (count == 0) continue;
        const std::vector<std::int64_t> counts(static_cast<std::size_t>(g), count / g);
        const Timing t = time_call(dev, o.seconds_per_point, [&] {
          if (!in) return;
          float* buf = cold(count);
          if (op == "all-reduce") dev.wait(dev.all_reduce(buf, count, comm));
          if (op == "reduce-scatter") dev.wait(dev.reduce_scatter(buf, counts, comm));
          if (op == "all-gather") dev.wait(dev.all_gather(buf, counts, comm));
        });
        const Timing slowest = max_over_ranks(dev, in ? t : Timing{});
        c.comms.push_back({op, g, static_cast<double>(count * 4), slowest.seconds, slowest.spread});
      }
    }
  }
}

}  // namespace

Calibration calibrate(Device& dev, const CalibrateOptions& options, const CalibrateProgress& progress) {
  if (options.min_comm_bytes < 4 || options.max_comm_bytes < options.min_comm_bytes) {
    throw std::invalid_argument("calibrate: communication sizes must run from at least 4 bytes upwards");
  }
  Calibration c;
  c.backend = dev.name();
  c.ranks = dev.world();
  // The measurements to make: GEMMs in three forms per dtype, nine kernels per size and the
  // launch, and per message size a ping-pong and three collectives per group.
  Meter m;
  if (dev.rank() == 0) m.progress = progress;
  std::size_t messages = 0;
  for (std::int64_t b = options.min_comm_bytes; b <= options.max_comm_bytes; b *= 4) ++messages;
  const int leaders = options.node_ranks > 0 ? (dev.world() + options.node_ranks - 1) / options.node_ranks : dev.world();
  m.total = gemm_grid(options.quick, options.large_shapes).size() * 3 * options.gemm_precisions.size() +
            kernel_sizes(options).size() * 9 + 1 + (dev.world() < 2 ? 0 : messages * (1 + 3 * group_sizes(leaders).size()));
  meter = &m;
  struct Reset {
    ~Reset() { meter = nullptr; }
  } reset;
  m.begin("GEMMs");
  measure_gemms(dev, options, c);
  m.begin("element-wise kernels");
  measure_kernels(dev, options, c);
  m.begin("the host's and the device's part of a kernel");
  measure_issue(dev, c);
  measure_comms(dev, options, c);
  measure_network_cpu(dev, options, c);
  reject_outliers(c);
  return c;
}

std::size_t reject_outliers(Calibration& c) {
  std::size_t rejected = 0;
  std::vector<std::string> why(c.gemms.size());
  for (std::size_t i = 0; i < c.gemms.size(); ++i) {
    const GemmSample& g = c.gemms[i];
    std::vector<double> near;
    for (std::size_t j = 0; j < c.gemms.size(); ++j) {
      const GemmSample& h = c.gemms[j];
      const double ratio = h.size() / g.size();
      if (j != i && h.dtype == g.dtype && ratio >= 0.8 && ratio <= 1.25 && h.seconds > 0.0) near.push_back(h.rate());
    }
    if (near.size() < 2 || g.seconds <= 0.0) continue;
    const double typical = median(near);
    if (g.rate() < typical / 4 || g.rate() > typical * 4) {
      why[i] = fmt::format("{:.3g} FLOP/s against {:.3g} for GEMMs of its size", g.rate(), typical);
    }
  }
  for (std::size_t i = 0; i < c.gemms.size(); ++i) {
    if (why[i].empty()) continue;
    c.gemms[i].rejected = std::move(why[i]);
    ++rejected;
  }
  // Each collective and group's series, by size.
  std::vector<CommSample*> series;
  for (CommSample& s : c.comms) series.push_back(&s);
  std::stable_sort(series.begin(), series.end(), [](const CommSample* a, const CommSample* b) {
    return std::tie(a->op, a->group, a->bytes) < std::tie(b->op, b->group, b->bytes);
  });
  for (std::size_t i = 0; i < series.size(); ++i) {
    CommSample& s = *series[i];
    const bool next = i + 1 < series.size() && series[i + 1]->op == s.op && series[i + 1]->group == s.group;
    const bool before = i > 0 && series[i - 1]->op == s.op && series[i - 1]->group == s.group;
    if (next && s.seconds > 2.0 * series[i + 1]->seconds) {
      s.rejected = fmt::format("took {:.3g} s, more than twice the {:.0f}-byte message's {:.3g} s", s.seconds,
                               series[i + 1]->bytes, series[i + 1]->seconds);
    } else if (!next && before && s.seconds > 16.0 * series[i - 1]->seconds) {
      s.rejected = fmt::format("took {:.3g} s, more than 16 times the {:.0f}-byte message's {:.3g} s", s.seconds,
                               series[i - 1]->bytes, series[i - 1]->seconds);
    }
    if (!s.rejected.empty()) ++rejected;
  }
  return rejected;
}

ProfileFit fit_profile(const Calibration& c) {
  ProfileFit f;
  auto at = [](scenario::Dtype d) { return static_cast<std::size_t>(d); };
  for (const GemmSample& g : c.gemms) {
    if (g.rejected.empty()) f.peak[at(g.dtype)] = std::max(f.peak[at(g.dtype)], g.rate());
  }
  if (!c.gemms.empty()) {
    // Half-octave bins of size: bin i holds sizes in [2^(i/2 - 1/4), 2^(i/2 + 1/4)).
    std::vector<std::pair<long, std::pair<double, double>>> keyed;  // bin, (size, efficiency)
    for (const GemmSample& g : c.gemms) {
      if (!g.rejected.empty()) continue;
      keyed.push_back({std::lround(2.0 * std::log2(g.size())), {g.size(), g.rate() / f.peak[at(g.dtype)]}});
    }
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < keyed.size();) {
      std::size_t j = i;
      double log_size = 0.0;
      std::vector<double> effs;
      for (; j < keyed.size() && keyed[j].first == keyed[i].first; ++j) {
        log_size += std::log(keyed[j].second.first);
        effs.push_back(keyed[j].second.second);
      }
      f.efficiency.emplace_back(std::exp(log_size / static_cast<double>(j - i)), median(effs));
      i = j;
    }
  }
  std::int64_t largest = 0;
  for (const KernelSample& k : c.kernels) largest = std::max(largest, k.elements);
  std::vector<double> rates;
  for (const KernelSample& k : c.kernels) {
    if (k.elements != largest || k.seconds <= 0.0) continue;
    if (k.kernel == "adamw") {
      f.optimizer_bandwidth = 32.0 * static_cast<double>(k.elements) / k.seconds;
      continue;
    }
    rates.push_back(k.bandwidth());
  }
  f.memory_bandwidth = median(rates);
  f.launch_overhead = c.launch_seconds;
  if (c.sms > 0) {
    if (c.device_launch_seconds > 0.0) f.launch_overhead = c.device_launch_seconds;
    f.host_kernel = c.issue_seconds;
    // One rank posts no collective: a call costs at least the kernel it launches.
    f.host_communication = c.post_seconds > 0.0 ? c.post_seconds : c.issue_seconds;
  }

  double best_large = 0.0;
  double best_any = 0.0;
  const CommSample* smallest = nullptr;
  for (const CommSample& s : c.comms) {
    if (s.op != "send/recv" || !s.rejected.empty()) continue;
    best_any = std::max(best_any, s.algbw());
    if (s.bytes >= double(1 << 20)) best_large = std::max(best_large, s.algbw());
    if (smallest == nullptr || s.bytes < smallest->bytes) smallest = &s;
  }
  f.link_bandwidth = best_large > 0.0 ? best_large : best_any;
  if (smallest != nullptr) f.link_latency = std::max(0.0, smallest->seconds - smallest->bytes / f.link_bandwidth);
  f.send_cpu_per_byte = c.send_cpu_per_byte;
  f.receive_cpu_per_byte = c.receive_cpu_per_byte;
  for (const CommSample& s : c.comms) {
    if (s.op != "send/recv" && s.rejected.empty()) f.collectives.push_back({s.op, s.group, s.bytes, s.busbw()});
  }
  std::stable_sort(f.collectives.begin(), f.collectives.end(), [](const auto& a, const auto& b) {
    return std::tie(a.op, a.group, a.bytes) < std::tie(b.op, b.group, b.bytes);
  });
  return f;
}

}  // namespace parasim::exec
