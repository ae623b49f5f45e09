#include "summarymodel.h"

#include <QBrush>
#include <QColor>

#include <fmt/format.h>

#include "topology/units.hpp"

namespace parasim::gui {

namespace u = units;

namespace {

std::string percent(double fraction) { return QString::number(100.0 * fraction, 'f', 1).toStdString() + " %"; }

}  // namespace

SummaryModel::SummaryModel(QObject* parent) : QAbstractTableModel(parent) {}

void SummaryModel::setFigures(const scenario::Scenario& s, const report::StepFigures& f, const report::RunEstimate* run) {
  beginResetModel();
  m_rows.clear();
  auto add = [&](const char* metric, const std::string& text, double raw) {
    m_rows.push_back({QString::fromLatin1(metric), QString::fromStdString(text), raw});
  };
  add("step time", u::format_duration(f.step_time), f.step_time);
  add("samples/s", u::format_count(f.samples_per_s), f.samples_per_s);
  if (s.model.kind == scenario::ModelKind::transformer)
    add("tokens/s", u::format_count(f.tokens_per_s), f.tokens_per_s);
  add("per device", u::format_flop_rate(f.flops_per_device), f.flops_per_device);
  add("MFU", percent(f.mfu), f.mfu);
  add("pipeline bubble", percent(f.bubble_fraction), f.bubble_fraction);
  static const char* const dims[report::dimension_count][2] = {{"tp communication", "tp exposed"},
                                                               {"pp communication", "pp exposed"},
                                                               {"dp communication", "dp exposed"},
                                                               {"cp communication", "cp exposed"},
                                                               {"ep communication", "ep exposed"},
                                                               {"offload copies", "offload exposed"},
                                                               {"syncbn communication", "syncbn exposed"}};
  for (std::size_t d = 0; d < report::dimension_count; ++d) {
    if (!report::dimension_shown(s, d)) continue;  // cp's and ep's rows where the plan has them
    add(dims[d][0], u::format_duration(f.comm_mean[d]), f.comm_mean[d]);
    add(dims[d][1], u::format_duration(f.exposed_mean[d]), f.exposed_mean[d]);
  }
  add("bottleneck", f.bottleneck, 0.0);
  if (run != nullptr) {
    add("time to train", u::format_span(run->expected) + " expected, " + u::format_span(run->ideal) + " without failures",
        run->expected);
    add("goodput", percent(run->goodput), run->goodput);
    add("interruptions", fmt::format("{:.1f}, one every {}", run->interruptions, u::format_span(run->mtbf())),
        run->interruptions);
    add("checkpoints", fmt::format("every {} steps ({}), {} each", run->interval_steps, u::format_span(run->interval),
                                   u::format_bytes(run->checkpoint.bytes)),
        run->interval);
    if (run->has_power) add("energy", fmt::format("{:.4g} MWh", run->energy / 3.6e9), run->energy);
    add("device-hours", u::format_count(run->device_hours), run->device_hours);
    if (run->cost > 0.0) add("cost", u::format_count(run->cost), run->cost);
  }
  m_measured = false;
  endResetModel();
}

void SummaryModel::setMeasured(const std::vector<report::ComparisonRow>& rows) {
  beginResetModel();
  m_measured = !rows.empty();
  auto find = [&rows](const QString& name) -> const report::ComparisonRow* {
    for (const report::ComparisonRow& r : rows) {
      if (QString::fromStdString(r.name) == name) return &r;
    }
    return nullptr;
  };
  const report::ComparisonRow* step = find(QStringLiteral("step time"));
  for (Row& row : m_rows) {
    row.measured.clear();
    row.error.clear();
    row.basis.clear();
    const QString name = row.metric == QLatin1String("pipeline bubble") ? QStringLiteral("bubble fraction") : row.metric;
    if (const report::ComparisonRow* r = find(name)) {
      row.measured = QString::fromStdString(report::format_value(*r, r->measured));
      row.error = QString::fromStdString(report::format_error(*r));
      const QString predicted = QString::fromStdString(report::format_value(*r, r->predicted));
      if (predicted != row.text) {
        row.basis = tr("against validate's prediction of the plan as run, %1 (the executor trains without dropout)")
                        .arg(predicted);
      }
    } else if (step != nullptr && step->measured > 0.0 &&
               (row.metric == QLatin1String("samples/s") || row.metric == QLatin1String("tokens/s"))) {
      // A rate over the same batch: the predicted one scaled by the step times.
      const double measured = row.raw * step->predicted / step->measured;
      row.measured = QString::fromStdString(u::format_count(measured));
      row.error = QString::fromStdString(report::format_error({"", "", row.raw, measured}));
    }
  }
  endResetModel();
}

void SummaryModel::clear() {
  beginResetModel();
  m_rows.clear();
  endResetModel();
}

int SummaryModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int SummaryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : m_measured ? ColumnCount : Measured;
}

QVariant SummaryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const Row& r = m_rows[index.row()];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Metric: return r.metric;
      case Value: return r.text;
      case Measured: return r.measured;
      default: return r.error;
    }
  }
  if (role == Qt::ToolTipRole && index.column() == Value) return r.text;  // a long bottleneck sentence whole
  if (role == Qt::ToolTipRole && index.column() >= Measured && !r.basis.isEmpty()) return r.basis;
  if (role == RawRole && index.column() == Value) return r.raw;
  if (role == Qt::TextAlignmentRole && index.column() != Metric) return int(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant SummaryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Metric: return tr("Metric");
    case Value: return tr("Predicted");
    case Measured: return tr("Measured");
    default: return tr("Error");
  }
}

QString SummaryModel::value(const QString& metric) const {
  for (const Row& r : m_rows) {
    if (r.metric == metric) return r.text;
  }
  return {};
}

MemoryModel::MemoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void MemoryModel::setReport(const workload::MemoryReport& r) {
  beginResetModel();
  m_report = r;
  endResetModel();
}

void MemoryModel::clear() { setReport({}); }

int MemoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_report.stages.size());
}
int MemoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

double MemoryModel::bytes(int row, int column) const {
  const workload::MemoryBreakdown& b = m_report.stages[std::size_t(row)];
  switch (column) {
    case Total: return b.total();
    case Capacity: return m_report.capacity;
    case Weights: return b.weights;
    case Gradients: return b.gradients;
    case Master: return b.master;
    case Optimizer: return b.optimizer;
    case Activations: return b.activations;
    case Logits: return b.logits;
    case Workspace: return b.workspace + b.communicators;
    case Host: return b.host;
    default: return 0.0;
  }
}

bool MemoryModel::fits(int row) const {
  const workload::MemoryBreakdown& b = m_report.stages[std::size_t(row)];
  return b.total() <= m_report.usable() && (m_report.host_capacity <= 0.0 || b.host <= m_report.host_capacity);
}

QVariant MemoryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const workload::MemoryBreakdown& b = m_report.stages[std::size_t(index.row())];
  const bool host_fits = m_report.host_capacity <= 0.0 || b.host <= m_report.host_capacity;
  const bool fits = this->fits(index.row());
  const int c = index.column();
  if (role == Qt::DisplayRole) {
    if (c == Stage) return b.stage;
    if (c == Fits) {
      if (fits) return tr("fits");
      if (!host_fits) return tr("out of host memory");
      return b.total() <= m_report.capacity ? tr("past the headroom") : tr("out of memory");
    }
    return QString::fromStdString(u::format_bytes(bytes(index.row(), c)));
  }
  if (role == RawRole) return c == Stage ? QVariant(b.stage) : c == Fits ? QVariant(fits) : QVariant(bytes(index.row(), c));
  if (role == GiBRole && c != Stage && c != Fits) return bytes(index.row(), c) / double(1ULL << 30);
  if (role == Qt::ForegroundRole && !fits && (c == Total || c == Fits)) return QBrush(QColor(200, 0, 0));
  if (role == Qt::TextAlignmentRole && c != Fits) return int(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant MemoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section;
  static const char* const names[ColumnCount] = {"Stage",     "Per rank", "Capacity",    "Fits",   "Weights", "Gradients",
                                                 "Master",    "Optimizer", "Activations", "Logits", "Runtime",
                                                 "Host"};
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

}  // namespace parasim::gui
