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
  std::vector<std::string> sets;
  for (const QString& s : overrides) sets.push_back(s.toStdString());
  try {
    Outcome done;  // filled whole, or not at all
    done.scenario = std::make_shared<const plan::Scenario>(plan::load(path.toStdString(), sets));
    done.cluster = std::make_shared<const topology::Cluster>(done.scenario->cluster);
    done.memory = plan::memory_per_rank(*done.scenario);
    done.prediction = std::make_shared<const sim::Prediction>(sim::predict(*done.scenario));
    done.figures = report::step_figures(*done.scenario, done.prediction->trace, *done.cluster);
    o = std::move(done);
  } catch (const plan::ScenarioError& e) {
    o.error = QString::fromStdString(e.what());
    o.errorKey = QString::fromStdString(e.key());
  } catch (const std::exception& e) {
    o.error = QString::fromStdString(e.what());
  }
  o.path = path;
  o.overrides = overrides;
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
