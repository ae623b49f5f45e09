#include "timelinetrace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "files.h"
#include "report/chrome_trace.hpp"
#include "report/gzip.hpp"
#include "report/metrics.hpp"
#include "topology/units.hpp"

namespace parasim::gui {

namespace {

constexpr int categoryCount = static_cast<int>(program::category_count);

QString q(std::string_view s) { return QString::fromUtf8(s.data(), qsizetype(s.size())); }

std::int32_t categoryFromName(const std::string& name) {
  for (int c = 0; c < categoryCount; ++c) {
    if (to_string(static_cast<program::Category>(c)) == name) return c;
  }
  return -1;
}

QString duration(double ps) { return q(units::format_duration(ps * 1e-12)); }

QString flopsText(double flops) {
  if (flops >= 1e12) return QStringLiteral("%1 TFLOP").arg(flops / 1e12, 0, 'f', 2);
  if (flops >= 1e9) return QStringLiteral("%1 GFLOP").arg(flops / 1e9, 0, 'f', 2);
  if (flops >= 1e6) return QStringLiteral("%1 MFLOP").arg(flops / 1e6, 0, 'f', 2);
  return QStringLiteral("%1 FLOP").arg(flops, 0, 'f', 0);
}

std::int64_t toPicoseconds(double microseconds) { return std::llround(microseconds * 1e6); }

}  // namespace

std::int64_t TimelineLane::busy() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> v;
  v.reserve(spans.size());
  for (const TimelineSpan& s : spans) v.emplace_back(s.start, s.end);
  return report::union_length(std::move(v));
}

QString TimelineTrace::spanName(const TimelineSpan& s) const {
  if (program && s.label >= 0) return QString::fromStdString(program::op_name(*program, s.label));
  if (s.label >= 0 && std::size_t(s.label) < labels.size()) return labels[std::size_t(s.label)];
  return QStringLiteral("?");
}

std::size_t TimelineTrace::spanCount() const {
  std::size_t n = 0;
  for (const TimelineLane& l : lanes) n += l.spans.size();
  return n;
}

void finishLanes(TimelineTrace& t) {
  t.end = 0;
  for (TimelineLane& lane : t.lanes) {
    std::stable_sort(lane.spans.begin(), lane.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.start < b.start; });
    lane.reach.resize(lane.spans.size());
    std::int64_t reach = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < lane.spans.size(); ++i) {
      reach = std::max(reach, lane.spans[i].end);
      lane.reach[i] = reach;
    }
    std::stable_sort(lane.samples.begin(), lane.samples.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (!lane.reach.empty()) t.end = std::max(t.end, lane.reach.back());
    if (!lane.samples.empty()) t.end = std::max(t.end, lane.samples.back().first);
  }
}

TimelineTrace timelineFromTrace(const report::Trace& trace, std::shared_ptr<const program::Program> program,
                                const topology::Cluster& cluster, const QString& title) {
  TimelineTrace t;
  t.kind = q(trace.kind);
  t.title = title;
  t.program = std::move(program);
  std::map<std::pair<int, int>, std::size_t> lane;  // (rank, stream) -> index, rank-major
  for (const report::Span& s : trace.spans) lane.emplace(std::make_pair(int(s.rank), int(s.stream)), 0);
  for (auto& [key, index] : lane) {
    index = t.lanes.size();
    TimelineLane l;
    l.rank = key.first;
    l.stream = key.second;
    l.name = QStringLiteral("rank %1 %2").arg(key.first).arg(q(to_string(static_cast<program::Stream>(key.second))));
    t.lanes.push_back(std::move(l));
  }
  // A receive from its send's start (the transfer), as the Chrome trace draws it.
  const std::vector<std::int64_t> starts = t.program ? report::drawn_starts(trace, *t.program) : std::vector<std::int64_t>{};
  for (std::size_t i = 0; i < trace.spans.size(); ++i) {
    const report::Span& s = trace.spans[i];
    TimelineSpan out;
    out.start = starts.empty() ? s.start : starts[i];
    out.end = s.end;
    out.label = s.op;
    out.microBatch = s.micro_batch;
    out.category = static_cast<std::int32_t>(s.category);
    if (t.program && s.op >= 0) {
      const program::Op& op = t.program->ops[std::size_t(s.op)];
      out.flops = op.flops;
      out.bytes = op.bytes;
    }
    t.lanes[lane.at({int(s.rank), int(s.stream)})].spans.push_back(out);
  }
  if (trace.folded()) {  // one replica's ranks stand for all
    int own = 0;
    for (int r = 0; r < trace.world; ++r) own += trace.mirror(r) == r ? 1 : 0;
    for (TimelineLane& l : t.lanes) l.name += QStringLiteral(" (x%1 replicas)").arg(trace.world / std::max(1, own));
  }
  t.memoryPeak.assign(std::size_t(trace.world), 0.0);
  for (const report::Counter& c : trace.counters) {
    if (c.rank >= 0) {
      t.memoryPeak[std::size_t(c.rank)] = std::max(t.memoryPeak[std::size_t(c.rank)], c.peak());
      continue;
    }
    TimelineLane l;
    l.name = c.link >= 0 ? QString::fromStdString(cluster.link_name(c.link)) : q(c.name);
    l.link = c.link;
    l.samples = c.samples;
    t.lanes.push_back(std::move(l));
  }
  if (std::all_of(t.memoryPeak.begin(), t.memoryPeak.end(), [](double v) { return v == 0.0; })) t.memoryPeak.clear();
  finishLanes(t);
  t.end = std::max(t.end, trace.step_end);
  return t;
}

TimelineTrace readTimelineFile(const QString& path) {
  const QByteArray raw = readRegularFile(path, traceFileLimit);
  std::string text;
  if (report::is_gzip(std::string_view(raw.constData(), static_cast<std::size_t>(raw.size())))) {
    try {
      text = report::gunzip(std::string_view(raw.constData(), static_cast<std::size_t>(raw.size())),
                            static_cast<std::size_t>(traceFileLimit));
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path.toStdString() + ": " + e.what());
    }
  } else {
    text.assign(raw.constData(), static_cast<std::size_t>(raw.size()));
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(path.toStdString() + ": not JSON (" + e.what() + ")");
  }
  const nlohmann::json* events = nullptr;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) events = &doc["traceEvents"];
  if (doc.is_array()) events = &doc;
  if (events == nullptr) {
    throw std::runtime_error(path.toStdString() + ": not a Chrome trace (expected a traceEvents list or an array of events)");
  }
  TimelineTrace t;
  t.kind = QStringLiteral("trace");
  if (doc.is_object() && doc.contains("otherData") && doc["otherData"].contains("kind")) {
    t.kind = QString::fromStdString(doc["otherData"]["kind"].get<std::string>());
  }
  t.title = path;
  std::map<long long, std::string> processes;
  std::map<std::pair<long long, long long>, std::string> threads;
  for (const auto& e : *events) {
    if (e.value("ph", "") != "M" || !e.contains("args")) continue;
    const std::string name = e["args"].value("name", "");
    if (e.value("name", "") == "process_name") processes[e.value("pid", 0LL)] = name;
    if (e.value("name", "") == "thread_name") threads[{e.value("pid", 0LL), e.value("tid", 0LL)}] = name;
  }
  std::map<std::pair<long long, long long>, TimelineLane> lanes;  // (pid, tid), in rank and stream order
  std::map<std::string, std::size_t> counters;                    // link name -> index in `links`
  std::vector<TimelineLane> links;
  std::map<std::string, std::int64_t> labels;
  std::size_t index = 0;
  for (const auto& e : *events) {
    ++index;
    const std::string ph = e.value("ph", "");
    const long long pid = e.value("pid", 0LL);
    const std::string process = processes.count(pid) ? processes[pid] : "process " + std::to_string(pid);
    try {
      if (ph == "X") {
        const long long tid = e.value("tid", 0LL);
        auto [it, added] = lanes.try_emplace(std::make_pair(pid, tid));
        if (added) {
          TimelineLane& l = it->second;
          const auto th = threads.find({pid, tid});
          l.name = QString::fromStdString(process + " " + (th != threads.end() ? th->second : "thread " + std::to_string(tid)));
          if (process.rfind("rank ", 0) == 0) l.rank = int(pid);
          l.stream = int(tid);
        }
        TimelineSpan s;
        s.start = toPicoseconds(e.at("ts").get<double>());
        s.end = s.start + toPicoseconds(e.value("dur", 0.0));
        const std::string name = e.value("name", "");
        auto [label, fresh] = labels.emplace(name, std::int64_t(t.labels.size()));
        if (fresh) t.labels.push_back(QString::fromStdString(name));
        s.label = label->second;
        std::string category = e.value("cat", "");
        if (e.contains("args") && e["args"].is_object()) {
          const auto& a = e["args"];
          category = a.value("category", category);
          s.microBatch = a.value("micro_batch", -1);
          s.flops = a.value("flops", 0.0);
          s.bytes = a.value("bytes", 0.0);
        }
        s.category = categoryFromName(category);
        it->second.spans.push_back(s);
      } else if (ph == "C" && e.contains("args") && e["args"].is_object()) {
        const auto& a = e["args"];
        const std::int64_t ts = toPicoseconds(e.at("ts").get<double>());
        if (a.contains("GiB") && process.rfind("rank ", 0) == 0) {
          if (t.memoryPeak.size() <= std::size_t(pid)) t.memoryPeak.resize(std::size_t(pid) + 1, 0.0);
          t.memoryPeak[std::size_t(pid)] = std::max(t.memoryPeak[std::size_t(pid)], a["GiB"].get<double>() * double(1ULL << 30));
        } else if (a.contains("utilisation")) {
          const std::string name = e.value("name", "");
          auto [it, added] = counters.emplace(name, links.size());
          if (added) {
            links.emplace_back();
            links.back().name = QString::fromStdString(name);
          }
          links[it->second].samples.emplace_back(ts, a["utilisation"].get<double>());
        }
      }
    } catch (const nlohmann::json::exception& err) {
      throw std::runtime_error(path.toStdString() + ": event " + std::to_string(index) + ": " + err.what());
    }
  }
  for (auto& [key, lane] : lanes) t.lanes.push_back(std::move(lane));
  for (TimelineLane& lane : links) t.lanes.push_back(std::move(lane));
  if (t.lanes.empty()) throw std::runtime_error(path.toStdString() + ": no spans or counters in the trace");
  finishLanes(t);
  return t;
}

std::vector<PaintItem> foldLane(const TimelineLane& lane, const TimeMapping& m) {
  std::vector<PaintItem> out;
  if (lane.spans.empty() || m.width <= 0.0 || m.span() <= 0.0) return out;
  // The first span that may reach into the window: reach is non-decreasing.
  const auto from = std::upper_bound(lane.reach.begin(), lane.reach.end(), static_cast<std::int64_t>(std::floor(m.start)));
  PaintItem pending;
  bool has = false;
  // A fold's busy time per category (the last slot: unknown), for its dominant kind.
  std::array<std::int64_t, program::category_count + 1> busy{};
  std::array<std::uint32_t, program::category_count + 1> first_seen{};  // ties go to the first seen
  std::uint32_t seen = 0;
  auto slot = [](std::int32_t category) {
    return category >= 0 && std::size_t(category) < program::category_count ? std::size_t(category)
                                                                            : program::category_count;
  };
  auto account = [&](const TimelineSpan& s) {
    const std::size_t k = slot(s.category);
    if (busy[k] == 0) first_seen[k] = seen++;
    busy[k] += std::max<std::int64_t>(1, s.end - s.start);
  };
  auto flush = [&] {
    if (!has) return;
    pending.x1 = std::max(pending.x1, pending.x0 + 1.0);  // a lone thin span stays visible
    if (pending.count > 1) {
      std::size_t best = 0;
      for (std::size_t k = 1; k <= program::category_count; ++k) {
        if (busy[k] > busy[best] || (busy[k] > 0 && busy[k] == busy[best] && first_seen[k] < first_seen[best])) best = k;
      }
      pending.category = best == program::category_count ? -1 : std::int32_t(best);
    }
    out.push_back(pending);
    has = false;
    busy.fill(0);
    seen = 0;
  };
  for (auto i = std::size_t(from - lane.reach.begin()); i < lane.spans.size(); ++i) {
    const TimelineSpan& s = lane.spans[i];
    if (double(s.start) >= m.end) break;
    if (double(s.end) <= m.start) continue;  // ends before the window though a predecessor reaches in
    const double x0 = std::clamp(m.toX(double(s.start)), -2.0, m.width + 2.0);
    const double x1 = std::clamp(m.toX(double(s.end)), -2.0, m.width + 2.0);
    const PaintItem item{x0, x1, s.category, false, i, 1, s.end - s.start};
    if (x1 - x0 >= 1.0) {
      flush();
      out.push_back(item);
    } else if (has && x0 <= pending.x1 + 1.0) {
      pending.x1 = std::max(pending.x1, x1);
      pending.busy += item.busy;
      ++pending.count;
      if (pending.category != s.category) pending.mixed = true;
      account(s);
    } else {
      flush();
      pending = item;
      has = true;
      account(s);
    }
  }
  flush();
  return out;
}

const PaintItem* itemAt(const std::vector<PaintItem>& items, double x, double slop) {
  const PaintItem* best = nullptr;
  double bestDistance = slop;
  for (const PaintItem& it : items) {
    const double d = x < it.x0 ? it.x0 - x : x > it.x1 ? x - it.x1 : 0.0;
    if (best == nullptr ? d <= bestDistance : d < bestDistance) {
      best = &it;
      bestDistance = d;
    }
  }
  return best;
}

std::vector<float> counterColumns(const TimelineLane& lane, const TimeMapping& m) {
  const auto columns = static_cast<std::size_t>(std::max(0.0, std::ceil(m.width)));
  std::vector<float> out(columns, 0.0f);
  if (lane.samples.empty() || columns == 0) return out;
  // The sample holding at the window's start, then every one up to its end.
  auto it = std::upper_bound(lane.samples.begin(), lane.samples.end(), static_cast<std::int64_t>(std::floor(m.start)),
                             [](std::int64_t t, const auto& s) { return t < s.first; });
  if (it != lane.samples.begin()) --it;
  for (; it != lane.samples.end() && double(it->first) <= m.end; ++it) {
    const auto next = std::next(it);
    const double x0 = std::max(0.0, m.toX(double(it->first)));
    const double x1 = next == lane.samples.end() ? m.width : std::min(m.width, m.toX(double(next->first)));
    if (x1 < 0.0 || x0 >= m.width) continue;
    const auto c0 = static_cast<std::size_t>(std::floor(x0));
    const auto c1 = std::min(columns - 1, std::max(c0, static_cast<std::size_t>(std::ceil(x1)) - (x1 > 0.0 ? 1 : 0)));
    for (std::size_t c = c0; c <= c1; ++c) out[c] = std::max(out[c], static_cast<float>(it->second));
  }
  return out;
}

QString categoryName(std::int32_t category) {
  if (category == -2) return QStringLiteral("folded");
  if (category < 0 || category >= categoryCount) return QStringLiteral("other");
  return q(to_string(static_cast<program::Category>(category)));
}

QColor categoryColor(std::int32_t category) {
  switch (category) {
    case 0: return {66, 133, 244};   // forward
    case 1: return {52, 168, 83};    // backward
    case 2: return {251, 188, 5};    // recompute
    case 3: return {155, 89, 182};   // optimizer
    case 4: return {234, 67, 53};    // tp
    case 5: return {121, 85, 72};    // pp
    case 6: return {0, 150, 160};    // dp
    case 7: return {255, 112, 67};   // cp
    case 8: return {233, 30, 99};    // ep
    case 9: return {96, 125, 139};   // offload
    case 10: return {0, 96, 100};    // syncbn
    default: return {170, 170, 170};
  }
}

QString tooltipFor(const TimelineTrace& trace, const TimelineLane& lane, const PaintItem& item) {
  const TimelineSpan& s = lane.spans.at(item.first);
  if (item.count > 1) {
    const TimelineSpan& last = lane.spans.at(item.first + item.count - 1);
    return QStringLiteral("%1 spans folded (%2); zoom in to see them\nfrom %3 to %4, %5 busy")
        .arg(item.count)
        .arg(item.mixed ? QStringLiteral("mixed kinds, mostly %1").arg(categoryName(item.category)) : categoryName(item.category))
        .arg(duration(double(s.start)), duration(double(last.end)), duration(double(item.busy)));
  }
  QString text = trace.spanName(s) + QLatin1Char('\n') + categoryName(s.category);
  if (s.microBatch >= 0) text += QStringLiteral(", micro-batch %1").arg(s.microBatch);
  text += QStringLiteral("\nstart %1, duration %2").arg(duration(double(s.start)), duration(double(s.end - s.start)));
  if (s.flops > 0) text += QStringLiteral("\n%1").arg(flopsText(s.flops));
  if (s.bytes > 0) text += QStringLiteral("\n%1").arg(q(units::format_bytes(s.bytes)));
  return text;
}

}  // namespace parasim::gui
