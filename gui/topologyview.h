// The cluster drawn from its graph: a box per node holding its GPUs, switches (NVSwitch,
// PCIe, host) and NICs, the network's leaves, spines and WAN gateways above, and a line per
// physical link coloured by its utilisation in the simulated step (the busier direction's
// bytes over bandwidth x step), with a tooltip giving the link's figures. layoutCluster()
// is the geometry alone, tested without a window. A cluster of more nodes than fit is drawn
// as groups of consecutive nodes, a box each, with the links from a group to one switch as
// one line coloured by the busiest of them (its tooltip: how many, busiest, mean, bytes).
// The wheel zooms, a drag pans, + and - zoom, 0 fits the whole; labels keep their size.
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
    int node = -1;      // the first node it holds
    int lastNode = -1;  // the last (the same when a box is one node)
  };
  // Physical links drawn as one line: one link, or a group's links to one switch.
  struct Bundle {
    QPointF a, b;
    std::vector<int> links;  // even ids
  };
  std::vector<Box> boxes;
  std::vector<std::optional<QPointF>> positions;  // per vertex; empty: not drawn (inside a group)
  std::vector<int> links;                         // physical links drawn (their even id)
  std::vector<Bundle> bundles;
  int nodes = 0;
  int nodesShown = 0;  // nodes drawn one by one (all of them when not grouped)
  int groupSize = 1;   // nodes per box
};

// Nodes one by one up to maxNodes; beyond, groups of ceil(nodes / maxNodes) nodes.
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
  void keyPressEvent(QKeyEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  std::shared_ptr<const topology::Cluster> m_cluster;
  TopologyLayout m_layout;
  std::vector<QGraphicsItem*> m_linkItems;  // by link id / 2
};

}  // namespace parasim::gui
