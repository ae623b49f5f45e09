#include "simulation.h"

#include <QtConcurrent/QtConcurrentRun>
#include <chrono>
#include <string>
#include <vector>

#include "plan/diagnostics.hpp"
#include "plan/load.hpp"

namespace parasim::gui {

Outcome simulateScenario(const QString& path, const QStringList& overrides) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o;
  o.path = path;
  o.overrides = overrides;
  std::vector<std::string> sets;
  for (const QString& s : overrides) sets.push_back(s.toStdString());
  try {
    auto s = std::make_shared<const plan::Scenario>(plan::load(path.toStdString(), sets));
    o.cluster = std::make_shared<const topology::Cluster>(s->cluster);
    o.memory = plan::memory_per_rank(*s);
    o.prediction = std::make_shared<const sim::Prediction>(sim::predict(*s));
    o.figures = report::step_figures(*s, o.prediction->trace, *o.cluster);
    o.scenario = std::move(s);
  } catch (const plan::ScenarioError& e) {
    o = Outcome{};
    o.path = path;
    o.overrides = overrides;
    o.error = QString::fromStdString(e.what());
    o.errorKey = QString::fromStdString(e.key());
  } catch (const std::exception& e) {
    o = Outcome{};
    o.path = path;
    o.overrides = overrides;
    o.error = QString::fromStdString(e.what());
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

Simulator::Simulator(QObject* parent) : QObject(parent) {
  connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, [this] {
    m_running = false;
    if (m_pending) {  // superseded: run the latest request, drop this outcome
      launch();
      return;
    }
    emit finished(m_watcher.result());
  });
}

Simulator::~Simulator() { m_watcher.waitForFinished(); }

void Simulator::request(const QString& path, const QStringList& overrides) {
  m_path = path;
  m_overrides = overrides;
  if (m_running) {
    m_pending = true;
    return;
  }
  launch();
}

void Simulator::launch() {
  m_pending = false;
  m_running = true;
  emit started();
  m_watcher.setFuture(QtConcurrent::run(simulateScenario, m_path, m_overrides));
}

}  // namespace parasim::gui
