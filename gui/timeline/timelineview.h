// The timeline widgets. TimelineView is a table view over a TimelineModel: lane names in
// the vertical header, a time axis (TimelineAxis) as the horizontal one, lanes painted by
// TimelineDelegate. The mouse wheel zooms about the cursor (Shift+wheel scrolls the lanes),
// a drag pans, a double click fits the whole step; + - 0 do the same from the keyboard.
// TimelinePanel stacks the predicted and the measured view over one shared TimelineZoom,
// so both show the same window of time and their differences line up.
#pragma once

#include <QHeaderView>
#include <QTableView>
#include <memory>

#include "timelinemodel.h"

class QLabel;

namespace parasim::gui {

class TimelineDelegate;

class TimelineAxis : public QHeaderView {
  Q_OBJECT
 public:
  TimelineAxis(const TimelineZoom* zoom, QWidget* parent = nullptr);

 protected:
  void paintSection(QPainter* painter, const QRect& rect, int logicalIndex) const override;
  QSize sizeHint() const override;

 private:
  const TimelineZoom* m_zoom;
};

class TimelineView : public QTableView {
  Q_OBJECT
 public:
  TimelineView(TimelineZoom* zoom, QWidget* parent = nullptr);
  [[nodiscard]] TimelineModel* timeline() const { return m_model; }
  [[nodiscard]] TimelineDelegate* delegate() const { return m_delegate; }
  // The mapping of the lanes' column as painted now.
  [[nodiscard]] TimeMapping mapping() const;
  // Zooms by `factor` (> 1 in) about x in the lanes' column (pixels from its left).
  void zoomAt(double x, double factor);

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;

 private:
  TimelineZoom* m_zoom;
  TimelineModel* m_model;
  TimelineDelegate* m_delegate;
  QPoint m_last;
  bool m_dragging = false;
};

class TimelinePanel : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePanel(QWidget* parent = nullptr);
  void setPredicted(std::shared_ptr<const TimelineTrace> trace);
  void setMeasured(std::shared_ptr<const TimelineTrace> trace);
  void clearMeasured(const QString& why);
  // Marks the measured trace as one of another plan than the prediction shown (or not).
  void setMeasuredStale(bool stale);
  [[nodiscard]] QString measuredTitle() const;
  [[nodiscard]] TimelineZoom* zoom() const { return m_zoom; }
  [[nodiscard]] TimelineView* predictedView() const { return m_predicted; }
  [[nodiscard]] TimelineView* measuredView() const { return m_measured; }

 private:
  void updateLimit();
  void alignLanes();
  void setTitle(QLabel* label, const TimelineTrace* trace, const QString& fallback);

  TimelineZoom* m_zoom;
  TimelineView* m_predicted;
  TimelineView* m_measured;
  QLabel* m_predictedTitle;
  QLabel* m_measuredTitle;
  QString m_measuredText;  // the title without the stale mark
};

}  // namespace parasim::gui
