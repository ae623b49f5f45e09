// What a timeline shows: lanes of spans (one per rank and stream) and lanes of counters
// (one per busy link, its utilisation over time), built from a Trace in memory (predicted
// by the simulator, names from its Program) or read from a Chrome trace file (predicted or
// measured, names from the file). Building and reading happen off the GUI thread; the views
// only read.
//
// foldLane() is the painting plan of one lane under a mapping: spans at least a pixel wide
// are drawn as they are; runs of narrower spans that touch the same or the next pixel are
// folded into one item that counts them, so a lane costs at most about a rectangle per
// pixel whatever the trace's size (Tracy's folded zones).
#pragma once

#include <QColor>
#include <QString>
#include <cstdint>
#include <memory>
#include <vector>

#include "report/trace.hpp"
#include "timemapping.h"
#include "topology/cluster.hpp"

namespace parasim::gui {

struct TimelineSpan {
  std::int64_t start = 0;  // picoseconds
  std::int64_t end = 0;
  double flops = 0.0;
  double bytes = 0.0;
  std::int64_t label = -1;    // op id (in-memory trace) or index into labels (file)
  std::int32_t microBatch = -1;
  std::int32_t category = -1;  // program::Category, -1 when unknown
};

struct TimelineLane {
  QString name;
  int rank = -1;     // span lanes
  int stream = -1;
  int link = -1;     // counter lanes (-1 for a file's links, which carry names only)
  std::vector<TimelineSpan> spans;  // by start
  std::vector<std::int64_t> reach;  // reach[i]: the latest end among spans[0..i]
  std::vector<std::pair<std::int64_t, double>> samples;  // counter lanes: (ps, 0..1)

  [[nodiscard]] bool isCounter() const { return spans.empty() && !samples.empty(); }
  [[nodiscard]] std::int64_t busy() const;  // picoseconds covered by spans
};

struct TimelineTrace {
  QString kind;   // "predicted", "measured", or what the file says
  QString title;  // shown above the view
  std::int64_t end = 0;  // the last span's end or counter sample, picoseconds
  std::vector<TimelineLane> lanes;
  std::vector<double> memoryPeak;  // bytes per rank when the trace has memory counters
  std::shared_ptr<const program::Program> program;  // names of in-memory spans
  std::vector<QString> labels;                   // names of file spans

  [[nodiscard]] QString spanName(const TimelineSpan& s) const;
  [[nodiscard]] std::size_t spanCount() const;
};

// Lanes of every rank that has spans (a folded trace: replica 0's ranks) and stream, then
// one lane per link counter. The trace's program must outlive the result through
// `program`.
TimelineTrace timelineFromTrace(const report::Trace& trace, std::shared_ptr<const program::Program> program,
                                const topology::Cluster& cluster, const QString& title);

// Reads a Chrome trace-event JSON file (parasim's, or another tool's complete events).
// Throws std::runtime_error naming the file and what was wrong.
TimelineTrace readTimelineFile(const QString& path);

// Sorts each lane by start and fills reach; sets end.
void finishLanes(TimelineTrace& t);

struct PaintItem {
  double x0 = 0.0;  // pixels
  double x1 = 0.0;
  std::int32_t category = -1;  // a fold's: the category busy longest in it
  bool mixed = false;          // a fold of several categories
  std::size_t first = 0;       // index of the first span
  std::size_t count = 1;       // > 1: folded
  std::int64_t busy = 0;       // picoseconds of the spans folded
};

// The items to paint for one lane over [0, mapping.width] pixels.
std::vector<PaintItem> foldLane(const TimelineLane& lane, const TimeMapping& mapping);
// The item under pixel x (within `slop` pixels), or null.
const PaintItem* itemAt(const std::vector<PaintItem>& items, double x, double slop = 1.0);
// A counter lane's value per pixel column: the highest sample that holds anywhere in it.
std::vector<float> counterColumns(const TimelineLane& lane, const TimeMapping& mapping);

// "forward", ..., "dp_comm", "folded", "other".
QString categoryName(std::int32_t category);
QColor categoryColor(std::int32_t category);
// The tooltip of a painted item: name, category, micro-batch, start, duration, FLOPs or
// bytes; for a fold, how many spans and their busy time.
QString tooltipFor(const TimelineTrace& trace, const TimelineLane& lane, const PaintItem& item);

}  // namespace parasim::gui
