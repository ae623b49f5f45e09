#include "timelinedelegate.h"

#include <QAbstractItemView>
#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include "timelinemodel.h"
#include "topology/units.hpp"

namespace parasim::gui {

TimelineDelegate::TimelineDelegate(const TimelineZoom* zoom, QObject* parent) : QStyledItemDelegate(parent), m_zoom(zoom) {}

void TimelineDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const {
  const auto* model = qobject_cast<const TimelineModel*>(index.model());
  if (model == nullptr || model->trace() == nullptr) return;
  const TimelineLane& lane = model->trace()->lanes[std::size_t(index.row())];
  const QRectF r = option.rect;
  const TimeMapping m = m_zoom->mapping(r.width());
  painter->save();
  painter->setClipRect(option.rect);
  if (index.row() % 2 == 1) painter->fillRect(option.rect, QColor(0, 0, 0, 10));
  if (lane.isCounter()) {
    const std::vector<float> columns = counterColumns(lane, m);
    const QColor fill(0, 150, 160, 170);
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (columns[c] <= 0.0f) continue;
      const double h = std::min(1.0, double(columns[c])) * (r.height() - 2);
      painter->fillRect(QRectF(r.left() + double(c), r.bottom() - h, 1.0, h), fill);
    }
  } else {
    const QFontMetrics fm(option.font);
    const TimelineTrace& trace = *model->trace();
    for (const PaintItem& it : foldLane(lane, m)) {
      const QRectF box(r.left() + it.x0, r.top() + 1, std::max(1.0, it.x1 - it.x0), r.height() - 2);
      // A fold is drawn in the colour of the kind busiest in it, lighter; a fold of several
      // kinds also hatched.
      QColor c = categoryColor(it.category);
      if (it.count > 1) c = c.lighter(125);
      painter->fillRect(box, c);
      if (it.mixed) painter->fillRect(box, QBrush(c.darker(140), Qt::BDiagPattern));
      if (box.width() > 40 && it.count == 1) {
        painter->setPen(Qt::white);
        const QString text = fm.elidedText(trace.spanName(lane.spans[it.first]), Qt::ElideRight, int(box.width()) - 4);
        painter->drawText(box.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft, text);
      }
    }
  }
  painter->restore();
}

QSize TimelineDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const {
  Q_UNUSED(index);
  return {400, QFontMetrics(option.font).height() + 4};
}

QString TimelineDelegate::tooltipAt(const TimelineModel& model, int row, double x, double width) const {
  const TimelineTrace* trace = model.trace();
  if (trace == nullptr || row < 0 || row >= int(trace->lanes.size())) return {};
  const TimelineLane& lane = trace->lanes[std::size_t(row)];
  const TimeMapping m = m_zoom->mapping(width);
  if (lane.isCounter()) {
    const std::vector<float> columns = counterColumns(lane, m);
    const auto c = std::size_t(std::clamp(x, 0.0, double(columns.size()) - 1.0));
    return QStringLiteral("%1\nutilisation %2 % at %3")
        .arg(lane.name)
        .arg(100.0 * double(columns.empty() ? 0.0f : columns[c]), 0, 'f', 1)
        .arg(QString::fromStdString(units::format_duration(m.toTime(x) * 1e-12)));
  }
  const std::vector<PaintItem> items = foldLane(lane, m);
  const PaintItem* it = itemAt(items, x);
  return it != nullptr ? tooltipFor(*trace, lane, *it) : QString();
}

bool TimelineDelegate::helpEvent(QHelpEvent* event, QAbstractItemView* view, const QStyleOptionViewItem& option,
                                 const QModelIndex& index) {
  const auto* model = qobject_cast<const TimelineModel*>(index.model());
  if (event->type() != QEvent::ToolTip || model == nullptr) return QStyledItemDelegate::helpEvent(event, view, option, index);
  const QString text = tooltipAt(*model, index.row(), event->pos().x() - option.rect.left(), option.rect.width());
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPos(), text, view);
  }
  return true;
}

}  // namespace parasim::gui
