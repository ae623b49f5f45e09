// The dashboard's response to an edit: for each scenario, the time from changing a field in
// the plan editor to the views showing the re-simulated plan and painted (the worker's
// simulation, then the models, timeline, topology and charts on the GUI thread), and the
// simulation's own share. Also the timeline's paint of the largest trace with every lane
// folded. Prints one line per scenario (a JSON line with --json); the target (under a
// second for the seed scenarios) is in docs/performance.md.
//
// --big: a 1,024-rank trace (hybrid-32-gpus grown to 128 nodes, dp 64 x tp 8 x pp 2,
// simulated rank by rank): the time to lay out its timeline, and a frame of the timeline
// (whole step in view, every lane folded) at the top, middle and bottom of its lanes and
// zoomed 64x into the middle.
//
// Usage: parasim_gui_bench [--json] [--big] [SCENARIO...]   (default: every scenarios/*.yaml)
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTabWidget>
#include <functional>
#include <QTemporaryDir>
#include <cstdio>
#include <string>

#include <QScrollBar>

#include "mainwindow.h"
#include "scenario/load.hpp"
#include "sim/simulate.hpp"
#include "planeditor.h"
#include "timeline/timelineview.h"

namespace {

bool waitFor(const std::function<bool()>& done, int ms = 600000) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 1);
  return done();
}

int bigTrace(bool json) {
  const std::vector<std::string> sets{"cluster.nodes=128", "plan.dp=64", "training.global_batch=256"};
  const parasim::scenario::Scenario s =
      parasim::scenario::load(PARASIM_SOURCE_DIR "/scenarios/hybrid-32-gpus.yaml", sets);
  QElapsedTimer t;
  t.start();
  const auto prediction = std::make_shared<const parasim::sim::Prediction>(
      parasim::sim::predict(s, {false, parasim::sim::FoldMode::never}));
  const double simulate = double(t.nsecsElapsed()) * 1e-9;
  t.restart();
  const std::shared_ptr<const parasim::program::Program> program(prediction, &prediction->program);
  auto trace = std::make_shared<const parasim::gui::TimelineTrace>(parasim::gui::timelineFromTrace(
      prediction->trace, program, parasim::topology::Cluster(s.cluster), QStringLiteral("1024 ranks")));
  const double layout = double(t.nsecsElapsed()) * 1e-9;
  parasim::gui::TimelinePanel panel;
  panel.resize(1400, 860);
  panel.show();
  panel.setPredicted(trace);
  QApplication::processEvents();
  parasim::gui::TimelineView* view = panel.predictedView();
  auto frame = [&] {
    QElapsedTimer f;
    f.start();
    view->viewport()->repaint();
    return double(f.nsecsElapsed()) * 1e-9;
  };
  QScrollBar* bar = view->verticalScrollBar();
  frame();  // warm
  const double top = frame();
  bar->setValue(bar->maximum() / 2);
  const double middle = frame();
  bar->setValue(bar->maximum());
  const double bottom = frame();
  bar->setValue(bar->maximum() / 2);
  view->zoomAt(view->viewport()->width() / 2.0, 64.0);
  const double zoomed = frame();
  if (json) {
    std::printf("{\"ranks\": %d, \"lanes\": %zu, \"spans\": %zu, \"simulate_s\": %.3f, \"layout_s\": %.3f, "
                "\"frame_top_s\": %.4f, \"frame_middle_s\": %.4f, \"frame_bottom_s\": %.4f, \"frame_zoomed_s\": %.4f}\n",
                s.plan.world(), trace->lanes.size(), trace->spanCount(), simulate, layout, top, middle, bottom, zoomed);
  } else {
    std::printf("%d ranks, %zu lanes, %zu spans: simulated in %.2f s, timeline laid out in %.2f s\n", s.plan.world(),
                trace->lanes.size(), trace->spanCount(), simulate, layout);
    std::printf("one frame, whole step in view: %.1f ms at the top, %.1f ms in the middle, %.1f ms at the bottom; "
                "zoomed 64x: %.1f ms\n",
                top * 1e3, middle * 1e3, bottom * 1e3, zoomed * 1e3);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir runtime;
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) qputenv("XDG_RUNTIME_DIR", runtime.path().toUtf8());
  QApplication app(argc, argv);
  bool json = false;
  bool big = false;
  QStringList files;
  for (const QString& a : app.arguments().mid(1)) {
    if (a == QLatin1String("--json")) {
      json = true;
    } else if (a == QLatin1String("--big")) {
      big = true;
    } else {
      files << a;
    }
  }
  if (big) return bigTrace(json);
  if (files.isEmpty()) {
    const QDir dir(QStringLiteral(PARASIM_SOURCE_DIR "/scenarios"));
    for (const QString& f : dir.entryList({QStringLiteral("*.yaml")}, QDir::Files, QDir::Name)) files << dir.filePath(f);
  }
  std::printf("%-28s %10s %10s %10s %8s %12s\n", "scenario", "edit->view", "simulate", "paint", "lanes", "spans");
  for (const QString& path : files) {
    parasim::gui::MainWindow w;
    w.resize(1400, 860);
    w.show();
    if (!w.openScenario(path) || !waitFor([&] { return w.idle() && !w.outcome().path.isEmpty(); }) || !w.outcome().ok()) {
      std::printf("%-28s cannot be simulated: %s\n", qPrintable(QFileInfo(path).baseName()), qPrintable(w.outcome().error));
      continue;
    }
    w.tabs()->setCurrentWidget(w.timeline());
    // The edit: double the global batch, valid for every scenario.
    const QString batch = QString::number(w.outcome().scenario->training.global_batch * 2);
    QElapsedTimer t;
    t.start();
    w.editor()->setValue(QStringLiteral("training.global_batch"), batch);
    waitFor([&] { return !w.outcome().overrides.isEmpty() && !w.simulator()->busy(); });
    w.repaint();
    QApplication::processEvents();
    const double edit = double(t.nsecsElapsed()) * 1e-9;
    // One paint of the timeline with the whole step in view (every lane folded).
    t.restart();
    w.timeline()->predictedView()->viewport()->repaint();
    const double paint = double(t.nsecsElapsed()) * 1e-9;
    const auto* trace = w.timeline()->predictedView()->timeline()->trace();
    const QString name = QFileInfo(path).baseName();
    if (json) {
      std::printf("{\"scenario\": \"%s\", \"edit_to_view_s\": %.4f, \"simulate_s\": %.4f, \"timeline_paint_s\": %.4f, "
                  "\"lanes\": %zu, \"spans\": %zu}\n",
                  qPrintable(name), edit, w.outcome().seconds, paint, trace->lanes.size(), trace->spanCount());
    } else {
      std::printf("%-28s %8.0f ms %8.0f ms %7.1f ms %8zu %12zu\n", qPrintable(name), edit * 1e3, w.outcome().seconds * 1e3,
                  paint * 1e3, trace->lanes.size(), trace->spanCount());
    }
    std::fflush(stdout);
    waitFor([&] { return w.idle(); });  // let the sweep end before the window goes
  }
  return 0;
}
