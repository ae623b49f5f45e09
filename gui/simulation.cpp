#include "simulation.h"

#include <QtConcurrent/QtConcurrentRun>
#include <chrono>
#include <string>
#include <vector>

#include "scenario/diagnostics.hpp"
#include "scenario/load.hpp"
#include "planner/sweep.hpp"

namespace parasim::gui {

Outcome simulateScenario(const QString& path, const QStringList& overrides) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o;
  std::vector<std::string> sets;
  for (const QString& s : overrides) sets.push_back(s.toStdString());
  try {
    Outcome done;  // filled whole, or not at all
    done.scenario = std::make_shared<const scenario::Scenario>(scenario::load(path.toStdString(), sets));
    done.cluster = std::make_shared<const topology::Cluster>(done.scenario->cluster);
    done.memory = workload::memory_per_rank(*done.scenario);
    done.prediction = std::make_shared<const sim::Prediction>(sim::predict(*done.scenario, {true, sim::FoldMode::automatic}));
    done.figures = report::step_figures(*done.scenario, done.prediction->trace, *done.cluster);
    if (done.scenario->training.total_steps > 0) {
      done.run = report::estimate_run(*done.scenario, done.prediction->trace);
    }
    const std::shared_ptr<const program::Program> program(done.prediction, &done.prediction->program);
    done.timeline = std::make_shared<const TimelineTrace>(
        timelineFromTrace(done.prediction->trace, program, *done.cluster, QString::fromStdString(done.scenario->name)));
    o = std::move(done);
  } catch (const scenario::ScenarioError& e) {
    o.error = QString::fromStdString(e.what());
    o.errorKey = QString::fromStdString(e.key());
    o.errorMessage = QString::fromStdString(e.message());
  } catch (const std::exception& e) {
    o.error = QString::fromStdString(e.what());
    o.errorMessage = o.error;
  }
  o.path = path;
  o.overrides = overrides;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

Scaling scalingSweep(const QString& path, const QStringList& overrides) {
  Scaling out;
  out.path = path;
  out.overrides = overrides;
  std::vector<std::string> sets;
  for (const QString& o : overrides) sets.push_back(o.toStdString());
  try {
    const scenario::Scenario base = scenario::load(path.toStdString(), sets);
    planner::SweepAxis dp{"plan.dp", {}};
    for (int d = 1; d <= std::max(8, 4 * base.plan.dp); d *= 2) dp.values.push_back(std::to_string(d));
    for (const planner::SweepPoint& p : planner::sweep(path.toStdString(), sets, {dp})) {
      if (!p.error.empty()) {
        out.skipped << QStringLiteral("dp %1: %2").arg(QString::fromStdString(p.values[0]), QString::fromStdString(p.error));
        continue;
      }
      out.points.push_back({std::stoi(p.values[0]), p.gpus, p.step_time, p.tokens_per_s, p.ideal, p.efficiency,
                            p.has_run ? p.goodput : 0.0, p.has_run ? p.time_to_train : 0.0});
    }
  } catch (const std::exception& e) {
    out.skipped << QString::fromStdString(e.what());
  }
  return out;
}

LatestRunner::LatestRunner(QObject* parent) : QObject(parent) {
  connect(&m_watcher, &QFutureWatcher<QVariant>::finished, this, [this] {
    m_running = false;
    if (m_pending) {  // superseded: run the latest request, drop this result
      launch();
      return;
    }
    emit finished(m_watcher.result());
  });
}

LatestRunner::~LatestRunner() { m_watcher.waitForFinished(); }

void LatestRunner::request(Job job) {
  m_pending = std::move(job);
  if (!m_running) launch();
}

void LatestRunner::launch() {
  Job job = std::move(m_pending);
  m_pending = nullptr;
  m_running = true;
  emit started();
  m_watcher.setFuture(QtConcurrent::run(std::move(job)));
}

Simulator::Simulator(QObject* parent) : QObject(parent) {
  connect(&m_runner, &LatestRunner::started, this, &Simulator::started);
  connect(&m_runner, &LatestRunner::finished, this,
          [this](const QVariant& v) { emit finished(v.value<Outcome>()); });
}

void Simulator::request(const QString& path, const QStringList& overrides) {
  m_runner.request([path, overrides] { return QVariant::fromValue(simulateScenario(path, overrides)); });
}

Sweeper::Sweeper(QObject* parent) : QObject(parent) {
  connect(&m_runner, &LatestRunner::finished, this,
          [this](const QVariant& v) { emit finished(v.value<Scaling>()); });
}

void Sweeper::request(const QString& path, const QStringList& overrides) {
  m_runner.request([path, overrides] { return QVariant::fromValue(scalingSweep(path, overrides)); });
}

}  // namespace parasim::gui
