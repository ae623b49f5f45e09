// Test main for the GUI: forces the offscreen platform so widgets render without a display.
#define CATCH_CONFIG_RUNNER
#include <QApplication>
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  return Catch::Session().run(argc, argv);
}
