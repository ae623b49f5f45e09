#include "timelineview.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QSplitter>
#include <QVBoxLayout>
#include <QWheelEvent>

#include "timelinedelegate.h"
#include "topology/units.hpp"

namespace parasim::gui {

TimelineAxis::TimelineAxis(const TimelineZoom* zoom, QWidget* parent) : QHeaderView(Qt::Horizontal, parent), m_zoom(zoom) {
  setSectionResizeMode(QHeaderView::Stretch);
}

QSize TimelineAxis::sizeHint() const {
  QSize s = QHeaderView::sizeHint();
  s.setHeight(fontMetrics().height() + 10);
  return s;
}

void TimelineAxis::paintSection(QPainter* painter, const QRect& rect, int logicalIndex) const {
  Q_UNUSED(logicalIndex);
  painter->save();
  painter->fillRect(rect, palette().window());
  painter->setPen(palette().windowText().color());
  const TimeMapping m = m_zoom->mapping(rect.width());
  const double minSpacing = fontMetrics().horizontalAdvance(QStringLiteral("000.00 ms")) + 12.0;
  for (const double t : ticks(m, minSpacing)) {
    const double x = rect.left() + m.toX(t);
    painter->drawLine(QPointF(x, rect.bottom() - 4), QPointF(x, rect.bottom()));
    const QString label = QString::fromStdString(units::format_duration(t * 1e-12));
    painter->drawText(QRectF(x + 3, rect.top(), minSpacing, rect.height() - 3), Qt::AlignLeft | Qt::AlignVCenter, label);
  }
  painter->drawLine(rect.bottomLeft(), rect.bottomRight());
  painter->restore();
}

TimelineView::TimelineView(TimelineZoom* zoom, QWidget* parent)
    : QTableView(parent), m_zoom(zoom), m_model(new TimelineModel(this)), m_delegate(new TimelineDelegate(zoom, this)) {
  setHorizontalHeader(new TimelineAxis(zoom, this));
  setModel(m_model);
  setItemDelegate(m_delegate);
  setSelectionMode(QAbstractItemView::NoSelection);
  setFocusPolicy(Qt::StrongFocus);
  setShowGrid(false);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
  verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  viewport()->setMouseTracking(true);
  connect(zoom, &TimelineZoom::changed, this, [this] {
    viewport()->update();
    horizontalHeader()->viewport()->update();
  });
}

TimeMapping TimelineView::mapping() const { return m_zoom->mapping(viewport()->width()); }

void TimelineView::zoomAt(double x, double factor) { m_zoom->apply(mapping().zoomedAt(x, factor)); }

void TimelineView::wheelEvent(QWheelEvent* event) {
  if (event->modifiers() & Qt::ShiftModifier) {
    QTableView::wheelEvent(event);
    return;
  }
  const double steps = event->angleDelta().y() / 120.0;
  if (steps != 0.0) zoomAt(event->position().x(), std::pow(1.25, steps));
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    m_dragging = true;
    m_last = event->pos();
    viewport()->setCursor(Qt::ClosedHandCursor);
  }
  QTableView::mousePressEvent(event);
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  if (m_dragging) {
    const QPoint d = event->pos() - m_last;
    m_last = event->pos();
    m_zoom->apply(mapping().panned(d.x()));
    verticalScrollBar()->setValue(verticalScrollBar()->value() - d.y());
    return;
  }
  QTableView::mouseMoveEvent(event);
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  m_dragging = false;
  viewport()->unsetCursor();
  QTableView::mouseReleaseEvent(event);
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
  m_zoom->fit();
  event->accept();
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  const double middle = viewport()->width() / 2.0;
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoomAt(middle, 1.5); break;
    case Qt::Key_Minus: zoomAt(middle, 1.0 / 1.5); break;
    case Qt::Key_0: m_zoom->fit(); break;
    case Qt::Key_Left: m_zoom->apply(mapping().panned(viewport()->width() / 8.0)); break;
    case Qt::Key_Right: m_zoom->apply(mapping().panned(-viewport()->width() / 8.0)); break;
    default: QTableView::keyPressEvent(event); return;
  }
  event->accept();
}

TimelinePanel::TimelinePanel(QWidget* parent)
    : QWidget(parent),
      m_zoom(new TimelineZoom(this)),
      m_predicted(new TimelineView(m_zoom, this)),
      m_measured(new TimelineView(m_zoom, this)),
      m_predictedTitle(new QLabel(this)),
      m_measuredTitle(new QLabel(this)) {
  auto* legend = new QHBoxLayout;
  for (int c = 0; c < static_cast<int>(program::category_count); ++c) {
    auto* swatch = new QLabel(categoryName(c), this);
    swatch->setStyleSheet(QStringLiteral("background: %1; color: white; padding: 1px 6px").arg(categoryColor(c).name()));
    legend->addWidget(swatch);
  }
  auto* folded = new QLabel(tr("folded"), this);
  folded->setStyleSheet(QStringLiteral("background: %1; color: white; padding: 1px 6px").arg(categoryColor(-2).lighter(125).name()));
  legend->addWidget(folded);
  legend->addStretch(1);
  legend->addWidget(new QLabel(tr("wheel: zoom, drag: pan, double click: whole step"), this));

  auto* split = new QSplitter(Qt::Vertical, this);
  for (auto [title, view] : {std::pair{m_predictedTitle, m_predicted}, std::pair{m_measuredTitle, m_measured}}) {
    auto* box = new QWidget(split);
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(2);
    title->setStyleSheet(QStringLiteral("font-weight: bold"));
    v->addWidget(title);
    v->addWidget(view);
    split->addWidget(box);
  }
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(legend);
  layout->addWidget(split, 1);
  setTitle(m_predictedTitle, nullptr, tr("predicted: open a scenario"));
  clearMeasured(tr("no measurement yet: Run for real, or File > Open trace"));
}

void TimelinePanel::setTitle(QLabel* label, const TimelineTrace* trace, const QString& fallback) {
  if (trace == nullptr) {
    label->setText(fallback);
    return;
  }
  label->setText(QStringLiteral("%1: %2 (step %3, %4 lanes, %5 spans)")
                     .arg(trace->kind, trace->title,
                          QString::fromStdString(units::format_duration(double(trace->end) * 1e-12)))
                     .arg(trace->lanes.size())
                     .arg(trace->spanCount()));
}

void TimelinePanel::setPredicted(std::shared_ptr<const TimelineTrace> trace) {
  setTitle(m_predictedTitle, trace.get(), tr("predicted: none"));
  m_predicted->timeline()->setTrace(std::move(trace));
  updateLimit();
}

void TimelinePanel::setMeasured(std::shared_ptr<const TimelineTrace> trace) {
  setTitle(m_measuredTitle, trace.get(), tr("measured: none"));
  m_measuredText = m_measuredTitle->text();
  m_measured->timeline()->setTrace(std::move(trace));
  updateLimit();
}

void TimelinePanel::clearMeasured(const QString& why) {
  m_measured->timeline()->setTrace(nullptr);
  m_measuredTitle->setText(tr("measured: %1").arg(why));
  m_measuredText = m_measuredTitle->text();
  updateLimit();
}

void TimelinePanel::setMeasuredStale(bool stale) {
  m_measuredTitle->setText(stale ? m_measuredText + tr("  [a run of another plan than the one above: Run for real again]")
                                 : m_measuredText);
  m_measuredTitle->setStyleSheet(stale ? QStringLiteral("font-weight: bold; color: #b06000")
                                       : QStringLiteral("font-weight: bold"));
}

QString TimelinePanel::measuredTitle() const { return m_measuredTitle->text(); }

void TimelinePanel::alignLanes() {
  // One width for both lane-name columns, so the two time axes start at the same x and a
  // time is at the same place in both views.
  int width = 0;
  for (TimelineView* v : {m_predicted, m_measured}) {
    v->verticalHeader()->setMinimumWidth(0);
    v->verticalHeader()->setMaximumWidth(QWIDGETSIZE_MAX);
    width = std::max(width, v->verticalHeader()->sizeHint().width());
  }
  width = std::min(width, 280);
  for (TimelineView* v : {m_predicted, m_measured}) v->verticalHeader()->setFixedWidth(width);
}

void TimelinePanel::updateLimit() {
  alignLanes();
  double limit = 0.0;
  for (const TimelineView* v : {m_predicted, m_measured}) {
    if (v->timeline()->trace() != nullptr) limit = std::max(limit, double(v->timeline()->trace()->end));
  }
  m_zoom->setLimit(limit);
}

}  // namespace parasim::gui
