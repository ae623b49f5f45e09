// parasim-gui [SCENARIO]: the dashboard.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>

#include "mainwindow.h"
#include "parasim/config.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("parasim-gui"));
  QApplication::setApplicationVersion(QString::fromLatin1(parasim::config::version));
  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("parasim dashboard: plan a configuration, see where the time goes"));
  cli.addHelpOption();
  cli.addVersionOption();
  cli.addPositionalArgument(QStringLiteral("scenario"), QStringLiteral("Scenario YAML file to open"));
  const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                      QStringLiteral("Render the window to a PNG file and exit (works offscreen)"),
                                      QStringLiteral("file"));
  cli.addOption(screenshot);
  cli.process(app);
  parasim::gui::MainWindow window;
  bool ok = true;
  if (!cli.positionalArguments().isEmpty()) ok = window.openScenario(cli.positionalArguments().first());
  if (cli.isSet(screenshot)) {
    window.resize(1300, 800);
    window.show();
    // The first simulation runs on a worker thread: wait for it before grabbing.
    QElapsedTimer waited;
    waited.start();
    while (ok && (window.simulator()->busy() || window.outcome().path.isEmpty()) && waited.elapsed() < 120000) {
      QApplication::processEvents(QEventLoop::AllEvents, 20);
    }
    QApplication::processEvents();
    if (!window.grab().save(cli.value(screenshot))) {
      qCritical("cannot write %s", qPrintable(cli.value(screenshot)));
      return 1;
    }
    return ok ? 0 : 2;
  }
  window.show();
  return QApplication::exec();
}
