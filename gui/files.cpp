#include "files.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryFile>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <sys/stat.h>

namespace parasim::gui {

namespace {

std::string mib(qint64 bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

QByteArray readRegularFile(const QString& path, qint64 limit) {
  const std::string name = path.toStdString();
  const QFileInfo info(path);
  if (!info.exists()) throw std::runtime_error(name + ": cannot read: no such file");
  if (!info.isFile()) throw std::runtime_error(name + ": cannot read: not a regular file");
  if (info.size() > limit) {
    throw std::runtime_error(name + ": " + mib(info.size()) + ", past the " + mib(limit) + " the dashboard reads");
  }
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) throw std::runtime_error(name + ": cannot read: " + file.errorString().toStdString());
  // The file may grow between the check and the read: read one byte past the limit at most.
  QByteArray bytes = file.read(limit + 1);
  if (bytes.size() > limit) {
    throw std::runtime_error(name + ": past the " + mib(limit) + " the dashboard reads");
  }
  if (file.error() != QFileDevice::NoError) {
    throw std::runtime_error(name + ": cannot read: " + file.errorString().toStdString());
  }
  return bytes;
}

QString outputProblem(const QString& path) {
  if (path.isEmpty()) return QStringLiteral("an empty file name");
  struct stat st {};
  const QByteArray local = QFile::encodeName(path);
  if (::lstat(local.constData(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return QStringLiteral("%1: is a folder").arg(path);
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) return QStringLiteral("%1: not a regular file").arg(path);
  }
  const QFileInfo info(path);
  const QString dir = info.absolutePath();
  if (!QFileInfo(dir).isDir()) return QStringLiteral("%1: the folder %2 does not exist").arg(path, dir);
  if (!QFileInfo(dir).isWritable()) return QStringLiteral("%1: cannot write in the folder %2").arg(path, dir);
  return {};
}

QString writeFileReplacing(const QString& path, const QByteArray& bytes) {
  const QString problem = outputProblem(path);
  if (!problem.isEmpty()) return problem;
  const QFileInfo info(path);
  QTemporaryFile temp(QDir(info.absolutePath()).filePath(QStringLiteral(".%1.XXXXXX").arg(info.fileName())));
  if (!temp.open()) return QStringLiteral("%1: cannot write: %2").arg(path, temp.errorString());
  if (temp.write(bytes) != bytes.size() || !temp.flush()) return QStringLiteral("%1: cannot write: %2").arg(path, temp.errorString());
  // QTemporaryFile makes the file 0600; an image is for others to read too (0644).
  temp.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadGroup | QFileDevice::ReadOther);
  temp.close();
  // rename(2) replaces a symlink at `path` itself, never its target.
  if (std::rename(QFile::encodeName(temp.fileName()).constData(), QFile::encodeName(path).constData()) != 0) {
    return QStringLiteral("%1: cannot write: %2").arg(path, QString::fromLocal8Bit(std::strerror(errno)));
  }
  temp.setAutoRemove(false);
  return {};
}

}  // namespace parasim::gui
