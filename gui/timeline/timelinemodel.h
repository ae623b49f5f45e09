// The timeline as an item model, one row per lane (rank x stream, then busy links), so the
// view, its header of lane names and the tests see one source. Column 0's display text is
// the lane's summary (spans and busy time, or a counter's peak) for text dumps; the
// delegate paints the spans themselves from trace(). TimelineZoom is the visible window in
// time, one object shared by every view that should zoom together (predicted and measured).
#pragma once

#include <QAbstractTableModel>
#include <QObject>
#include <memory>

#include "timelinetrace.h"

namespace parasim::gui {

class TimelineModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  explicit TimelineModel(QObject* parent = nullptr);
  void setTrace(std::shared_ptr<const TimelineTrace> trace);
  [[nodiscard]] const TimelineTrace* trace() const { return m_trace.get(); }
  [[nodiscard]] std::shared_ptr<const TimelineTrace> shared() const { return m_trace; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const TimelineTrace> m_trace;
};

class TimelineZoom : public QObject {
  Q_OBJECT
 public:
  explicit TimelineZoom(QObject* parent = nullptr);
  [[nodiscard]] double start() const { return m_start; }
  [[nodiscard]] double end() const { return m_end; }
  [[nodiscard]] double limit() const { return m_limit; }
  [[nodiscard]] TimeMapping mapping(double width) const { return {m_start, m_end, width}; }
  // The longest trace shown (picoseconds): the window stays within it, plus a margin. A
  // window showing the whole step is refitted to the new limit; a zoomed one is kept.
  void setLimit(double picoseconds);
  // Sets the window, kept at least 1 ns wide and within the limit.
  void setWindow(double start, double end);
  void apply(const TimeMapping& m) { setWindow(m.start, m.end); }
  void fit() { setWindow(0.0, m_limit); }

 signals:
  void changed();

 private:
  double m_start = 0.0;
  double m_end = 1e9;
  double m_limit = 1e9;
};

}  // namespace parasim::gui
