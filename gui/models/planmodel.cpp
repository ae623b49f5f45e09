#include "planmodel.h"

#include "scenario/describe.hpp"
#include "topology/units.hpp"

namespace parasim::gui {

namespace {
QString q(std::string_view s) { return QString::fromUtf8(s.data(), qsizetype(s.size())); }
}  // namespace

PlanModel::PlanModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanModel::setReport(const planner::PlanReport& report, int rows) {
  beginResetModel();
  m_report = report;
  m_rows = std::min(rows, int(m_report.ranked.size()));
  endResetModel();
}

QStringList PlanModel::planOverrides(int row) const {
  QStringList out;
  if (row < 0 || row >= m_rows) return out;
  for (const std::string& o : planner::overrides_of(m_report.ranked[std::size_t(row)].candidate))
    out << QString::fromStdString(o);
  return out;
}

int PlanModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : m_rows; }
int PlanModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant PlanModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const planner::PlanScore& p = m_report.ranked[std::size_t(index.row())];
  const scenario::ParallelPlan& pl = p.candidate.plan;
  const int c = index.column();
  // The numbers of the plan itself, shown as they are.
  QVariant number;
  switch (c) {
    case Rank: number = index.row() + 1; break;
    case Dp: number = pl.dp; break;
    case Tp: number = pl.tp; break;
    case Pp: number = pl.pp; break;
    case Cp: number = pl.cp; break;
    case Ep: number = pl.ep; break;
    case Virtual: number = pl.virtual_stages; break;
    case MicroBatch: number = p.candidate.micro_batch; break;
    case Zero: if (!pl.hybrid_shard() && !pl.offloads()) number = pl.zero; break;
    default: break;
  }
  if (role == Qt::TextAlignmentRole) {
    return number.isValid() || (c >= StepTime && c <= Memory) ? int(Qt::AlignRight | Qt::AlignVCenter)
                                                              : int(Qt::AlignLeft | Qt::AlignVCenter);
  }
  if (role == RawRole) {
    switch (c) {
      case StepTime: return p.step_time;
      case Tokens: return p.tokens_per_s;
      case Mfu: return p.mfu;
      case Memory: return p.memory;
      default: return number.isValid() ? number : data(index, Qt::DisplayRole);
    }
  }
  if (role != Qt::DisplayRole) return {};
  if (number.isValid()) return number;
  switch (c) {
    case Schedule: return q(to_string(pl.schedule));
    case Recompute: return q(to_string(p.candidate.recompute));
    case Sp: return pl.tp_comm_overlap ? tr("overlap") : pl.sequence_parallel ? tr("yes") : tr("no");
    case Placement: return QString::fromStdString(scenario::placement_string(pl));
    case Zero: return QString::fromStdString(planner::sharding_string(pl));
    case StepTime: return QString::fromStdString(units::format_duration(p.step_time));
    case Tokens: return QString::fromStdString(units::format_count(p.tokens_per_s));
    case Mfu: return QStringLiteral("%1 %").arg(100.0 * p.mfu, 0, 'f', 1);
    case Memory: return QString::fromStdString(units::format_bytes(p.memory));
    case Tier: return p.simulated ? tr("simulated") : tr("estimate");
    case Bottleneck: return QString::fromStdString(p.bottleneck);
    default: return {};
  }
}

QVariant PlanModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static const char* const names[ColumnCount] = {"#",         "dp", "tp", "pp", "cp", "ep", "v",        "schedule", "mb",       "recompute", "zero",
                                                 "sp",        "placement", "step time", "tokens/s", "MFU", "memory", "tier", "bottleneck"};
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

}  // namespace parasim::gui
