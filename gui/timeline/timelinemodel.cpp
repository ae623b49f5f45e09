#include "timelinemodel.h"

#include "topology/units.hpp"

namespace parasim::gui {

TimelineModel::TimelineModel(QObject* parent) : QAbstractTableModel(parent) {}

void TimelineModel::setTrace(std::shared_ptr<const TimelineTrace> trace) {
  beginResetModel();
  m_trace = std::move(trace);
  endResetModel();
}

int TimelineModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !m_trace ? 0 : int(m_trace->lanes.size());
}

int TimelineModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 1; }

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!m_trace || !index.isValid() || index.row() >= rowCount()) return {};
  const TimelineLane& lane = m_trace->lanes[std::size_t(index.row())];
  if (role == Qt::DisplayRole) {
    if (lane.isCounter()) {
      double peak = 0.0;
      for (const auto& [t, v] : lane.samples) peak = std::max(peak, v);
      return QStringLiteral("utilisation, peak %1 %").arg(100.0 * peak, 0, 'f', 1);
    }
    return QStringLiteral("%1 spans, busy %2")
        .arg(lane.spans.size())
        .arg(QString::fromStdString(units::format_duration(double(lane.busy()) * 1e-12)));
  }
  if (role == Qt::ToolTipRole) return lane.name;
  return {};
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Horizontal) return section == 0 ? QStringLiteral("time") : QVariant();
  if (!m_trace || section < 0 || section >= rowCount()) return {};
  return m_trace->lanes[std::size_t(section)].name;
}

TimelineZoom::TimelineZoom(QObject* parent) : QObject(parent) {}

void TimelineZoom::setLimit(double picoseconds) {
  // A view showing the whole step keeps doing so; a zoomed one keeps its window (within
  // the new limit), so a re-simulation does not lose the user's place.
  const bool whole = m_start <= 0.0 && m_end >= m_limit;
  m_limit = std::max(picoseconds, 1000.0);
  if (whole) {
    fit();
  } else {
    setWindow(m_start, m_end);
  }
}

void TimelineZoom::setWindow(double start, double end) {
  const double margin = 0.05 * m_limit;
  double span = std::clamp(end - start, 1000.0, m_limit + 2.0 * margin);
  start = std::clamp(start, -margin, m_limit + margin - span);
  if (start == m_start && start + span == m_end) return;
  m_start = start;
  m_end = start + span;
  emit changed();
}

}  // namespace parasim::gui
