// Files the dashboard reads and writes, under the same promises as the command line's
// (docs/reliability.md): a file read is a regular file within a size limit (never a FIFO
// that blocks or a device that never ends), and an image written goes to a temporary in
// its folder first and is renamed into place, so a symlink at the target is replaced
// rather than followed and a failure leaves nothing behind.
#pragma once

#include <QByteArray>
#include <QString>

namespace parasim::gui {

// What the dashboard reads at most: a trace file, and a trace once unpacked from gzip.
inline constexpr qint64 traceFileLimit = qint64(1) << 30;  // 1 GiB
// A validate run's comparison.json.
inline constexpr qint64 comparisonFileLimit = qint64(64) << 20;

// The bytes of `path`; throws std::runtime_error naming the file where it cannot be read,
// is not a regular file (symlinks followed) or holds more than `limit` bytes.
QByteArray readRegularFile(const QString& path, qint64 limit);

// Why `path` cannot take an output, or an empty string: its folder must exist and be
// writable, and the path must not be a folder or another non-regular file.
QString outputProblem(const QString& path);

// Writes `bytes` to `path` through an exclusive temporary in its folder, renamed into
// place; returns the reason on failure (no temporary is left), or an empty string.
QString writeFileReplacing(const QString& path, const QByteArray& bytes);

}  // namespace parasim::gui
