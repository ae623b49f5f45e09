// Simulating a scenario for the dashboard, off the GUI thread. simulateScenario() is the
// whole job as a pure function (load the file with the editor's overrides, predict one
// step, measure it): the same loader and simulator as `parasim simulate`, so an invalid
// value gives the command line's message, naming the key. Simulator runs it on a worker
// thread and reports only the latest request's outcome, so a burst of edits never shows a
// stale result.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>

#include "plan/memory.hpp"
#include "plan/scenario.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

namespace parasim::gui {

struct Outcome {
  QString path;
  QStringList overrides;
  // Set when the scenario is invalid: the loader's message (file:line:column: key:
  // message) and the key it names (such as plan.tp), and nothing else.
  QString error;
  QString errorKey;
  std::shared_ptr<const plan::Scenario> scenario;
  std::shared_ptr<const topology::Cluster> cluster;
  std::shared_ptr<const sim::Prediction> prediction;
  report::StepFigures figures;
  plan::MemoryReport memory;
  double seconds = 0.0;  // wall time of the job

  [[nodiscard]] bool ok() const { return error.isEmpty(); }
};

Outcome simulateScenario(const QString& path, const QStringList& overrides);

class Simulator : public QObject {
  Q_OBJECT
 public:
  explicit Simulator(QObject* parent = nullptr);
  ~Simulator() override;
  // Starts simulating; a newer request supersedes any still running.
  void request(const QString& path, const QStringList& overrides);
  [[nodiscard]] bool busy() const { return m_running; }

 signals:
  void started();
  void finished(const parasim::gui::Outcome& outcome);

 private:
  void launch();

  QFutureWatcher<Outcome> m_watcher;
  bool m_running = false;
  bool m_pending = false;
  QString m_path;
  QStringList m_overrides;
};

}  // namespace parasim::gui
