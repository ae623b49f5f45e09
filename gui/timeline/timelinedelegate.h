// Paints a lane of the timeline: its folded spans (foldLane) coloured by kind, a name inside
// spans wide enough for one, or a counter lane's utilisation as bars per pixel column; and
// answers tooltips for the item under the mouse. The window comes from the shared zoom.
#pragma once

#include <QStyledItemDelegate>

namespace parasim::gui {

class TimelineZoom;
class TimelineModel;

class TimelineDelegate : public QStyledItemDelegate {
  Q_OBJECT
 public:
  TimelineDelegate(const TimelineZoom* zoom, QObject* parent = nullptr);
  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  bool helpEvent(QHelpEvent* event, QAbstractItemView* view, const QStyleOptionViewItem& option,
                 const QModelIndex& index) override;
  // The tooltip of the item at pixel x of a lane `width` pixels wide; empty when none.
  [[nodiscard]] QString tooltipAt(const TimelineModel& model, int row, double x, double width) const;

 private:
  const TimelineZoom* m_zoom;
};

}  // namespace parasim::gui
