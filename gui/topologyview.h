// The cluster drawn from its graph: a box per node holding its GPUs, switches (NVSwitch,
// PCIe, host) and NICs, the network's leaves, spines and WAN gateways above, and a line per
// physical link coloured by its utilisation in the simulated step (the busier direction's
// bytes over bandwidth x step), with a tooltip giving the link's figures. layoutCluster()
// is the geometry alone, tested without a window; large clusters show their first nodes.
#pragma once

#include <QColor>
#include <QGraphicsView>
#include <QPointF>
#include <QRectF>
#include <memory>
#include <optional>
#include <vector>

#include "report/trace.hpp"
#include "topology/cluster.hpp"

namespace parasim::gui {

struct TopologyLayout {
  struct Box {
    QRectF rect;
    int node = -1;
  };
  std::vector<Box> boxes;
  std::vector<std::optional<QPointF>> positions;  // per vertex; empty: not drawn
  std::vector<int> links;                         // physical links drawn (their even id)
  int nodes = 0;
  int nodesShown = 0;
};

TopologyLayout layoutCluster(const topology::Cluster& c, int maxNodes);
// Utilisation of each directed link over the step (0 when it carried nothing).
std::vector<double> linkUtilisation(const topology::Cluster& c, const report::Trace& t);
// Grey at 0, then green through yellow to red at 1 and above.
QColor utilisationColor(double u);

class TopologyView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  void show(std::shared_ptr<const topology::Cluster> cluster, const report::Trace& trace, int maxNodes = 16);
  // The line drawn for a physical link (its even id), or null.
  [[nodiscard]] QGraphicsItem* linkItem(int link) const;
  [[nodiscard]] const TopologyLayout& layout() const { return m_layout; }

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  std::shared_ptr<const topology::Cluster> m_cluster;
  TopologyLayout m_layout;
  std::vector<QGraphicsItem*> m_linkItems;  // by link id / 2
};

}  // namespace parasim::gui
