// Helpers shared by the GUI tests.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <functional>
#include <string>

namespace parasim::test {

// Runs the event loop until `done` holds (a worker thread's result or a child process has
// arrived) or `ms` have passed.
inline bool waitFor(const std::function<bool()>& done, int ms = 60000) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  return done();
}

inline const std::string scenarios = PARASIM_SOURCE_DIR "/scenarios/";

}  // namespace parasim::test
