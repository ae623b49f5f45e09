#include "topologyview.h"

#include <QGraphicsEllipseItem>
#include <QGraphicsPathItem>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QLinearGradient>
#include <QKeyEvent>
#include <QWheelEvent>
#include <cmath>
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
  maxNodes = std::max(1, maxNodes);
  out.groupSize = out.nodes > maxNodes ? (out.nodes + maxNodes - 1) / maxNodes : 1;
  const bool grouped = out.groupSize > 1;
  out.nodesShown = grouped ? 0 : out.nodes;
  const int boxCount = (out.nodes + out.groupSize - 1) / out.groupSize;
  // Vertices of each node by row, and the network's by row, in id order.
  std::map<std::pair<int, double>, std::vector<std::size_t>> inNode;  // (node, y) -> vertices
  std::map<int, std::vector<std::size_t>> network;
  for (std::size_t v = 0; v < vertices; ++v) {
    const topology::Vertex& x = g[v];
    if (x.node >= 0) {
      if (!grouped) inNode[{x.node, nodeRow(x.kind)}].push_back(v);
    } else {
      network[networkRow(x.kind)].push_back(v);
    }
  }
  std::size_t widest = 2;
  for (const auto& [key, list] : inNode) widest = std::max(widest, list.size());
  const double boxWidth = grouped ? 150.0 : double(widest) * gpuPitch + 16.0;
  const double height = grouped ? 70.0 : boxHeight;
  const int perRow = std::min(boxCount, grouped ? 2 * boxesPerRow : boxesPerRow);
  const double top = network.empty() ? 0.0 : 3 * 70.0;
  for (int b = 0; b < boxCount; ++b) {
    const double x = double(b % perRow) * (boxWidth + boxGap);
    const double y = top + double(b / perRow) * (height + boxGap);
    out.boxes.push_back({QRectF(x, y, boxWidth, height), b * out.groupSize,
                         std::min(out.nodes, (b + 1) * out.groupSize) - 1});
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
  // Grouped: a node's links leave from its group's box (top centre); those inside a group
  // are not drawn.
  auto box_of = [&](std::size_t v) { return g[v].node >= 0 ? g[v].node / out.groupSize : -1; };
  auto anchor = [&](std::size_t v) -> std::optional<QPointF> {
    if (!grouped || g[v].node < 0) return out.positions[v];
    const QRectF& r = out.boxes[std::size_t(box_of(v))].rect;
    return QPointF(r.center().x(), r.top());
  };
  std::map<std::pair<long, long>, std::size_t> bundle_of;  // (end, end) -> bundle
  for (int l = 0; l < c.link_count(); l += 2) {
    const std::size_t s = c.source(l), t = c.target(l);
    const std::optional<QPointF> a = anchor(s), b = anchor(t);
    if (!a || !b) continue;
    if (grouped && g[s].node >= 0 && g[t].node >= 0 && box_of(s) == box_of(t)) continue;
    out.links.push_back(l);
    if (!grouped) {
      out.bundles.push_back({*a, *b, {l}});
      continue;
    }
    // An end: the vertex, or its group (negative).
    auto end = [&](std::size_t v) { return g[v].node >= 0 ? -1L - box_of(v) : long(v); };
    const std::pair<long, long> key = std::minmax(end(s), end(t));
    const auto [it, fresh] = bundle_of.try_emplace(key, out.bundles.size());
    if (fresh) out.bundles.push_back({*a, *b, {}});
    out.bundles[it->second].links.push_back(l);
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

  // A label keeps its size whatever the zoom, centred on (or above) its point.
  auto label = [this, &small](const QString& text, QPointF at, bool above, double z) {
    auto* item = scene()->addSimpleText(text, small);
    item->setFlag(QGraphicsItem::ItemIgnoresTransformations);
    const QRectF r = item->boundingRect();
    item->setPos(at);
    item->setTransform(QTransform::fromTranslate(-r.width() / 2, above ? -r.height() : 0.0));
    item->setZValue(z);
    return item;
  };
  for (const TopologyLayout::Box& b : m_layout.boxes) {
    auto* box = scene()->addRect(b.rect, QPen(QColor(120, 120, 120)), QBrush(QColor(245, 247, 250)));
    box->setZValue(-2);
    if (b.lastNode == b.node) {
      auto* name = scene()->addSimpleText(QStringLiteral("node %1").arg(b.node), small);
      name->setPos(b.rect.left() + 4, b.rect.top() + 2);
    } else {
      const int gpus = (b.lastNode - b.node + 1) * c.spec().gpus_per_node;
      box->setToolTip(tr("nodes %1 to %2: %3 devices; the links inside the group are not drawn")
                          .arg(b.node)
                          .arg(b.lastNode)
                          .arg(gpus));
      label(tr("nodes %1-%2").arg(b.node).arg(b.lastNode), b.rect.center(), true, 4);
      label(tr("%1 devices").arg(gpus), b.rect.center(), false, 4);
    }
  }
  for (const TopologyLayout::Bundle& bundle : m_layout.bundles) {
    const QPointF a = bundle.a;
    const QPointF b = bundle.b;
    double u = 0.0, mean = 0.0, carried = 0.0;
    for (const int l : bundle.links) {
      u = std::max({u, util[std::size_t(l)], util[std::size_t(l + 1)]});
      mean += std::max(util[std::size_t(l)], util[std::size_t(l + 1)]) / double(bundle.links.size());
      carried += bytes[std::size_t(l)] + bytes[std::size_t(l + 1)];
    }
    QPainterPath path(a);
    if (std::abs(a.y() - b.y()) < 1.0) {  // same row (an NVLink mesh): bow upwards by distance
      path.quadTo(QPointF((a.x() + b.x()) / 2, a.y() - std::abs(b.x() - a.x()) * 0.35), b);
    } else {
      path.lineTo(b);
    }
    const double width = 1.2 + 3.0 * std::min(1.0, u) + (bundle.links.size() > 1 ? std::log2(double(bundle.links.size())) : 0.0);
    auto* item = scene()->addPath(path, QPen(utilisationColor(u), width));
    item->setZValue(u > 0 ? 0.5 + u : 0.0);
    const int l = bundle.links.front();
    const topology::Link& link = c.link(l);
    if (bundle.links.size() == 1) {
      item->setToolTip(QStringLiteral("%1\n%2, %3 each way, %4\nutilisation %5 % (busier direction)\ncarried %6 and %7 in the step")
                           .arg(QString::fromStdString(c.link_name(l)),
                                QString::fromUtf8(topology::to_string(link.kind).data()),
                                QString::fromStdString(units::format_bandwidth(link.bandwidth)),
                                QString::fromUtf8(topology::to_string(link.cls).data()))
                           .arg(100.0 * u, 0, 'f', 1)
                           .arg(QString::fromStdString(units::format_bytes(bytes[std::size_t(l)])),
                                QString::fromStdString(units::format_bytes(bytes[std::size_t(l + 1)]))));
    } else {
      item->setToolTip(tr("%1 links like %2\n%3, %4 each way\nutilisation: busiest %5 %, mean %6 % (busier direction)\n"
                          "carried %7 in the step, both directions")
                           .arg(bundle.links.size())
                           .arg(QString::fromStdString(c.link_name(l)), QString::fromUtf8(topology::to_string(link.kind).data()),
                                QString::fromStdString(units::format_bandwidth(link.bandwidth)))
                           .arg(100.0 * u, 0, 'f', 1)
                           .arg(100.0 * mean, 0, 'f', 1)
                           .arg(QString::fromStdString(units::format_bytes(carried))));
    }
    for (const int member : bundle.links) m_linkItems[std::size_t(member / 2)] = item;
  }
  struct Row {
    QString first;  // the kind
    int second = 0;
    double third = 0.0;   // the leftmost x
    double fourth = 0.0;  // the rightmost x
  };
  std::map<double, Row> crowded;  // network rows by y: kind, count, left
  {
    std::map<double, Row> rows;
    for (std::size_t v = 0; v < m_layout.positions.size(); ++v) {
      if (!m_layout.positions[v] || c.vertex(v).node >= 0) continue;
      Row& r = rows[m_layout.positions[v]->y()];
      if (r.second == 0) r.third = m_layout.positions[v]->x();
      r.first = QString::fromUtf8(topology::to_string(c.vertex(v).kind).data());
      ++r.second;
      r.third = std::min(r.third, m_layout.positions[v]->x());
      r.fourth = std::max(r.fourth, m_layout.positions[v]->x());
    }
    for (const auto& [y, r] : rows) {
      if (r.second > 12) crowded[y] = r;
    }
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
    // A row of more switches than labels fit (32 spines) is named once, at its left.
    if (!gpu && x.node < 0 && crowded.count(p.y())) continue;
    label(gpu ? QString::number(x.index) : shortName(x), QPointF(p.x(), gpu ? p.y() + 10 : p.y() - 9), !gpu, 4);
  }
  for (const auto& [y, row] : crowded) {
    label(tr("%1 x %2").arg(row.second).arg(row.first), QPointF((row.third + row.fourth) / 2, y - 9), true, 4);
  }
  // Legend: the colour scale and what is shown.
  const QRectF all = scene()->itemsBoundingRect();
  QLinearGradient grad(all.left(), 0, all.left() + 200, 0);
  for (int i = 0; i <= 10; ++i) grad.setColorAt(i / 10.0, utilisationColor(std::max(0.001, i / 10.0)));
  scene()->addRect(QRectF(all.left(), all.bottom() + 20, 200, 12), QPen(Qt::NoPen), QBrush(grad));
  auto* legend = scene()->addSimpleText(
      tr("link utilisation in the step: 0 %  to  100 %   (grey: idle)%1\nwheel or + and -: zoom, drag: pan, 0: fit")
          .arg(m_layout.groupSize > 1 ? tr("\n%1 nodes in groups of %2: a line per group and switch, coloured by its busiest link")
                                            .arg(m_layout.nodes)
                                            .arg(m_layout.groupSize)
                                      : QString()));
  legend->setPos(all.left() + 210, all.bottom() + 16);
  legend->setFlag(QGraphicsItem::ItemIgnoresTransformations);
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

void TopologyView::keyPressEvent(QKeyEvent* event) {
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: scale(1.25, 1.25); break;
    case Qt::Key_Minus: scale(0.8, 0.8); break;
    case Qt::Key_0: fitInView(sceneRect(), Qt::KeepAspectRatio); break;
    default: QGraphicsView::keyPressEvent(event); return;
  }
  event->accept();
}

void TopologyView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  if (!scene()->items().isEmpty()) fitInView(sceneRect(), Qt::KeepAspectRatio);
}

}  // namespace parasim::gui
