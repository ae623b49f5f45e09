// Item models over a cluster graph, shared by the dashboard's tables and charts and by the
// tests. LinkModel has one row per physical link (both directions share a row);
// LinkKindModel one row per link kind with its count and total bandwidth, which the
// topology chart maps to bars.
#pragma once

#include <QAbstractTableModel>
#include <memory>

#include "topology/analysis.hpp"
#include "topology/cluster.hpp"

namespace parasim::gui {

class LinkModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { From, To, Kind, Class, Bandwidth, Latency, ColumnCount };
  // Raw values (bytes/s, seconds) for sorting and charts.
  static constexpr int RawRole = Qt::UserRole + 1;

  explicit LinkModel(QObject* parent = nullptr);
  void setCluster(std::shared_ptr<const topology::Cluster> cluster);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const topology::Cluster> m_cluster;
};

class LinkKindModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Kind, Count, TotalGBps, ColumnCount };

  explicit LinkKindModel(QObject* parent = nullptr);
  void setSummary(const topology::TopologySummary& summary);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    QString kind;
    int count = 0;
    double totalBandwidth = 0.0;
  };
  QVector<Row> m_rows;
};

// Tab-separated text of a model's header and display data, for tests and bug reports.
QString dumpModel(const QAbstractItemModel& model);

}  // namespace parasim::gui
