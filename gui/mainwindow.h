// The dashboard window: open a scenario, see its resolved plan, the cluster's link table
// and a chart of bandwidth by link kind. Later views (timeline, memory, comparison) join
// as tabs; no model logic lives here, only wiring of parasim's libraries to Qt models.
#pragma once

#include <QMainWindow>

class QLabel;
class QTableView;
class QChartView;

namespace parasim::gui {

class LinkModel;
class LinkKindModel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  // Loads a scenario; on error shows it (file:line: key: message) and returns false.
  bool openScenario(const QString& path);
  QString summaryText() const;
  const LinkModel* linkModel() const { return m_links; }

 private:
  void chooseScenario();

  QLabel* m_summary = nullptr;
  QTableView* m_linkView = nullptr;
  QChartView* m_chartView = nullptr;
  LinkModel* m_links = nullptr;
  LinkKindModel* m_kinds = nullptr;
};

}  // namespace parasim::gui
