// The dashboard window. A plan editor (left) over the open scenario; every valid edit is
// simulated again on a worker thread (Simulator) and the views follow: Summary (the
// predicted figures, memory per stage against capacity as a table and bars, red when out
// of memory), Links (the cluster's link table) and Bandwidth (a chart of bandwidth by link
// kind). An invalid edit is marked at its field with the command line's message and the
// views keep the last valid plan. No model logic lives here, only wiring of parasim's
// libraries to Qt models.
#pragma once

#include <QMainWindow>
#include <memory>

#include "simulation.h"

class QLabel;
class QTableView;
class QChartView;

namespace parasim::gui {

class LinkModel;
class LinkKindModel;
class MemoryModel;
class PlanEditor;
class SummaryModel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  // Loads a scenario and starts simulating it; on error shows it (file:line: key:
  // message) and returns false.
  bool openScenario(const QString& path);
  QString summaryText() const;
  const LinkModel* linkModel() const { return m_links; }
  const SummaryModel* summaryModel() const { return m_summaryModel; }
  const MemoryModel* memoryModel() const { return m_memory; }
  PlanEditor* editor() const { return m_editor; }
  Simulator* simulator() const { return m_simulator; }
  // The latest outcome shown (valid or not).
  const Outcome& outcome() const { return m_outcome; }

 private:
  void chooseScenario();
  void resimulate();
  void showOutcome(const Outcome& o);
  QWidget* makeSummaryView();
  QWidget* makeBandwidthChart();

  QString m_path;
  QLabel* m_summary = nullptr;
  QTableView* m_linkView = nullptr;
  QChartView* m_chartView = nullptr;
  LinkModel* m_links = nullptr;
  LinkKindModel* m_kinds = nullptr;
  SummaryModel* m_summaryModel = nullptr;
  MemoryModel* m_memory = nullptr;
  PlanEditor* m_editor = nullptr;
  Simulator* m_simulator = nullptr;
  Outcome m_outcome;
};

}  // namespace parasim::gui
