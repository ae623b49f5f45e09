// Simulating a scenario for the dashboard, off the GUI thread. simulateScenario() is the
// whole job as a pure function (load the file with the editor's overrides, predict one
// step with its memory and link counters, measure it, lay out its timeline): the same
// loader and simulator as `parasim simulate`, so an invalid value gives the command line's
// message, naming the key. scalingSweep() predicts the plan again at growing dp with
// planner::sweep (weak scaling: the batch per replica and the model split stay, nodes are
// added as needed), as `parasim sweep --vary plan.dp=...` does.
// LatestRunner runs a job on a worker thread and reports only the latest request's result,
// so a burst of edits never shows a stale one; Simulator and Sweeper are the two jobs.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVariant>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "workload/memory.hpp"
#include "scenario/scenario.hpp"
#include "report/metrics.hpp"
#include "report/run_model.hpp"
#include "sim/simulate.hpp"
#include "timeline/timelinetrace.h"
#include "topology/cluster.hpp"

namespace parasim::gui {

struct Outcome {
  QString path;
  QStringList overrides;
  // Set when the scenario is invalid: the loader's message (file:line:column: key:
  // message) and the key it names (such as plan.tp), and nothing else.
  QString error;         // as the command line prints it (file:line:column: key: message)
  QString errorKey;      // the dotted key it names (plan.tp), when a scenario key
  QString errorMessage;  // what was expected, without where: what the key's field shows
  std::shared_ptr<const scenario::Scenario> scenario;
  std::shared_ptr<const topology::Cluster> cluster;
  std::shared_ptr<const sim::Prediction> prediction;
  report::StepFigures figures;
  workload::MemoryReport memory;
  std::shared_ptr<const TimelineTrace> timeline;
  // The whole run, where the scenario gives its length (training.tokens / training.steps).
  std::optional<report::RunEstimate> run;
  double seconds = 0.0;  // wall time of the job

  [[nodiscard]] bool ok() const { return error.isEmpty(); }
};

Outcome simulateScenario(const QString& path, const QStringList& overrides);

struct ScalingPoint {
  int dp = 0;
  int gpus = 0;  // dp x tp x pp
  double stepTime = 0.0;
  double tokensPerSecond = 0.0;
  double ideal = 0.0;       // the smallest point's tokens/s scaled by GPUs
  double efficiency = 0.0;  // tokens/s over ideal
  // The whole run at this size (0 where the scenario gives no run length): goodput and
  // expected time to train, failures counted.
  double goodput = 0.0;
  double timeToTrain = 0.0;
};

struct Scaling {
  QString path;
  QStringList overrides;
  std::vector<ScalingPoint> points;
  QStringList skipped;  // "dp 64: <the loader's message>"
};

// dp = 1, 2, 4, ... up to max(8, 4 x the scenario's dp); world = dp x tp x pp.
Scaling scalingSweep(const QString& path, const QStringList& overrides);

class LatestRunner : public QObject {
  Q_OBJECT
 public:
  using Job = std::function<QVariant()>;
  explicit LatestRunner(QObject* parent = nullptr);
  ~LatestRunner() override;
  // Starts `job`; a newer request supersedes one still running, whose result is dropped.
  void request(Job job);
  [[nodiscard]] bool busy() const { return m_running; }

 signals:
  void started();
  void finished(const QVariant& result);

 private:
  void launch();

  QFutureWatcher<QVariant> m_watcher;
  bool m_running = false;
  Job m_pending;
};

class Simulator : public QObject {
  Q_OBJECT
 public:
  explicit Simulator(QObject* parent = nullptr);
  void request(const QString& path, const QStringList& overrides);
  [[nodiscard]] bool busy() const { return m_runner.busy(); }

 signals:
  void started();
  void finished(const parasim::gui::Outcome& outcome);

 private:
  LatestRunner m_runner;
};

class Sweeper : public QObject {
  Q_OBJECT
 public:
  explicit Sweeper(QObject* parent = nullptr);
  void request(const QString& path, const QStringList& overrides);
  [[nodiscard]] bool busy() const { return m_runner.busy(); }

 signals:
  void finished(const parasim::gui::Scaling& scaling);

 private:
  LatestRunner m_runner;
};

}  // namespace parasim::gui

Q_DECLARE_METATYPE(parasim::gui::Outcome)
Q_DECLARE_METATYPE(parasim::gui::Scaling)
