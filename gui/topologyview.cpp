#include "topologyview.h"

#include <QGraphicsEllipseItem>
#include <QGraphicsPathItem>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QLinearGradient>
#include <QWheelEvent>
#include <map>

#include "topology/units.hpp"

namespace parasim::gui {

namespace {

constexpr double gpuPitch = 44.0;
constexpr double boxHeight = 150.0;
constexpr double boxGap = 36.0;
constexpr int boxesPerRow = 4;

// Row of network equipment above the nodes, top first.
int networkRow(topology::VertexKind k) {
  switch (k) {
    case topology::VertexKind::wan_gateway: return 0;
    case topology::VertexKind::spine_switch: return 1;
    default: return 2;  // leaves (and a single switch)
  }
}

// Height inside a node box.
double nodeRow(topology::VertexKind k) {
  switch (k) {
    case topology::VertexKind::nic: return 22.0;
    case topology::VertexKind::gpu: return boxHeight - 28.0;
    default: return 72.0;  // switches, host
  }
}

QString shortName(const topology::Vertex& v) {
  const QString n = QString::fromStdString(v.name);
  const qsizetype dot = n.indexOf(QLatin1Char('.'));
  return v.node >= 0 && dot >= 0 ? n.mid(dot + 1) : n;
}

}  // namespace

TopologyLayout layoutCluster(const topology::Cluster& c, int maxNodes) {
  TopologyLayout out;
  const topology::Graph& g = c.graph();
  const auto vertices = std::size_t(boost::num_vertices(g));
  out.positions.assign(vertices, std::nullopt);
  out.nodes = c.spec().nodes;
  out.nodesShown = std::min(out.nodes, std::max(1, maxNodes));
  // Vertices of each node by row, and the network's by row, in id order.
  std::map<std::pair<int, double>, std::vector<std::size_t>> inNode;  // (node, y) -> vertices
  std::map<int, std::vector<std::size_t>> network;
  for (std::size_t v = 0; v < vertices; ++v) {
    const topology::Vertex& x = g[v];
    if (x.node >= 0) {
      if (x.node < out.nodesShown) inNode[{x.node, nodeRow(x.kind)}].push_back(v);
    } else {
      network[networkRow(x.kind)].push_back(v);
    }
  }
  std::size_t widest = 2;
  for (const auto& [key, list] : inNode) widest = std::max(widest, list.size());
  const double boxWidth = double(widest) * gpuPitch + 16.0;
  const int perRow = std::min(out.nodesShown, boxesPerRow);
  const double top = network.empty() ? 0.0 : 3 * 70.0;
  for (int n = 0; n < out.nodesShown; ++n) {
    const double x = double(n % perRow) * (boxWidth + boxGap);
    const double y = top + double(n / perRow) * (boxHeight + boxGap);
    out.boxes.push_back({QRectF(x, y, boxWidth, boxHeight), n});
  }
  auto spread = [](const std::vector<std::size_t>& list, double left, double width, double y,
                   std::vector<std::optional<QPointF>>& pos) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      pos[list[i]] = QPointF(left + width * (double(i) + 0.5) / double(list.size()), y);
    }
  };
  for (const auto& [key, list] : inNode) {
    const QRectF& box = out.boxes[std::size_t(key.first)].rect;
    spread(list, box.left(), box.width(), box.top() + key.second, out.positions);
  }
  const double totalWidth = double(perRow) * (boxWidth + boxGap) - boxGap;
  for (const auto& [row, list] : network) spread(list, 0.0, totalWidth, 20.0 + 70.0 * row, out.positions);
  for (int l = 0; l < c.link_count(); l += 2) {
    if (out.positions[c.source(l)] && out.positions[c.target(l)]) out.links.push_back(l);
  }
  return out;
}

std::vector<double> linkUtilisation(const topology::Cluster& c, const report::Trace& t) {
  std::vector<double> u(std::size_t(c.link_count()), 0.0);
  const double step = t.step_seconds();
  if (step <= 0) return u;
  for (const report::LinkUse& l : t.links) {
    if (l.link >= 0 && l.link < c.link_count()) u[std::size_t(l.link)] = l.bytes / (c.link(l.link).bandwidth * step);
  }
  return u;
}

QColor utilisationColor(double u) {
  if (u <= 0.0) return {190, 190, 190};
  const double x = std::min(1.0, u);
  // green (0, 170, 60) -> yellow (230, 200, 0) -> red (210, 30, 30)
  if (x < 0.5) {
    const double f = x / 0.5;
    return QColor::fromRgbF(float((0 + f * 230) / 255), float((170 + f * 30) / 255), float((60 - f * 60) / 255));
  }
  const double f = (x - 0.5) / 0.5;
  return QColor::fromRgbF(float((230 - f * 20) / 255), float((200 - f * 170) / 255), float((0 + f * 30) / 255));
}

TopologyView::TopologyView(QWidget* parent) : QGraphicsView(parent) {
  setScene(new QGraphicsScene(this));
  setRenderHint(QPainter::Antialiasing);
  setDragMode(QGraphicsView::ScrollHandDrag);
  setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
}

void TopologyView::show(std::shared_ptr<const topology::Cluster> cluster, const report::Trace& trace, int maxNodes) {
  m_cluster = std::move(cluster);
  scene()->clear();
  m_linkItems.assign(std::size_t(m_cluster->link_count() / 2 + 1), nullptr);
  m_layout = layoutCluster(*m_cluster, maxNodes);
  const topology::Cluster& c = *m_cluster;
  const std::vector<double> util = linkUtilisation(c, trace);
  std::vector<double> bytes(util.size(), 0.0);
  for (const report::LinkUse& l : trace.links) {
    if (l.link >= 0 && std::size_t(l.link) < bytes.size()) bytes[std::size_t(l.link)] = l.bytes;
  }
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.8);

  for (const TopologyLayout::Box& b : m_layout.boxes) {
    auto* box = scene()->addRect(b.rect, QPen(QColor(120, 120, 120)), QBrush(QColor(245, 247, 250)));
    box->setZValue(-2);
    auto* label = scene()->addSimpleText(QStringLiteral("node %1").arg(b.node), small);
    label->setPos(b.rect.left() + 4, b.rect.top() + 2);
  }
  for (const int l : m_layout.links) {
    const QPointF a = *m_layout.positions[c.source(l)];
    const QPointF b = *m_layout.positions[c.target(l)];
    const double u = std::max(util[std::size_t(l)], util[std::size_t(l + 1)]);
    QPainterPath path(a);
    if (std::abs(a.y() - b.y()) < 1.0) {  // same row (an NVLink mesh): bow upwards by distance
      path.quadTo(QPointF((a.x() + b.x()) / 2, a.y() - std::abs(b.x() - a.x()) * 0.35), b);
    } else {
      path.lineTo(b);
    }
    auto* item = scene()->addPath(path, QPen(utilisationColor(u), 1.2 + 3.0 * std::min(1.0, u)));
    item->setZValue(u > 0 ? 0.5 + u : 0.0);
    const topology::Link& link = c.link(l);
    item->setToolTip(QStringLiteral("%1\n%2, %3 each way, %4\nutilisation %5 % (busier direction)\ncarried %6 and %7 in the step")
                         .arg(QString::fromStdString(c.link_name(l)),
                              QString::fromUtf8(topology::to_string(link.kind).data()),
                              QString::fromStdString(units::format_bandwidth(link.bandwidth)),
                              QString::fromUtf8(topology::to_string(link.cls).data()))
                         .arg(100.0 * u, 0, 'f', 1)
                         .arg(QString::fromStdString(units::format_bytes(bytes[std::size_t(l)])),
                              QString::fromStdString(units::format_bytes(bytes[std::size_t(l + 1)]))));
    m_linkItems[std::size_t(l / 2)] = item;
  }
  for (std::size_t v = 0; v < m_layout.positions.size(); ++v) {
    if (!m_layout.positions[v]) continue;
    const topology::Vertex& x = c.vertex(v);
    const QPointF p = *m_layout.positions[v];
    const bool gpu = x.kind == topology::VertexKind::gpu;
    const QColor fill = gpu ? QColor(66, 133, 244) : x.kind == topology::VertexKind::nic ? QColor(0, 150, 160) : QColor(90, 90, 90);
    auto* dot = scene()->addEllipse(QRectF(p.x() - 9, p.y() - 9, 18, 18), QPen(Qt::white), QBrush(fill));
    dot->setZValue(3);
    dot->setToolTip(QString::fromStdString(x.name) + QStringLiteral(" (") + QString::fromUtf8(topology::to_string(x.kind).data()) +
                    QLatin1Char(')'));
    auto* label = scene()->addSimpleText(gpu ? QString::number(x.index) : shortName(x), small);
    label->setZValue(4);
    const QRectF r = label->boundingRect();
    label->setPos(p.x() - r.width() / 2, gpu ? p.y() + 10 : p.y() - 9 - r.height());
  }
  // Legend: the colour scale and what is shown.
  const QRectF all = scene()->itemsBoundingRect();
  QLinearGradient grad(all.left(), 0, all.left() + 200, 0);
  for (int i = 0; i <= 10; ++i) grad.setColorAt(i / 10.0, utilisationColor(std::max(0.001, i / 10.0)));
  scene()->addRect(QRectF(all.left(), all.bottom() + 20, 200, 12), QPen(Qt::NoPen), QBrush(grad));
  auto* legend = scene()->addSimpleText(
      tr("link utilisation in the step: 0 %  to  100 %   (grey: idle)%1")
          .arg(m_layout.nodesShown < m_layout.nodes ? tr("; showing %1 of %2 nodes").arg(m_layout.nodesShown).arg(m_layout.nodes)
                                                    : QString()));
  legend->setPos(all.left() + 210, all.bottom() + 16);
  setSceneRect(scene()->itemsBoundingRect().adjusted(-20, -20, 20, 20));
  fitInView(sceneRect(), Qt::KeepAspectRatio);
}

QGraphicsItem* TopologyView::linkItem(int link) const {
  const auto i = std::size_t(link / 2);
  return i < m_linkItems.size() ? m_linkItems[i] : nullptr;
}

void TopologyView::wheelEvent(QWheelEvent* event) {
  const double f = std::pow(1.2, event->angleDelta().y() / 120.0);
  scale(f, f);
  event->accept();
}

void TopologyView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  if (!scene()->items().isEmpty()) fitInView(sceneRect(), Qt::KeepAspectRatio);
}

}  // namespace parasim::gui
