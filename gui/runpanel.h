// "Run for real": runs `parasim validate` on the scenario with the editor's overrides as a
// child process (the command line's executor, relaunched under mpirun for several ranks),
// shows its progress (the step lines) and log, and when it ends loads what it wrote: the
// measured trace (into the timeline beside the prediction), and the comparison table (error
// per metric). A run that fails shows its error and the log's tail instead of a blank view.
// readRunFolder() reads a validate folder, from this panel or from `parasim validate --out`.
#pragma once

#include <QProcess>
#include <QTemporaryDir>
#include <QWidget>
#include <memory>
#include <vector>

#include "report/compare.hpp"
#include "timeline/timelinetrace.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;

namespace parasim::gui {

class FigureTableModel;

struct RunResults {
  QString dir;
  QStringList overrides;  // the editor's, when the run was started from the panel
  QString scenario;
  QString backend;
  int ranks = 0;
  std::shared_ptr<const TimelineTrace> predicted;
  std::shared_ptr<const TimelineTrace> measured;
  std::vector<report::ComparisonRow> comparison;
};

// Reads predicted.trace.json, measured.trace.json and comparison.json from `dir`; throws
// std::runtime_error naming the file and what is wrong.
RunResults readRunFolder(const QString& dir);

// The parasim command line: $PARASIM_CLI, else next to this program, else ../cli/parasim
// (the build tree), else `parasim` on PATH.
QString parasimExecutable();

class RunPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunPanel(QWidget* parent = nullptr);
  ~RunPanel() override;
  // What Run will execute; disables Run while there is no valid scenario.
  void setScenario(const QString& path, const QStringList& overrides);
  void setExecutable(const QString& program) { m_program = program; }
  // Starts the run: the arguments after `parasim`, for the log and for tests.
  QStringList start();
  void stop();
  void showResults(const RunResults& r);
  [[nodiscard]] bool running() const { return m_process.state() != QProcess::NotRunning; }
  [[nodiscard]] QString log() const;
  [[nodiscard]] QString error() const { return m_error; }
  [[nodiscard]] FigureTableModel* comparison() const { return m_comparison; }
  [[nodiscard]] int progress() const;

 signals:
  void loaded(const parasim::gui::RunResults& results);
  void failed(const QString& error);

 private:
  void readOutput();
  void finished(int code, QProcess::ExitStatus status);
  void fail(const QString& error);

  QString m_program;
  QString m_path;
  QStringList m_overrides;
  QStringList m_runOverrides;  // of the run in progress
  QString m_error;
  QString m_pending;  // a partial line of output
  QProcess m_process;
  std::unique_ptr<QTemporaryDir> m_dir;
  QPushButton* m_run;
  QPushButton* m_stop;
  QComboBox* m_backend;
  QSpinBox* m_steps;
  QCheckBox* m_emulated;  // --emulated: on the cluster `parasim cluster up` made
  QProgressBar* m_progress;
  QLabel* m_status;
  QPlainTextEdit* m_log;
  QTableView* m_table;
  FigureTableModel* m_comparison;
};

}  // namespace parasim::gui

Q_DECLARE_METATYPE(parasim::gui::RunResults)
