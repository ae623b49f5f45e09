// Helpers shared by the GUI tests.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTimer>
#include <functional>
#include <string>

namespace parasim::test {

// Runs the event loop until `done` holds (a worker thread's result or a child process has
// arrived) or `ms` have passed, asleep between looks (a busy wait would slow a run measured).
inline bool waitFor(const std::function<bool()>& done, int ms = 60000) {
  QElapsedTimer t;
  t.start();
  QEventLoop loop;
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
    if (done() || t.elapsed() >= ms) loop.quit();
  });
  poll.start(10);
  if (!done()) loop.exec();
  return done();
}

inline const std::string scenarios = PARASIM_SOURCE_DIR "/scenarios/";

}  // namespace parasim::test
