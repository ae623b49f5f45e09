#include "report/chrome_trace.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iterator>
#include <mutex>
#include <span>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "report/gzip.hpp"
#include "report/perfetto_trace.hpp"

namespace parasim::report {

namespace {

// The text is built in the string returned (fmt appends to it in place), with no copy.
using Buffer = std::string;

void append(Buffer& b, std::string_view s) {
  b.append(s);
}

// An integer's digits, without a terminating zero to count.
void integer(Buffer& b, long long v) {
  const fmt::format_int digits(v);
  b.append(digits.data(), digits.size());
}

// A JSON string: the names are made by the program, but a scenario's name is the user's.
void quoted(Buffer& b, std::string_view s) {
  b.push_back('"');
  const bool plain = std::none_of(s.begin(), s.end(),
                                  [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; });
  if (plain) {
    b.append(s);
    b.push_back('"');
    return;
  }
  for (char c : s) {
    switch (c) {
      case '"': append(b, "\\\""); break;
      case '\\': append(b, "\\\\"); break;
      case '\n': append(b, "\\n"); break;
      case '\t': append(b, "\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(b), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          b.push_back(c);
        }
    }
  }
  b.push_back('"');
}

// Whether two ops have the same name (op_name reads these fields): the tp ranks' copies of
// an op follow each other in the spans, and their name is made once.
bool same_name(const program::Program& p, const program::Op& a, const program::Op& b) {
  const auto dim = [&p](const program::Op& o) {
    return o.group >= 0 ? std::pair{p.groups[static_cast<std::size_t>(o.group)].dim,
                                    p.groups[static_cast<std::size_t>(o.group)].part}
                        : std::pair{scenario::Dim::dp, program::GroupPart::whole};
  };
  return a.kind == b.kind && a.category == b.category && a.stream == b.stream && a.what == b.what &&
         a.collective == b.collective && a.tp_role == b.tp_role && a.pass == b.pass && a.micro_batch == b.micro_batch &&
         a.piece == b.piece && a.step == b.step && a.layer == b.layer && a.layer_end == b.layer_end &&
         a.peer == b.peer && a.gradient == b.gradient && a.to_host == b.to_host && a.copied == b.copied &&
         dim(a) == dim(b);
}

// A receive is drawn from its send's start (the transfer), within its own span: the sends'
// starts by their match, and a span's drawn start.
struct SendStarts {
  std::unordered_map<std::int64_t, std::int64_t> by_match;
  void saw(const Span& sp, const program::Op& op) {
    if (sp.kind == program::OpKind::send) by_match.emplace(op.match, sp.start);
  }
  [[nodiscard]] std::int64_t drawn_start(const Span& sp, const program::Op& op) const {
    if (sp.kind != program::OpKind::recv) return sp.start;
    const auto it = by_match.find(op.match);
    return it == by_match.end() ? sp.start : std::clamp(it->second, sp.start, sp.end);
  }
};

// A count or size: an integer as one, else the shortest text that reads back the same.
void number(Buffer& b, double v) {
  if (v == std::floor(v) && std::abs(v) < 9e15) {
    integer(b, static_cast<long long>(v));
  } else {
    fmt::format_to(std::back_inserter(b), "{}", v);
  }
}

// Picoseconds as microseconds (the format's unit), exactly and as short as it can be.
void micros(Buffer& b, std::int64_t ps) {
  if (ps < 0) {
    b.push_back('-');
    ps = -ps;
  }
  const std::int64_t whole = ps / 1000000;
  std::int64_t frac = ps % 1000000;
  integer(b, whole);
  if (frac == 0) return;
  char digits[7] = {'.', '0', '0', '0', '0', '0', '0'};
  for (int i = 6; i > 0; --i, frac /= 10) digits[i] = static_cast<char>('0' + frac % 10);
  int n = 7;
  while (digits[n - 1] == '0') --n;
  b.append(digits, static_cast<std::size_t>(n));
}

}  // namespace

// A link's utilisation as a step function, averaged over windows of `window` picoseconds:
// one value per window, emitted when it changes. Flows switch links fully on and off
// thousands of times a step; the mean per window is what the counter track can show.
std::vector<std::pair<std::int64_t, double>> windowed_utilisation(const std::vector<std::pair<std::int64_t, double>>& samples,
                                                      std::int64_t end, std::int64_t window) {
  std::vector<std::pair<std::int64_t, double>> out;
  if (samples.empty() || window <= 0) return out;
  std::size_t i = 0;
  double value = 0.0;  // the step function's value at the window's start
  for (std::int64_t w = 0; w < end; w += window) {
    const std::int64_t w_end = std::min(end, w + window);
    double area = 0.0;
    std::int64_t at = w;
    while (i < samples.size() && samples[i].first < w_end) {
      if (samples[i].first > at) {
        area += value * static_cast<double>(samples[i].first - at);
        at = samples[i].first;
      }
      value = samples[i].second;
      ++i;
    }
    area += value * static_cast<double>(w_end - at);
    // To 1e-4 of the link's bandwidth: the track's resolution, and fewer changes to emit.
    const double mean = std::round(area / static_cast<double>(w_end - w) * 1e4) / 1e4;
    if (out.empty() || out.back().second != mean) out.emplace_back(w, mean);
  }
  if (!out.empty() && out.back().second != 0.0) out.emplace_back(end, 0.0);
  return out;
}

// "rank 3 (for ranks 3, 67, 131 and 13 more: 16 data-parallel replicas)"
std::string process_name(const Trace& trace, int r) {
  if (!trace.folded()) return fmt::format("rank {}", r);
  std::vector<int> stands;
  for (int q = 0; q < trace.world; ++q) {
    if (trace.mirror(q) == r) stands.push_back(q);
  }
  std::string list;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, stands.size()); ++i)
    list += fmt::format("{}{}", i > 0 ? ", " : "", stands[i]);
  if (stands.size() > 3) list += fmt::format(" and {} more", stands.size() - 3);
  return fmt::format("rank {} (for ranks {}: {} data-parallel replicas)", r, list, stands.size());
}

std::vector<std::int64_t> drawn_starts(const Trace& trace, const program::Program& program) {
  auto op = [&program](const Span& sp) -> const program::Op& { return program.ops[static_cast<std::size_t>(sp.op)]; };
  SendStarts sends;  // every send first: a measured trace may list a receive before its send
  for (const Span& sp : trace.spans) sends.saw(sp, op(sp));
  std::vector<std::int64_t> out;
  out.reserve(trace.spans.size());
  for (const Span& sp : trace.spans) out.push_back(sends.drawn_start(sp, op(sp)));
  return out;
}

std::int64_t counter_window(const Trace& trace) {
  return std::max<std::int64_t>(trace.step_end / 2000, 1000000);
}

namespace {

// The process and thread names, and the links' process: every event after them opens with
// a comma.
void header(Buffer& b, int world, const std::vector<std::int32_t>& mirror_of) {
  Trace ranks;  // what process_name() reads
  ranks.world = world;
  ranks.mirror_of = mirror_of;
  bool first = true;
  auto event = [&] {
    append(b, first ? "{\"traceEvents\":[\n{" : ",\n{");
    first = false;
  };
  for (int r = 0; r < world; ++r) {
    if (ranks.mirror(r) != r) continue;  // folded: only replica 0's ranks have spans
    event();
    fmt::format_to(std::back_inserter(b), R"("ph":"M","name":"process_name","pid":{},"args":{{"name":)", r);
    quoted(b, process_name(ranks, r));
    append(b, "}}");
    for (int s = 0; s < program::stream_count; ++s) {
      event();
      fmt::format_to(std::back_inserter(b),
                     R"("ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})", r, s,
                     to_string(static_cast<program::Stream>(s)));
    }
  }
  event();
  fmt::format_to(std::back_inserter(b), R"("ph":"M","name":"process_name","pid":{},"args":{{"name":"links"}}}})", world);
}

// A complete event per span, drawn from starts[i] (drawn_starts).
void span_events(const program::Program& program, std::span<const Span> spans, const std::int64_t* starts,
                 Buffer& out) {
  out.reserve(out.size() + spans.size() * 170);
  const program::Op* named = nullptr;  // the op whose name `name` is
  std::string name;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& sp = spans[i];
    const program::Op& op = program.ops[static_cast<std::size_t>(sp.op)];
    if (named == nullptr || !same_name(program, *named, op)) {
      name = program::op_name(program, sp.op);
      named = &op;
    }
    const std::int64_t start = starts[i];
    append(out, ",\n{\"ph\":\"X\",\"name\":");
    quoted(out, name);
    append(out, ",\"cat\":\"");
    append(out, to_string(sp.category));
    append(out, "\",\"pid\":");
    integer(out, sp.rank);
    append(out, ",\"tid\":");
    integer(out, static_cast<int>(sp.stream));
    append(out, ",\"ts\":");
    micros(out, start);
    append(out, ",\"dur\":");
    micros(out, sp.end - start);
    append(out, ",\"args\":{");
    const char* sep = "";
    if (sp.micro_batch >= 0) {
      append(out, "\"micro_batch\":");
      integer(out, sp.micro_batch);
      sep = ",";
    }
    if (op.flops > 0) {
      append(out, sep);
      append(out, "\"flops\":");
      number(out, op.flops);
      sep = ",";
    }
    if (op.bytes > 0) {
      append(out, sep);
      append(out, "\"bytes\":");
      number(out, op.bytes);
    }
    append(out, "}}");
  }
}

// Counters, then the closing: memory on each rank's process, link utilisation on the
// "links" process (its mean per window, counter_window). A trace without counters over
// time shows each busy link's mean utilisation over the step instead.
void tail(Buffer& b, const Trace& trace, const topology::Cluster& cluster) {
  const int links_pid = trace.world;
  auto counter = [&](std::string_view name, int pid, std::int64_t ts, const char* key, double v) {
    append(b, ",\n{\"ph\":\"C\",\"name\":");
    quoted(b, name);
    fmt::format_to(std::back_inserter(b), R"(,"pid":{},"ts":)", pid);
    micros(b, ts);
    fmt::format_to(std::back_inserter(b), R"(,"args":{{"{}":{}}}}})", key, v);
  };
  bool link_counters = false;
  const std::int64_t window = counter_window(trace);
  for (const Counter& c : trace.counters) {
    if (c.rank >= 0) {
      for (const auto& [t, v] : c.samples) counter(c.name, c.rank, t, "GiB", v / (1024.0 * 1024 * 1024));
      continue;
    }
    link_counters = true;
    for (const auto& [t, v] : windowed_utilisation(c.samples, trace.step_end, window))
      counter(c.name, links_pid, t, "utilisation", v);
  }
  const double step = trace.step_seconds();
  if (!link_counters) {
    for (const LinkUse& l : trace.links) {
      const double util = step > 0 ? l.bytes / (cluster.link(l.link).bandwidth * step) : 0.0;
      const std::string name = cluster.link_name(l.link);
      counter(name, links_pid, 0, "utilisation", util);
      counter(name, links_pid, trace.step_end, "utilisation", 0.0);
    }
  }
  append(b, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"kind\":");
  quoted(b, trace.kind);
  if (!trace.model.empty()) {
    append(b, ",\"model\":");
    quoted(b, trace.model);
  }
  fmt::format_to(std::back_inserter(b), ",\"ranks\":{},\"folded\":{}}}}}\n", trace.world,
                 trace.folded() ? "true" : "false");
}

}  // namespace

std::string chrome_trace_json(const Trace& trace, const program::Program& program, const topology::Cluster& cluster) {
  Buffer b;
  header(b, trace.world, trace.mirror_of);
  // A receive is posted long before its data comes (every pipeline receive at the step's
  // start): drawn from its send's start, it shows the transfer, not the posting.
  const std::vector<std::int64_t> starts = drawn_starts(trace, program);
  // The spans in blocks formatted on every core, joined in order: the same text as one
  // thread's.
  const std::size_t n = trace.spans.size();
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1,
                                                      std::max<std::size_t>(1, std::min<std::size_t>(8, n / 50000)));
  std::vector<std::string> blocks(threads);
  {
    const std::span<const Span> all(trace.spans);
    auto part = [&](std::size_t t) {
      const std::size_t from = n * t / threads;
      span_events(program, all.subspan(from, n * (t + 1) / threads - from), starts.data() + from, blocks[t]);
    };
    std::vector<std::jthread> workers;
    std::size_t started = 1;
    try {
      for (; started < threads; ++started) workers.emplace_back(part, started);
    } catch (const std::system_error&) {
      // The system refused a thread (a pids limit): this one formats the blocks left.
    }
    for (std::size_t t = started; t < threads; ++t) part(t);
    part(0);
  }
  std::size_t total = b.size();
  for (const std::string& block : blocks) total += block.size();
  b.reserve(total + 64 * trace.counters.size() * 64 + 4096);
  for (std::string& block : blocks) {
    append(b, block);
    std::string().swap(block);
  }
  tail(b, trace, cluster);
  return b;
}

// The streaming writer: blocks of spans queue for one worker thread, which draws each
// receive from its send's start (a simulation ends a send before its receive) and formats
// them, into the text or through gzip.
struct ChromeTraceStream::State {
  explicit State(bool gz) {
    if (gz) gzip = std::make_unique<GzipWriter>();
  }
  std::unique_ptr<GzipWriter> gzip;
  Buffer text;  // what is formatted (and, with gzip, not yet compressed)
  const program::Program* program = nullptr;
  SendStarts sends;
  std::vector<std::int64_t> starts;

  std::mutex mutex;
  std::condition_variable more;
  std::deque<std::vector<Span>> queue;
  bool last = false;  // no block follows those queued
  std::exception_ptr failed;
  std::jthread worker;

  void format(const std::vector<Span>& spans) {
    starts.clear();
    for (const Span& sp : spans) {
      const program::Op& op = program->ops[static_cast<std::size_t>(sp.op)];
      sends.saw(sp, op);
      starts.push_back(sends.drawn_start(sp, op));
    }
    span_events(*program, spans, starts.data(), text);
    if (gzip) {
      gzip->add(text);
      text.clear();
    }
  }

  void work(const std::stop_token& stop) {
    for (;;) {
      std::vector<Span> block;
      {
        std::unique_lock lock(mutex);
        more.wait(lock, [&] { return stop.stop_requested() || last || !queue.empty(); });
        if (queue.empty()) return;  // the last block done, or stopped
        if (stop.stop_requested()) return;
        block = std::move(queue.front());
        queue.pop_front();
      }
      try {
        format(block);
      } catch (...) {
        const std::lock_guard lock(mutex);
        failed = std::current_exception();
        queue.clear();
        return;
      }
    }
  }
};

ChromeTraceStream::ChromeTraceStream(bool gzip) : state_(std::make_unique<State>(gzip)) {}

ChromeTraceStream::~ChromeTraceStream() {
  State& st = *state_;
  if (!st.worker.joinable()) return;
  {
    const std::lock_guard lock(st.mutex);  // not between the worker's test and its wait
    st.worker.request_stop();
  }
  st.more.notify_all();
}

void ChromeTraceStream::add(const program::Program& program, std::span<const Span> spans, bool last) {
  State& st = *state_;
  if (st.program == nullptr) {
    st.program = &program;
    header(st.text, program.world, program.mirror_of);
    st.worker = std::jthread([&st](const std::stop_token& stop) { st.work(stop); });
  }
  {
    const std::lock_guard lock(st.mutex);
    if (!spans.empty()) st.queue.emplace_back(spans.begin(), spans.end());
    st.last = last;
  }
  st.more.notify_one();
  // The Program is the caller's only until it returns from the last block.
  if (last) st.worker.join();
}

std::string ChromeTraceStream::finish(const Trace& trace, const topology::Cluster& cluster) {
  State& st = *state_;
  if (st.program == nullptr) throw std::logic_error("ChromeTraceStream::finish before the spans' first block");
  if (st.worker.joinable()) {  // the last block was not marked so: what is queued is all
    {
      const std::lock_guard lock(st.mutex);
      st.last = true;
    }
    st.more.notify_one();
    st.worker.join();
  }
  if (st.failed) std::rethrow_exception(st.failed);
  tail(st.text, trace, cluster);
  if (!st.gzip) return std::move(st.text);
  st.gzip->add(st.text);
  return st.gzip->finish();
}

bool chrome_trace_streamed(std::string_view path) {
  return !perfetto_name(path);
}

std::string chrome_trace_file(const Trace& trace, const program::Program& program, const topology::Cluster& cluster,
                              std::string_view path) {
  std::string text = perfetto_name(path) ? perfetto_trace(trace, program, cluster) : chrome_trace_json(trace, program, cluster);
  return gzip_name(path) ? gzip(text) : text;
}

}  // namespace parasim::report
