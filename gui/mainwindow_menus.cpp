// The window's menus: File (with the recently opened scenarios), Edit (undo and redo of the
// plan editor's edits) and Help (the documentation, the scenario format, about).
#include <QApplication>
#include <QDesktopServices>
#include <QDir>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QUrl>

#include "mainwindow.h"
#include "parasim/config.hpp"
#include "planeditor.h"

namespace parasim::gui {

namespace {

constexpr int recentCount = 8;

QSettings settings() {
  return QSettings(QStringLiteral("parasim"), QStringLiteral("parasim-gui"));
}

// The documentation: the source tree this program was built from, else next to it.
QString docsPath(const QString& file) {
  for (const QString& root :
       {QStringLiteral(PARASIM_SOURCE_DIR), QApplication::applicationDirPath() + QStringLiteral("/../..")}) {
    const QString path = QDir(root).filePath(file);
    if (QFileInfo::exists(path)) return QFileInfo(path).absoluteFilePath();
  }
  return {};
}

}  // namespace

QStringList MainWindow::recentScenarios() {
  return settings().value(QStringLiteral("recent")).toStringList();
}

void MainWindow::rememberScenario(const QString& path) {
  QStringList recent = recentScenarios();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > recentCount) recent.removeLast();
  settings().setValue(QStringLiteral("recent"), recent);
  fillRecentMenu();
}

void MainWindow::fillRecentMenu() {
  m_recentMenu->clear();
  const QStringList recent = recentScenarios();
  for (const QString& path : recent) {
    m_recentMenu->addAction(
        QFileInfo(path).fileName() + QStringLiteral("  (") + QFileInfo(path).path() + QLatin1Char(')'), this,
        [this, path] { openScenario(path); });
  }
  m_recentMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::makeMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open scenario..."), QKeySequence::Open, this, &MainWindow::chooseScenario);
  m_recentMenu = file->addMenu(tr("Open &recent"));
  fillRecentMenu();
  file->addAction(tr("&Save scenario as..."), QKeySequence::SaveAs, this, &MainWindow::chooseSave);
  file->addAction(tr("Open &trace..."), this, &MainWindow::chooseTrace);
  file->addAction(tr("Open &run results..."), this, &MainWindow::chooseRunFolder);
  file->addAction(tr("&Export views as PNG..."), this, &MainWindow::chooseExport);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* undo = edit->addAction(tr("&Undo edit"), QKeySequence::Undo, m_editor, &PlanEditor::undo);
  QAction* redo = edit->addAction(tr("&Redo edit"), QKeySequence::Redo, m_editor, &PlanEditor::redo);
  auto enable = [this, undo, redo] {
    undo->setEnabled(m_editor->canUndo());
    redo->setEnabled(m_editor->canRedo());
  };
  connect(m_editor, &PlanEditor::historyChanged, this, enable);
  enable();

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  auto openDoc = [this](const QString& doc) {
    const QString path = docsPath(doc);
    if (path.isEmpty() || !QDesktopServices::openUrl(QUrl::fromLocalFile(path))) {
      QMessageBox::information(
          this, tr("Documentation"),
          tr("%1 is in the parasim source tree (%2).").arg(doc, QStringLiteral(PARASIM_SOURCE_DIR)));
    }
  };
  help->addAction(tr("&Getting started (README)"), this, [openDoc] { openDoc(QStringLiteral("README.md")); });
  help->addAction(tr("&Scenario format"), this, [openDoc] { openDoc(QStringLiteral("docs/scenario-format.md")); });
  help->addAction(tr("&Planner"), this, [openDoc] { openDoc(QStringLiteral("docs/planner.md")); });
  help->addAction(tr("&Validation on real hardware"), this,
                  [openDoc] { openDoc(QStringLiteral("docs/validation.md")); });
  help->addSeparator();
  help->addAction(tr("&About parasim"), this, [this] {
    QMessageBox::about(
        this, tr("About parasim"),
        tr("<b>parasim %1</b> (git %2)<p>Predicts how fast a distributed training plan runs, whether it "
           "fits and where the time goes, then runs the same plan for real and shows both side by side.</p>"
           "<p>Edit the plan on the left; every valid edit is simulated again. Undo and redo with %3 and %4.</p>")
            .arg(QString::fromLatin1(config::version), QString::fromLatin1(config::revision),
                 QKeySequence(QKeySequence::Undo).toString(QKeySequence::NativeText),
                 QKeySequence(QKeySequence::Redo).toString(QKeySequence::NativeText)));
  });
}

}  // namespace parasim::gui
