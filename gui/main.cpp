// parasim-gui [SCENARIO]: the dashboard.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QEventLoop>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "files.h"
#include "mainwindow.h"
#include "models/figuremodels.h"
#include "parasim/config.hpp"

namespace {

bool has_arg(int argc, char** argv, std::initializer_list<const char*> names) {
  for (int i = 1; i < argc; ++i) {
    for (const char* n : names) {
      if (std::strcmp(argv[i], n) == 0) return true;
    }
  }
  return false;
}

bool set(const char* variable) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0';
}

// Runs the event loop until `done()` holds, looking every 20 ms, asleep in between: a busy
// wait would take a core from the ranks that Run for real measures.
template <typename Done>
void waitUntil(Done&& done) {
  QEventLoop loop;
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
    if (done()) loop.quit();
  });
  poll.start(20);
  if (!done()) loop.exec();
}

}  // namespace

int main(int argc, char** argv) {
  // Without a display: --help and --version still answer, --screenshot and --export render
  // offscreen, and anything else says what is missing instead of Qt aborting.
  if (!set("DISPLAY") && !set("WAYLAND_DISPLAY") && !set("QT_QPA_PLATFORM")) {
    if (has_arg(argc, argv, {"-h", "--help", "--help-all", "-v", "--version"}) ||
        has_arg(argc, argv, {"--screenshot", "--export"})) {
      ::setenv("QT_QPA_PLATFORM", "offscreen", 1);
    } else {
      std::fprintf(stderr, "parasim-gui: no display (DISPLAY and WAYLAND_DISPLAY are unset): run it in a desktop "
                           "session, or render views with --screenshot FILE or --export DIR, which work without one\n");
      return 2;
    }
  }
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
  const QCommandLineOption exportDir(QStringLiteral("export"),
                                     QStringLiteral("Save every view as DIR/NN-name.png and exit (works offscreen)"),
                                     QStringLiteral("dir"));
  cli.addOption(exportDir);
  const QCommandLineOption runDir(QStringLiteral("run"),
                                  QStringLiteral("Load the results of `parasim validate --out DIR` beside the prediction"),
                                  QStringLiteral("dir"));
  cli.addOption(runDir);
  const QCommandLineOption validate(QStringLiteral("validate"),
                                    QStringLiteral("With --screenshot or --export: press Run for real first and wait for it"));
  cli.addOption(validate);
  const QCommandLineOption planOption(QStringLiteral("plan"),
                                      QStringLiteral("With --screenshot or --export: search the plans first (Planner tab)"));
  cli.addOption(planOption);
  const QCommandLineOption traceFile(QStringLiteral("trace"), QStringLiteral("Open a Chrome trace file in the timeline"),
                                     QStringLiteral("file"));
  cli.addOption(traceFile);
  cli.process(app);
  // Outputs are checked before any work, as the command line's are.
  if (cli.isSet(screenshot)) {
    const QString problem = parasim::gui::outputProblem(cli.value(screenshot));
    if (!problem.isEmpty()) {
      std::fprintf(stderr, "parasim-gui: --screenshot %s\n", qPrintable(problem));
      return 2;
    }
  }
  if (cli.isSet(exportDir)) {
    const QFileInfo dir(cli.value(exportDir));
    if (cli.value(exportDir).isEmpty() || (dir.exists() && !dir.isDir())) {
      std::fprintf(stderr, "parasim-gui: --export %s: %s\n", qPrintable(cli.value(exportDir)),
                   cli.value(exportDir).isEmpty() ? "an empty folder name" : "exists and is not a folder");
      return 2;
    }
  }
  parasim::gui::MainWindow window;
  const bool batch = cli.isSet(screenshot) || cli.isSet(exportDir);
  window.setBatch(batch);
  bool ok = true;
  bool trace_failed = false;
  bool run_failed = false;  // --validate's run failed: the views still show why
  QObject::connect(&window, &parasim::gui::MainWindow::traceFailed, [&trace_failed] { trace_failed = true; });
  const bool scenario = !cli.positionalArguments().isEmpty();
  if (scenario) ok = window.openScenario(cli.positionalArguments().first());
  if (cli.isSet(traceFile)) window.openTrace(cli.value(traceFile));
  if (cli.isSet(screenshot) || cli.isSet(exportDir)) {
    window.resize(1400, 860);
    window.show();
    // Simulation, sweep and trace reading run on worker threads: wait for them first.
    QElapsedTimer waited;
    waited.start();
    // Without a scenario there is no simulation to wait for.
    waitUntil([&] {
      return !ok || (window.idle() && (!scenario || !window.outcome().path.isEmpty())) || waited.elapsed() >= 300000;
    });
    if (cli.isSet(runDir)) {
      const QString error = window.openRunFolder(cli.value(runDir));
      if (!error.isEmpty()) {
        qCritical("%s", qPrintable(error));
        return 2;
      }
    }
    if (ok && cli.isSet(planOption)) {
      window.searchPlans();
      waitUntil([&] { return window.idle() || waited.elapsed() >= 600000; });
    }
    if (ok && cli.isSet(validate)) {
      window.runPanel()->start();
      waitUntil([&] { return window.idle() || waited.elapsed() >= 600000; });
      if (!window.runPanel()->error().isEmpty()) {
        qCritical("%s", qPrintable(window.runPanel()->error()));
        run_failed = true;
      }
      // What the views captured, for scripts/screenshots.sh to judge.
      const auto* cmp = window.runPanel()->comparison();
      for (int r = 0; r < cmp->rowCount(); ++r) {
        auto cell = [&](int c) { return cmp->index(r, c).data().toString(); };
        std::printf("captured: %s: predicted %s, measured %s, error %s\n", qPrintable(cell(0)), qPrintable(cell(1)),
                    qPrintable(cell(2)), qPrintable(cell(3)));
      }
    }
    QApplication::processEvents();
    // Bad input (a scenario or trace that did not load) writes nothing, as the command line.
    if (!ok || trace_failed) return 2;
    if (cli.isSet(screenshot)) {
      const QString error = parasim::gui::savePng(window.grab(), cli.value(screenshot));
      if (!error.isEmpty()) {
        qCritical("%s", qPrintable(error));
        return 1;
      }
    }
    if (cli.isSet(exportDir)) {
      QString error;
      for (const QString& f : window.exportViews(cli.value(exportDir), &error)) std::printf("wrote %s\n", qPrintable(f));
      if (!error.isEmpty()) {
        qCritical("%s", qPrintable(error));
        return 1;
      }
    }
    return run_failed ? 1 : 0;
  }
  if (cli.isSet(runDir)) {
    const QString error = window.openRunFolder(cli.value(runDir));
    if (!error.isEmpty()) qWarning("%s", qPrintable(error));
  }
  window.show();
  return QApplication::exec();
}
