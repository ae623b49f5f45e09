// The timeline: time <-> pixel mapping, folding of sub-pixel spans, counter columns, the
// lane model and its text dump, reading Chrome trace files back, tooltips, and the zoom
// shared by the predicted and measured views.
#include <QAbstractItemModelTester>
#include <QFile>
#include <QTemporaryDir>
#include <catch2/catch.hpp>
#include <random>
#include <sys/stat.h>

#include "files.h"
#include "models/linkmodel.h"
#include "scenario/load.hpp"
#include "report/chrome_trace.hpp"
#include "runpanel.h"
#include "sim/simulate.hpp"
#include "support.h"
#include "timeline/timelinedelegate.h"
#include "timeline/timelineview.h"

using namespace parasim;
using gui::TimeMapping;

namespace {

constexpr std::int64_t us = 1'000'000;  // picoseconds

gui::TimelineLane laneOf(std::vector<gui::TimelineSpan> spans) {
  gui::TimelineTrace t;
  t.lanes.push_back({});
  t.lanes[0].spans = std::move(spans);
  gui::finishLanes(t);
  return t.lanes[0];
}

gui::TimelineSpan span(std::int64_t start, std::int64_t end, int category = 0) {
  gui::TimelineSpan s;
  s.start = start;
  s.end = end;
  s.category = category;
  return s;
}

// Two ranks: rank 0 computes forward [0, 1 us) and backward [1, 3 us) and all-reduces
// [2.5, 4 us); rank 1 computes forward [0, 1.5 us).
report::Trace handTrace() {
  report::Trace t;
  t.kind = "predicted";
  t.world = 2;
  auto add = [&](int rank, program::Stream st, program::Category c, std::int64_t a, std::int64_t b) {
    report::Span s;
    s.rank = rank;
    s.stream = st;
    s.category = c;
    s.start = a;
    s.end = b;
    s.micro_batch = 0;
    t.spans.push_back(s);
  };
  add(0, program::Stream::compute, program::Category::forward, 0, 1 * us);
  add(0, program::Stream::compute, program::Category::backward, 1 * us, 3 * us);
  add(0, program::Stream::dp, program::Category::dp_comm, 2500000, 4 * us);
  add(1, program::Stream::compute, program::Category::forward, 0, 1500000);
  t.step_end = 4 * us;
  return t;
}

}  // namespace

TEST_CASE("time maps to pixels and back, zoom keeps the time under the cursor, pan moves by pixels", "[gui][timeline]") {
  const TimeMapping m{1000.0, 11000.0, 100.0};  // 100 ps per pixel
  CHECK(m.toX(1000.0) == 0.0);
  CHECK(m.toX(6000.0) == 50.0);
  CHECK(m.toTime(25.0) == 3500.0);
  CHECK(m.psPerPixel() == 100.0);
  const TimeMapping z = m.zoomedAt(25.0, 4.0);
  CHECK(z.toTime(25.0) == Approx(3500.0));
  CHECK(z.span() == Approx(2500.0));
  const TimeMapping p = m.panned(10.0);  // what was at x now shows 10 px to the right
  CHECK(p.toX(m.toTime(40.0)) == Approx(50.0));
  CHECK(p.span() == m.span());
}

TEST_CASE("axis ticks step by 1, 2 or 5 x 10^k and are at least the spacing apart", "[gui][timeline]") {
  // 1 ms over 1000 px with ticks >= 100 px apart: 100 us steps, 11 ticks.
  const TimeMapping m{0.0, 1e9, 1000.0};
  CHECK(gui::tickStep(m, 100.0) == 1e8);
  const auto t = gui::ticks(m, 100.0);
  REQUIRE(t.size() == 11);
  CHECK(t.front() == 0.0);
  CHECK(t.back() == 1e9);
  // 130 px: 130 us wanted, so 200 us steps starting at the first multiple in the window.
  const TimeMapping w{0.5e8, 1e9, 1000.0};
  CHECK(gui::tickStep(w, 130.0) == 2e8);
  CHECK(gui::ticks(w, 130.0).front() == 2e8);
}

TEST_CASE("spans a pixel wide or more are painted as they are, narrower runs fold into one item", "[gui][timeline]") {
  // Two 1000 ps spans, then 1000 spans of 10 ps back to back, then after a 5 px gap
  // another 100 of them, of two kinds.
  std::vector<gui::TimelineSpan> spans{span(0, 1000), span(1000, 2000, 1)};
  for (int i = 0; i < 1000; ++i) spans.push_back(span(10000 + 10 * i, 10010 + 10 * i, 4));
  for (int i = 0; i < 100; ++i) spans.push_back(span(20500 + 10 * i, 20510 + 10 * i, i % 2 == 0 ? 4 : 6));
  const gui::TimelineLane lane = laneOf(spans);
  const TimeMapping m{0.0, 22000.0, 220.0};  // 100 ps per pixel: a small span is 0.1 px
  const std::vector<gui::PaintItem> items = gui::foldLane(lane, m);
  REQUIRE(items.size() == 4);
  CHECK(items[0].count == 1);
  CHECK(items[0].x0 == 0.0);
  CHECK(items[0].x1 == 10.0);
  CHECK(items[1].category == 1);
  CHECK(items[2].count == 1000);
  CHECK(items[2].x0 == Approx(100.0));
  CHECK(items[2].x1 == Approx(200.0));
  CHECK(items[2].busy == 10000);
  CHECK(items[2].category == 4);
  CHECK(items[3].count == 100);
  CHECK(items[3].mixed);            // two kinds, busy alike: the first seen (tp) names the fold
  CHECK(items[3].category == 4);
  CHECK_FALSE(items[2].mixed);
  // A fold's colour is its busiest kind's: 30 tp spans, then 70 dp spans of the same length.
  std::vector<gui::TimelineSpan> most;
  for (int i = 0; i < 100; ++i) most.push_back(span(10 * i, 10 * i + 10, i < 30 ? 4 : 6));
  const auto folded = gui::foldLane(laneOf(most), m);
  REQUIRE(folded.size() == 1);
  CHECK(folded[0].mixed);
  CHECK(folded[0].category == 6);
  // Zoomed in on the first run, its spans are wide enough to stand alone.
  const std::vector<gui::PaintItem> close = gui::foldLane(lane, {10000.0, 10100.0, 100.0});
  REQUIRE(close.size() == 10);
  for (const auto& it : close) CHECK(it.count == 1);
  // A lone span narrower than a pixel stays visible, one pixel wide.
  const auto lone = gui::foldLane(laneOf({span(500, 510)}), m);
  REQUIRE(lone.size() == 1);
  CHECK(lone[0].x1 - lone[0].x0 == 1.0);
}

TEST_CASE("a long span that starts before the window is painted, spans ending before it are not", "[gui][timeline]") {
  const gui::TimelineLane lane = laneOf({span(0, 100), span(50, 100000), span(200, 300), span(90000, 91000)});
  const auto items = gui::foldLane(lane, {80000.0, 100000.0, 200.0});
  REQUIRE(items.size() == 2);
  CHECK(items[0].first == 1);
  CHECK(items[0].x0 == -2.0);  // clamped just outside the left edge
  CHECK(items[1].first == 3);
}

TEST_CASE("folding bounds the items of a huge lane by its pixels and loses no span", "[gui][timeline]") {
  std::mt19937 rng(7);
  std::vector<gui::TimelineSpan> spans;
  std::int64_t t = 0;
  for (int i = 0; i < 200000; ++i) {
    t += std::uniform_int_distribution<int>(0, 50)(rng);
    const std::int64_t d = std::uniform_int_distribution<int>(1, 100)(rng);
    spans.push_back(span(t, t + d, i % 7));
    t += d;
  }
  const gui::TimelineLane lane = laneOf(spans);
  const TimeMapping m{0.0, double(t), 1000.0};
  const auto items = gui::foldLane(lane, m);
  CHECK(items.size() <= 1000);
  std::size_t counted = 0;
  for (const auto& it : items) counted += it.count;
  CHECK(counted == spans.size());
}

TEST_CASE("a counter lane paints the highest value holding in each pixel column", "[gui][timeline]") {
  gui::TimelineLane lane;
  lane.samples = {{0, 0.5}, {5000, 1.0}, {7500, 0.25}, {7600, 0.0}};
  const auto c = gui::counterColumns(lane, {0.0, 10000.0, 10.0});
  REQUIRE(c.size() == 10);
  for (int i = 0; i < 5; ++i) CHECK(c[std::size_t(i)] == 0.5f);
  CHECK(c[5] == 1.0f);
  CHECK(c[6] == 1.0f);
  CHECK(c[7] == 1.0f);  // 1.0 holds until 7500, inside column 7
  CHECK(c[8] == 0.0f);
  CHECK(c[9] == 0.0f);
}

TEST_CASE("the timeline model has a lane per rank and stream, its text dump is the lanes' busy time", "[gui][timeline]") {
  const auto trace = std::make_shared<const gui::TimelineTrace>(gui::timelineFromTrace(
      handTrace(), nullptr, topology::Cluster(scenario::load(test::scenarios + "quickstart.yaml").cluster),
      QStringLiteral("hand")));
  gui::TimelineModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.setTrace(trace);
  CHECK(trace->end == 4 * us);
  // Rank 0's compute is busy 3 us (forward then backward), its dp stream 1.5 us.
  CHECK(gui::dumpModel(model).toStdString() ==
        "time\n"
        "2 spans, busy 3 us\n"
        "1 spans, busy 1.5 us\n"
        "1 spans, busy 1.5 us\n");
  CHECK(model.headerData(0, Qt::Vertical).toString().toStdString() == "rank 0 compute");
  CHECK(model.headerData(1, Qt::Vertical).toString().toStdString() == "rank 0 dp-comm");
  CHECK(model.headerData(2, Qt::Vertical).toString().toStdString() == "rank 1 compute");
}

TEST_CASE("a predicted trace written as Chrome JSON reads back to the same lanes and spans", "[gui][timeline]") {
  const scenario::Scenario s = scenario::load(test::scenarios + "pipeline-microbatches.yaml");
  const sim::Prediction p = sim::predict(s, {true, sim::FoldMode::never});
  const topology::Cluster cluster(s.cluster);
  const std::shared_ptr<const program::Program> program(std::make_shared<program::Program>(p.program));
  const gui::TimelineTrace mine = gui::timelineFromTrace(p.trace, program, cluster, QStringLiteral("x"));
  QTemporaryDir dir;
  const QString file = dir.filePath(QStringLiteral("t.json"));
  {
    QFile f(file);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray::fromStdString(report::chrome_trace_json(p.trace, p.program, cluster)));
  }
  const gui::TimelineTrace read = gui::readTimelineFile(file);
  CHECK(read.kind.toStdString() == "predicted");
  // Span lanes in the same order with the same spans (names from the file); the file's
  // counter lanes are the busiest links.
  std::size_t spanLanes = 0;
  for (const auto& l : read.lanes) spanLanes += l.spans.empty() ? 0 : 1;
  REQUIRE(spanLanes == std::size_t(std::count_if(mine.lanes.begin(), mine.lanes.end(), [](const auto& l) { return !l.spans.empty(); })));
  for (std::size_t i = 0; i < spanLanes; ++i) {
    const auto& a = mine.lanes[i];
    const auto& b = read.lanes[i];
    CHECK(a.name == b.name);
    REQUIRE(a.spans.size() == b.spans.size());
    for (std::size_t k = 0; k < a.spans.size(); ++k) {
      CHECK(std::llabs(a.spans[k].start - b.spans[k].start) <= 1);
      CHECK(std::llabs(a.spans[k].end - b.spans[k].end) <= 1);
      CHECK(a.spans[k].category == b.spans[k].category);
      CHECK(a.spans[k].microBatch == b.spans[k].microBatch);
      CHECK(mine.spanName(a.spans[k]) == read.spanName(b.spans[k]));
    }
  }
  CHECK(read.lanes.size() > spanLanes);  // link utilisation lanes
  CHECK(read.memoryPeak.size() == std::size_t(s.plan.world()));
  CHECK(read.memoryPeak[0] == Approx(mine.memoryPeak[0]).epsilon(1e-9));
}

TEST_CASE("reading a file that is not a trace names the file and the problem", "[gui][timeline]") {
  QTemporaryDir dir;
  auto write = [&](const char* name, const char* text) {
    QFile f(dir.filePath(QString::fromLatin1(name)));
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write(text);
    return f.fileName();
  };
  auto message = [](const QString& path) {
    try {
      gui::readTimelineFile(path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const QString broken = write("broken.json", "{\"traceEvents\": [");
  CHECK_THAT(message(broken), Catch::StartsWith(broken.toStdString() + ": not JSON"));
  const QString other = write("other.json", "{\"a\": 1}");
  CHECK_THAT(message(other), Catch::Contains("not a Chrome trace"));
  const QString empty = write("empty.json", "{\"traceEvents\": []}");
  CHECK_THAT(message(empty), Catch::Contains("no spans"));
  const QString bad = write("bad.json", "{\"traceEvents\": [{\"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": \"x\"}]}");
  CHECK_THAT(message(bad), Catch::Contains("event 1"));
  CHECK_THAT(message(dir.filePath(QStringLiteral("missing.json"))), Catch::Contains("cannot read"));
}

TEST_CASE("tooltips name the span under the mouse, or say how many were folded", "[gui][timeline]") {
  gui::TimelineTrace t;
  t.labels = {QStringLiteral("fwd L0 mb0"), QStringLiteral("tiny")};
  gui::TimelineSpan wide = span(0, 500 * us, 0);
  wide.label = 0;
  wide.microBatch = 0;
  wide.flops = 2.5e9;
  t.lanes.push_back({});
  t.lanes[0].name = QStringLiteral("rank 0 compute");
  t.lanes[0].spans.push_back(wide);
  for (int i = 0; i < 50; ++i) {
    gui::TimelineSpan s = span(600 * us + i * 10, 600 * us + i * 10 + 5, 4);
    s.label = 1;
    t.lanes[0].spans.push_back(s);
  }
  gui::finishLanes(t);
  gui::TimelineModel model;
  model.setTrace(std::make_shared<const gui::TimelineTrace>(t));
  gui::TimelineZoom zoom;
  zoom.setLimit(1000.0 * us);  // fits [0, 1 ms]
  const gui::TimelineDelegate d(&zoom);
  const QString onWide = d.tooltipAt(model, 0, 100.0, 1000.0);  // 100 us into the 500 us span
  CHECK(onWide.toStdString() == "fwd L0 mb0\nforward, micro-batch 0\nstart 0 s, duration 500 us\n2.50 GFLOP");
  CHECK(d.tooltipAt(model, 0, 600.0, 1000.0).startsWith(QStringLiteral("50 spans folded (tp)")));
  CHECK(d.tooltipAt(model, 0, 900.0, 1000.0).isEmpty());
}

TEST_CASE("the predicted and measured views share one zoom", "[gui][timeline][widgets]") {
  gui::TimelinePanel panel;
  panel.resize(1000, 600);
  panel.show();
  auto trace = std::make_shared<gui::TimelineTrace>(gui::timelineFromTrace(
      handTrace(), nullptr, topology::Cluster(scenario::load(test::scenarios + "quickstart.yaml").cluster),
      QStringLiteral("hand")));
  panel.setPredicted(trace);
  auto longer = std::make_shared<gui::TimelineTrace>(*trace);
  longer->end = 8 * us;
  for (auto& lane : longer->lanes) lane.name += QStringLiteral(" with a longer name");
  panel.setMeasured(longer);
  CHECK(panel.zoom()->limit() == 8.0 * us);  // the longer of the two
  CHECK(panel.zoom()->start() == 0.0);
  panel.predictedView()->zoomAt(panel.predictedView()->viewport()->width() / 2.0, 4.0);
  const TimeMapping a = panel.predictedView()->mapping();
  const TimeMapping b = panel.measuredView()->mapping();
  CHECK(a.span() == Approx(2.0 * us));
  CHECK(a.start == b.start);
  CHECK(a.end == b.end);
  // The lanes start at the same x in both views, so a time lines up across them.
  QCoreApplication::processEvents();
  CHECK(panel.measuredView()->verticalHeader()->width() > 100);
  CHECK(panel.predictedView()->verticalHeader()->width() == panel.measuredView()->verticalHeader()->width());
  CHECK(panel.predictedView()->viewport()->width() == panel.measuredView()->viewport()->width());
  // The window stays within the traces (plus a margin) when zoomed far out.
  panel.measuredView()->zoomAt(0.0, 1e-6);
  CHECK(panel.zoom()->end() - panel.zoom()->start() <= 8.0 * us * 1.1 + 1);
  // And never narrower than a nanosecond.
  panel.measuredView()->zoomAt(0.0, 1e12);
  CHECK(panel.zoom()->end() - panel.zoom()->start() == Approx(1000.0));
  // A new prediction keeps a zoomed window; a view of the whole step refits to the new one.
  panel.zoom()->setWindow(1.0 * us, 2.0 * us);
  panel.setPredicted(trace);
  CHECK(panel.zoom()->start() == 1.0 * us);
  CHECK(panel.zoom()->end() == 2.0 * us);
  panel.zoom()->fit();
  auto shorter = std::make_shared<gui::TimelineTrace>(*trace);
  shorter->end = 3 * us;
  panel.clearMeasured(QStringLiteral("none"));
  panel.setPredicted(shorter);
  CHECK(panel.zoom()->start() == 0.0);
  CHECK(panel.zoom()->end() == 3.0 * us);
}

TEST_CASE("a trace written as .json.gz opens as the same timeline, and a damaged one names the file", "[gui][timeline]") {
  const scenario::Scenario s = scenario::load(test::scenarios + "quickstart.yaml");
  const sim::Prediction p = sim::predict(s, {true, sim::FoldMode::never});
  const topology::Cluster cluster(s.cluster);
  QTemporaryDir dir;
  auto write = [&](const QString& name, const std::string& bytes) {
    QFile f(dir.filePath(name));
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write(bytes.data(), static_cast<qint64>(bytes.size()));
    return dir.filePath(name);
  };
  const gui::TimelineTrace plain =
      gui::readTimelineFile(write(QStringLiteral("t.json"), report::chrome_trace_json(p.trace, p.program, cluster)));
  const std::string gz = report::chrome_trace_file(p.trace, p.program, cluster, "t.json.gz");
  const gui::TimelineTrace packed = gui::readTimelineFile(write(QStringLiteral("t.json.gz"), gz));
  REQUIRE(packed.lanes.size() == plain.lanes.size());
  for (std::size_t i = 0; i < plain.lanes.size(); ++i) CHECK(packed.lanes[i].spans.size() == plain.lanes[i].spans.size());
  const QString broken = write(QStringLiteral("b.json.gz"), gz.substr(0, gz.size() / 2));
  CHECK_THROWS_WITH(gui::readTimelineFile(broken), Catch::Contains("b.json.gz") && Catch::Contains("truncated"));
}

TEST_CASE("the dashboard reads only regular files within its limit: a FIFO, a device, a folder refused at once",
          "[gui][timeline][limits]") {
  QTemporaryDir dir;
  const QString fifo = dir.filePath(QStringLiteral("pipe.json"));
  REQUIRE(::mkfifo(QFile::encodeName(fifo).constData(), 0600) == 0);
  // Each would block forever (a FIFO with no writer) or grow without bound (/dev/zero).
  CHECK_THROWS_WITH(gui::readTimelineFile(fifo), Catch::Contains("pipe.json: cannot read: not a regular file"));
  CHECK_THROWS_WITH(gui::readTimelineFile(QStringLiteral("/dev/zero")), Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(gui::readTimelineFile(dir.path()), Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(gui::readTimelineFile(dir.filePath(QStringLiteral("none.json"))), Catch::Contains("no such file"));
  // A run folder whose comparison is a FIFO is refused the same way.
  REQUIRE(::mkfifo(QFile::encodeName(dir.filePath(QStringLiteral("comparison.json"))).constData(), 0600) == 0);
  CHECK_THROWS_WITH(gui::readRunFolder(dir.path()), Catch::Contains("comparison.json: cannot read: not a regular file"));
  // Past the limit, by its size on disk.
  QFile big(dir.filePath(QStringLiteral("big.json")));
  REQUIRE(big.open(QIODevice::WriteOnly));
  big.write(QByteArray(3 << 20, ' '));
  big.close();
  CHECK_THROWS_WITH(gui::readRegularFile(big.fileName(), qint64(2) << 20), Catch::Contains("3 MiB, past the 2 MiB"));
  CHECK(gui::readRegularFile(big.fileName(), qint64(3) << 20).size() == (3 << 20));
}
