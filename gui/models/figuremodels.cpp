#include "figuremodels.h"

#include <QBrush>
#include <cmath>

#include "program/program.hpp"
#include "simulation.h"
#include "topology/units.hpp"

namespace parasim::gui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }
FigureTableModel::Cell seconds(double v) { return {q(units::format_duration(v)), v, {}}; }
FigureTableModel::Cell bytes(double v) { return {q(units::format_bytes(v)), v, {}}; }
FigureTableModel::Cell count(int v) { return {QString::number(v), v, {}}; }

}  // namespace

FigureTableModel::FigureTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void FigureTableModel::setTable(QStringList headers, QVector<QVector<Cell>> rows) {
  beginResetModel();
  m_headers = std::move(headers);
  m_rows = std::move(rows);
  endResetModel();
}

double FigureTableModel::raw(int row, int column) const { return index(row, column).data(RawRole).toDouble(); }

int FigureTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int FigureTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_headers.size()); }

QVariant FigureTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const QVector<Cell>& row = m_rows[index.row()];
  if (index.column() >= row.size()) return {};
  const Cell& c = row[index.column()];
  switch (role) {
    case Qt::DisplayRole: return c.text;
    case RawRole: return c.raw;
    case Qt::ForegroundRole: return c.color.isValid() ? QVariant(QBrush(c.color)) : QVariant();
    case Qt::TextAlignmentRole:
      return index.column() == 0 ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    default: return {};
  }
}

QVariant FigureTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section;
  return section >= 0 && section < m_headers.size() ? m_headers[section] : QVariant();
}

void showRankBreakdown(FigureTableModel& m, const report::StepFigures& f, int maxRanks) {
  QVector<QVector<FigureTableModel::Cell>> rows;
  for (const report::RankFigures& r : f.ranks) {
    if (r.rank >= maxRanks) break;
    // RankFigures::bubble is a fraction of the step that counts pp transfers in flight as
    // waiting: the chart shows the exposed transfers once, and the rest of the wait.
    const double bubble = std::max(0.0, r.bubble * f.step_time - r.exposed[1]);
    const double other = std::max(0.0, f.step_time - r.compute - r.exposed[0] - r.exposed[1] - r.exposed[2] -
                                           r.exposed[3] - r.exposed[4] - bubble);
    rows.push_back({count(r.rank), seconds(r.compute), seconds(r.exposed[0]), seconds(r.exposed[1]), seconds(r.exposed[2]),
                    seconds(r.exposed[3]), seconds(r.exposed[4]), seconds(bubble), seconds(other)});
  }
  m.setTable({QObject::tr("Rank"), QObject::tr("Compute"), QObject::tr("TP exposed"), QObject::tr("PP exposed"),
              QObject::tr("DP exposed"), QObject::tr("CP exposed"), QObject::tr("EP exposed"), QObject::tr("Bubble"),
              QObject::tr("Other")},
             std::move(rows));
}

void showRankMemory(FigureTableModel& m, const scenario::Scenario& s, const workload::MemoryReport& r,
                    const std::vector<double>& measured, int maxRanks) {
  QVector<QVector<FigureTableModel::Cell>> rows;
  const int world = std::min(s.plan.world(), maxRanks);
  for (int rank = 0; rank < world; ++rank) {
    const int stage = scenario::coord_of(s.plan, rank).pp;
    const workload::MemoryBreakdown& b = r.stages[std::size_t(stage)];
    FigureTableModel::Cell measuredCell{QStringLiteral("-"), QVariant(), {}};
    if (std::size_t(rank) < measured.size() && measured[std::size_t(rank)] > 0) measuredCell = bytes(measured[std::size_t(rank)]);
    rows.push_back({count(rank), count(stage), bytes(b.tensors()), measuredCell});
  }
  m.setTable({QObject::tr("Rank"), QObject::tr("Stage"), QObject::tr("Predicted tensors"), QObject::tr("Measured peak")},
             std::move(rows));
}

void showComparison(FigureTableModel& m, const std::vector<report::ComparisonRow>& rows) {
  QVector<QVector<FigureTableModel::Cell>> out;
  for (const report::ComparisonRow& r : rows) {
    const double e = r.error();
    // Off by more than 25 % (or 5 points): red, so the large gaps stand out.
    const bool large = !std::isnan(e) && std::abs(e) > (r.unit == "fraction" ? 0.05 : 0.25);
    out.push_back({{q(r.name), q(r.unit), {}},
                   {q(report::format_value(r, r.predicted)), r.predicted, {}},
                   {q(report::format_value(r, r.measured)), r.measured, {}},
                   {q(report::format_error(r)), std::isnan(e) ? QVariant() : QVariant(e), large ? QColor(200, 0, 0) : QColor()}});
  }
  m.setTable({QObject::tr("Metric"), QObject::tr("Predicted"), QObject::tr("Measured"), QObject::tr("Error")}, std::move(out));
}

void showScaling(FigureTableModel& m, const Scaling& s) {
  QVector<QVector<FigureTableModel::Cell>> rows;
  for (const ScalingPoint& p : s.points) {
    rows.push_back({count(p.gpus), count(p.dp), seconds(p.stepTime),
                    {q(units::format_count(p.tokensPerSecond)), p.tokensPerSecond, {}},
                    {q(units::format_count(p.ideal)), p.ideal, {}},
                    {QStringLiteral("%1 %").arg(100.0 * p.efficiency, 0, 'f', 1), p.efficiency, {}},
                    {p.timeToTrain > 0.0 ? QStringLiteral("%1 %").arg(100.0 * p.goodput, 0, 'f', 1) : QString(), p.goodput, {}},
                    {p.timeToTrain > 0.0 ? q(units::format_span(p.timeToTrain)) : QString(), p.timeToTrain, {}}});
  }
  m.setTable({QObject::tr("GPUs"), QObject::tr("dp"), QObject::tr("Step time"), QObject::tr("Tokens/s"),
              QObject::tr("Ideal tokens/s"), QObject::tr("Efficiency"), QObject::tr("Goodput"),
              QObject::tr("Time to train")},
             std::move(rows));
}

}  // namespace parasim::gui
