// Test main for the GUI: forces the offscreen platform so widgets render without a display.
#include <QApplication>
#include <QTemporaryDir>
#include "tests/catch_runner.hpp"

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir runtime;  // Qt wants a private runtime directory; CI machines have none
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) qputenv("XDG_RUNTIME_DIR", runtime.path().toUtf8());
  // The dashboard's settings (recent files) in a folder of the tests' own, not the user's.
  QTemporaryDir config;
  qputenv("XDG_CONFIG_HOME", config.path().toUtf8());
  QApplication app(argc, argv);
  return parasim::test::run_catch(argc, argv);
}
