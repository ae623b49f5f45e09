#include "runpanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardPaths>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "files.h"
#include "models/figuremodels.h"

namespace parasim::gui {

RunResults readRunFolder(const QString& dir) {
  RunResults r;
  r.dir = dir;
  const QString cmpPath = QDir(dir).filePath(QStringLiteral("comparison.json"));
  const QByteArray bytes = readRegularFile(cmpPath, comparisonFileLimit);
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes.constData(), bytes.constData() + bytes.size());
    r.scenario = QString::fromStdString(j.at("scenario").get<std::string>());
    r.backend = QString::fromStdString(j.at("backend").get<std::string>());
    r.ranks = j.at("ranks").get<int>();
    for (const auto& row : j.at("comparison")) {
      r.comparison.push_back({row.at("metric").get<std::string>(), row.at("unit").get<std::string>(),
                              row.at("predicted").get<double>(), row.at("measured").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(cmpPath.toStdString() + ": not a validate comparison (" + e.what() + ")");
  }
  auto trace = [&](const char* name) {
    auto t = std::make_shared<TimelineTrace>(readTimelineFile(QDir(dir).filePath(QString::fromLatin1(name))));
    t->title = QStringLiteral("%1, %2 ranks on %3 (%4)").arg(r.scenario).arg(r.ranks).arg(r.backend, dir);
    return std::shared_ptr<const TimelineTrace>(std::move(t));
  };
  r.predicted = trace("predicted.trace.json");
  r.measured = trace("measured.trace.json");
  return r;
}

QString parasimExecutable() {
  const QString env = qEnvironmentVariable("PARASIM_CLI");
  if (!env.isEmpty()) return env;
  const QDir here(QCoreApplication::applicationDirPath());
  for (const QString& candidate : {here.filePath(QStringLiteral("parasim")), here.filePath(QStringLiteral("../cli/parasim"))}) {
    if (QFileInfo(candidate).isExecutable()) return QFileInfo(candidate).canonicalFilePath();
  }
  const QString onPath = QStandardPaths::findExecutable(QStringLiteral("parasim"));
  return onPath.isEmpty() ? QStringLiteral("parasim") : onPath;
}

RunPanel::RunPanel(QWidget* parent)
    : QWidget(parent),
      m_program(parasimExecutable()),
      m_run(new QPushButton(tr("Run for real"), this)),
      m_stop(new QPushButton(tr("Stop"), this)),
      m_backend(new QComboBox(this)),
      m_steps(new QSpinBox(this)),
      m_emulated(new QCheckBox(tr("On the emulated cluster"), this)),
      m_progress(new QProgressBar(this)),
      m_status(new QLabel(tr("Runs `parasim validate` on the plan in the editor and loads the measurement."), this)),
      m_log(new QPlainTextEdit(this)),
      m_table(new QTableView(this)),
      m_comparison(new FigureTableModel(this)) {
  m_backend->addItems({tr("as the scenario says"), QStringLiteral("cpu"), QStringLiteral("cuda")});
  m_backend->setToolTip(tr("Executor backend (--backend)"));
  m_steps->setRange(0, 100000);
  m_steps->setSpecialValueText(tr("as the scenario says"));
  m_steps->setToolTip(tr("Measured steps (--steps); the scenario's run.steps when left at its value"));
  m_emulated->setObjectName(QStringLiteral("emulated"));
  m_emulated->setToolTip(tr("Run on the nodes `parasim cluster up` emulates on this machine (--emulated): each node's "
                            "ranks in a network namespace, the nodes joined by shaped links"));
  m_stop->setEnabled(false);
  m_run->setEnabled(false);
  m_status->setWordWrap(true);
  m_log->setReadOnly(true);
  m_log->setFont(QFont(QStringLiteral("monospace")));
  m_log->setMaximumBlockCount(5000);
  m_table->setModel(m_comparison);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setStretchLastSection(true);
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_run);
  bar->addWidget(m_stop);
  // Each control named by a label of its own.
  auto* backendLabel = new QLabel(tr("Backend:"), this);
  backendLabel->setBuddy(m_backend);
  auto* stepsLabel = new QLabel(tr("Measured steps:"), this);
  stepsLabel->setBuddy(m_steps);
  bar->addWidget(backendLabel);
  bar->addWidget(m_backend);
  bar->addWidget(stepsLabel);
  bar->addWidget(m_steps);
  bar->addWidget(m_emulated);
  bar->addWidget(m_progress, 1);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(m_table);
  split->addWidget(m_log);
  split->setSizes({420, 580});
  auto* v = new QVBoxLayout(this);
  v->addLayout(bar);
  v->addWidget(m_status);
  v->addWidget(split, 1);
  m_process.setProcessChannelMode(QProcess::MergedChannels);
  connect(m_run, &QPushButton::clicked, this, [this] { start(); });
  connect(m_stop, &QPushButton::clicked, this, &RunPanel::stop);
  connect(&m_process, &QProcess::readyReadStandardOutput, this, &RunPanel::readOutput);
  connect(&m_process, &QProcess::finished, this, &RunPanel::finished);
  connect(&m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) fail(tr("cannot start %1: %2").arg(m_program, m_process.errorString()));
  });
}

RunPanel::~RunPanel() {
  if (running()) {
    m_process.kill();
    m_process.waitForFinished(3000);
  }
}

void RunPanel::setScenario(const QString& path, const QStringList& overrides) {
  m_path = path;
  m_overrides = overrides;
  m_run->setEnabled(!path.isEmpty() && !running());
}

QStringList RunPanel::start() {
  if (m_path.isEmpty() || running()) return {};
  m_dir = std::make_unique<QTemporaryDir>();
  m_runOverrides = m_overrides;
  QStringList args{QStringLiteral("validate"), m_path, QStringLiteral("--out"), m_dir->path()};
  for (const QString& o : m_overrides) args << QStringLiteral("--set") << o;
  if (m_backend->currentIndex() > 0) args << QStringLiteral("--backend") << m_backend->currentText();
  if (m_steps->value() > 0) args << QStringLiteral("--steps") << QString::number(m_steps->value());
  if (m_emulated->isChecked()) args << QStringLiteral("--emulated");
  m_error.clear();
  m_pending.clear();
  m_log->clear();
  m_log->appendPlainText(QStringLiteral("$ %1 %2").arg(m_program, args.join(QLatin1Char(' '))));
  m_progress->setRange(0, 0);  // busy until the first step line
  m_status->setStyleSheet(QString());
  m_status->setText(tr("running..."));
  m_run->setEnabled(false);
  m_stop->setEnabled(true);
  m_process.start(m_program, args);
  return args;
}

void RunPanel::stop() {
  if (!running()) return;
  m_process.terminate();  // mpirun passes it to the ranks
  QTimer::singleShot(3000, this, [this] {
    if (running()) m_process.kill();
  });
}

QString RunPanel::log() const { return m_log->toPlainText(); }

int RunPanel::progress() const { return m_progress->value(); }

void RunPanel::readOutput() {
  m_pending += QString::fromLocal8Bit(m_process.readAllStandardOutput());
  static const QRegularExpression step(QStringLiteral("^step\\s+(\\d+)/(\\d+)"));
  qsizetype nl = 0;
  while ((nl = m_pending.indexOf(QLatin1Char('\n'))) >= 0) {
    const QString line = m_pending.left(nl);
    m_pending.remove(0, nl + 1);
    m_log->appendPlainText(line);
    const QRegularExpressionMatch m = step.match(line);
    if (m.hasMatch()) {
      m_progress->setRange(0, m.captured(2).toInt());
      m_progress->setValue(m.captured(1).toInt());
    }
  }
}

void RunPanel::finished(int code, QProcess::ExitStatus status) {
  readOutput();
  if (!m_pending.isEmpty()) m_log->appendPlainText(m_pending);
  m_pending.clear();
  m_stop->setEnabled(false);
  m_run->setEnabled(!m_path.isEmpty());
  if (status != QProcess::NormalExit || code != 0) {
    // The command line's own message is its last "error:" line, else the log's last line.
    QString why;
    const QStringList lines = log().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (auto it = lines.rbegin(); it != lines.rend() && why.isEmpty(); ++it) {
      if (it->contains(QLatin1String("error"), Qt::CaseInsensitive)) why = *it;
    }
    if (why.isEmpty() && !lines.isEmpty()) why = lines.back();
    fail(status != QProcess::NormalExit ? tr("the run was stopped or crashed: %1").arg(why)
                                        : tr("the run failed (exit code %1): %2").arg(code).arg(why));
    return;
  }
  try {
    RunResults r = readRunFolder(m_dir->path());
    r.overrides = m_runOverrides;
    showResults(r);
    emit loaded(r);
  } catch (const std::exception& e) {
    fail(tr("the run ended but its results cannot be read: %1").arg(QString::fromStdString(e.what())));
  }
}

void RunPanel::showResults(const RunResults& r) {
  m_progress->setRange(0, 1);
  m_progress->setValue(1);
  showComparison(*m_comparison, r.comparison);
  m_table->resizeColumnsToContents();
  m_status->setStyleSheet(QString());
  m_status->setText(tr("measured %1 on %2 ranks (%3), results in %4").arg(r.scenario).arg(r.ranks).arg(r.backend, r.dir));
}

void RunPanel::fail(const QString& error) {
  m_error = error;
  m_progress->setRange(0, 1);
  m_progress->setValue(0);
  m_comparison->clear();
  m_status->setStyleSheet(QStringLiteral("color: #c00000"));
  m_status->setText(error);
  m_stop->setEnabled(false);
  m_run->setEnabled(!m_path.isEmpty());
  emit failed(error);
}

}  // namespace parasim::gui
