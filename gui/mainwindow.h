// The dashboard window. A plan editor (left) over the open scenario; every valid edit is
// simulated again on a worker thread (Simulator) and the views follow:
//   Summary    the predicted figures; memory per stage against capacity, table and bars
//   Timeline   predicted and measured traces, lanes per rank and stream and busy link,
//              one shared zoom
//   Topology   the cluster graph with links coloured by utilisation; the link table and
//              bandwidth by link kind
//   Charts     time breakdown per rank, memory per rank (predicted and measured),
//              predicted against measured per kind, and the dp scaling curve (Sweeper)
//   Planner    `parasim plan` on the open scenario: every valid plan ranked (sortable);
//              a row loads its plan into the editor
//   Run        `parasim validate` as a child process, its log and comparison table
// An invalid edit is marked at its field with the command line's message and the views
// keep the last valid plan. No model logic lives here, only wiring of parasim's libraries
// to Qt models and views.
#pragma once

#include <QMainWindow>
#include <QPixmap>
#include <QProgressBar>
#include <QPushButton>
#include <QTimer>
#include <atomic>
#include <memory>

#include "runpanel.h"
#include "simulation.h"

class QLabel;
class QMenu;
class QTabWidget;
class QTableView;

namespace parasim::gui {

class FigureTableModel;
class LatestRunner;
class PlanModel;
class LinkModel;
class LinkKindModel;
class MemoryModel;
class PlanEditor;
class RunPanel;
class SummaryModel;
class TimelinePanel;
class TopologyView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  // Loads a scenario and starts simulating it; on error shows it (file:line: key:
  // message) and returns false.
  bool openScenario(const QString& path);
  // Writes the open scenario with the editor's edits as one YAML file (extends merged);
  // returns the error, empty on success.
  QString saveScenario(const QString& path);
  // Loads a Chrome trace file (on a worker thread) into the predicted or measured timeline
  // as the file's kind says; traceLoaded or traceFailed follows.
  void openTrace(const QString& path);
  // Loads a `parasim validate` folder: both traces and the comparison; returns the error.
  QString openRunFolder(const QString& dir);
  // Searches every plan of the open scenario (as last simulated) on a worker thread, with
  // a progress bar and a Cancel button; planned() follows (also after a cancel).
  void searchPlans();
  // Stops the running plan search (its note then says so).
  void cancelPlans();
  // Loads row `row` of the planner's model (in its own order) into the plan editor.
  void loadPlan(int row);
  // Saves each tab as DIR/NN-name.png (making DIR); returns the files written and sets
  // `*error` to the first failure (DIR a file, an image that cannot be written).
  QStringList exportViews(const QString& dir, QString* error = nullptr);

  QString summaryText() const;
  const LinkModel* linkModel() const { return m_links; }
  const SummaryModel* summaryModel() const { return m_summaryModel; }
  const MemoryModel* memoryModel() const { return m_memory; }
  const FigureTableModel* breakdownModel() const { return m_breakdown; }
  const FigureTableModel* rankMemoryModel() const { return m_rankMemory; }
  const FigureTableModel* scalingModel() const { return m_scaling; }
  const PlanModel* planModel() const { return m_plans; }
  QString planNote() const;
  const QProgressBar* planProgress() const { return m_planProgress; }
  PlanEditor* editor() const { return m_editor; }
  Simulator* simulator() const { return m_simulator; }
  Sweeper* sweeper() const { return m_sweeper; }
  TimelinePanel* timeline() const { return m_timeline; }
  TopologyView* topology() const { return m_topology; }
  RunPanel* runPanel() const { return m_run; }
  QTabWidget* tabs() const { return m_tabs; }
  // The latest outcome shown (valid or not).
  const Outcome& outcome() const { return m_outcome; }
  // Nothing computing in the background (simulation, sweep, trace loading, a run).
  bool idle() const;
  // Batch use (--screenshot, --export): errors go to the status bar and standard error,
  // never to a modal dialog that nobody can close.
  void setBatch(bool batch) { m_batch = batch; }

 signals:
  void traceLoaded(const QString& path);
  void traceFailed(const QString& error);
  void planned();

 private:
  void chooseScenario();
  void chooseSave();
  void chooseTrace();
  void chooseRunFolder();
  void chooseExport();
  void resimulate();
  void showOutcome(const Outcome& o);
  void showMeasured(std::shared_ptr<const TimelineTrace> measured);
  void showRankMemory();
  QWidget* makeSummaryView();
  QWidget* makeTopologyView();
  QWidget* makeChartsView();
  QWidget* makePlannerView();
  void makeMenus();  // mainwindow_menus.cpp
  void fillRecentMenu();
  void rememberScenario(const QString& path);

 public:
  // The scenarios opened last, most recent first (kept in the user's settings).
  static QStringList recentScenarios();

 private:

  QString m_path;
  QLabel* m_summary = nullptr;
  QTabWidget* m_tabs = nullptr;
  QTableView* m_linkView = nullptr;
  LinkModel* m_links = nullptr;
  LinkKindModel* m_kinds = nullptr;
  SummaryModel* m_summaryModel = nullptr;
  MemoryModel* m_memory = nullptr;
  FigureTableModel* m_breakdown = nullptr;
  FigureTableModel* m_rankMemory = nullptr;
  FigureTableModel* m_scaling = nullptr;
  PlanEditor* m_editor = nullptr;
  Simulator* m_simulator = nullptr;
  Sweeper* m_sweeper = nullptr;
  TimelinePanel* m_timeline = nullptr;
  TopologyView* m_topology = nullptr;
  RunPanel* m_run = nullptr;
  QLabel* m_scalingNote = nullptr;
  PlanModel* m_plans = nullptr;
  LatestRunner* m_planner = nullptr;
  QLabel* m_planNote = nullptr;
  QTableView* m_planView = nullptr;
  // The running search's progress (written by its workers) and cancel flag.
  struct PlanWatch {
    std::atomic<bool> cancel{false};
    std::atomic<int> phase{0};  // 0 scoring, 1 simulating the best
    std::atomic<std::size_t> done{0};
    std::atomic<std::size_t> total{0};
  };
  std::shared_ptr<PlanWatch> m_planWatch;
  QProgressBar* m_planProgress = nullptr;
  QPushButton* m_planCancel = nullptr;
  QTimer* m_planTimer = nullptr;
  Outcome m_outcome;
  std::shared_ptr<const TimelineTrace> m_measured;
  QStringList m_measuredOverrides;  // the plan the measurement ran (editor overrides)
  std::vector<report::ComparisonRow> m_runComparison;  // the last run's, for the Summary's Measured column
  QMenu* m_recentMenu = nullptr;
  bool m_measuredFromRun = false;   // from Run for real, so its plan is known
  int m_loadingTraces = 0;
  bool m_batch = false;
};

// Saves `image` as a PNG at `path` (gui/files.h's writeFileReplacing); returns the reason
// it could not, or an empty string.
QString savePng(const QPixmap& image, const QString& path);

}  // namespace parasim::gui
