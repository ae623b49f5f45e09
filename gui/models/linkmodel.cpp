#include "models/linkmodel.h"

#include "topology/units.hpp"

namespace parasim::gui {
namespace {

QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

LinkModel::LinkModel(QObject* parent) : QAbstractTableModel(parent) {}

void LinkModel::setCluster(std::shared_ptr<const topology::Cluster> cluster) {
  beginResetModel();
  m_cluster = std::move(cluster);
  endResetModel();
}

int LinkModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !m_cluster ? 0 : m_cluster->link_count() / 2;
}

int LinkModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant LinkModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid) || !m_cluster) return {};
  const int id = index.row() * 2;
  const topology::Link& l = m_cluster->link(id);
  const auto& g = m_cluster->graph();
  if (role == RawRole) {
    if (index.column() == Bandwidth) return l.bandwidth;
    if (index.column() == Latency) return l.latency;
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    return index.column() >= Bandwidth ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case From: return qs(g[m_cluster->source(id)].name);
    case To: return qs(g[m_cluster->target(id)].name);
    case Kind: return qs(topology::to_string(l.kind));
    case Class: return qs(topology::to_string(l.cls));
    case Bandwidth: return qs(units::format_bandwidth(l.bandwidth));
    case Latency: return qs(units::format_duration(l.latency));
    default: return {};
  }
}

QVariant LinkModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"From", "To", "Kind", "Class", "Bandwidth", "Latency"};
  return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

LinkKindModel::LinkKindModel(QObject* parent) : QAbstractTableModel(parent) {}

void LinkKindModel::setSummary(const topology::TopologySummary& summary) {
  beginResetModel();
  m_rows.clear();
  for (const auto& [kind, l] : summary.links_by_kind) m_rows.push_back(Row{qs(kind), l.links, l.total_bandwidth});
  endResetModel();
}

int LinkKindModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(m_rows.size()); }

int LinkKindModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant LinkKindModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid) || (role != Qt::DisplayRole && role != Qt::EditRole)) return {};
  const Row& r = m_rows[index.row()];
  switch (index.column()) {
    case Kind: return r.kind;
    case Count: return r.count;
    case TotalGBps: return r.totalBandwidth / 1e9;
    default: return {};
  }
}

QVariant LinkKindModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Kind", "Links", "Total GB/s"};
  return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

QString dumpModel(const QAbstractItemModel& model) {
  QString out;
  for (int c = 0; c < model.columnCount(); ++c) {
    out += (c ? "\t" : "") + model.headerData(c, Qt::Horizontal).toString();
  }
  out += '\n';
  for (int r = 0; r < model.rowCount(); ++r) {
    for (int c = 0; c < model.columnCount(); ++c) out += (c ? "\t" : "") + model.index(r, c).data().toString();
    out += '\n';
  }
  return out;
}

}  // namespace parasim::gui
