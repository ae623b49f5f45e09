// parasim sweep: the grid's order, each point as the loader and simulator give it
// independently, weak scaling and node growth, the ideal line and efficiency, the plot.
#include <sstream>

#include <catch2/catch.hpp>

#include "scenario/load.hpp"
#include "report/metrics.hpp"
#include "sim/simulate.hpp"
#include "planner/sweep.hpp"

using namespace parasim;

namespace {
const std::string quickstart = PARASIM_SOURCE_DIR "/scenarios/quickstart.yaml";
}

TEST_CASE("an axis is KEY=V1,V2,...", "[sweep]") {
  const planner::SweepAxis a = planner::parse_axis("plan.dp=1,2,4");
  CHECK(a.key == "plan.dp");
  CHECK(a.values == std::vector<std::string>{"1", "2", "4"});
  CHECK(planner::parse_axis("cluster.inter_node.nic_bandwidth=100Gbps").values.size() == 1);
  CHECK_THROWS_AS(planner::parse_axis("plan.dp"), std::invalid_argument);
  CHECK_THROWS_AS(planner::parse_axis("=1,2"), std::invalid_argument);
  CHECK_THROWS_AS(planner::parse_axis("plan.dp=1,,2"), std::invalid_argument);
  // Values holding commas, separated by semicolons.
  CHECK(planner::parse_axis("plan.placement=tp,dp,pp;dp,tp,pp").values ==
        std::vector<std::string>{"tp,dp,pp", "dp,tp,pp"});
}

TEST_CASE("without a change of GPU count a sweep has no ideal line or efficiency", "[sweep]") {
  const std::vector<planner::SweepPoint> pts =
      planner::sweep(quickstart, {}, {planner::parse_axis("training.precision=fp32,bf16")});
  REQUIRE(pts.size() == 2);
  for (const planner::SweepPoint& p : pts) {
    CHECK_FALSE(p.scaling);
    CHECK(p.ideal == 0.0);
    CHECK(p.efficiency == 0.0);
  }
  const std::string svg = planner::sweep_svg(pts, {planner::parse_axis("training.precision=fp32,bf16")}, "precision");
  CHECK(svg.find("class=\"ideal\"") == std::string::npos);  // no ideal line
  CHECK(svg.find(">fp32<") != std::string::npos);  // the points labelled with their values
  CHECK(svg.find("efficiency") == std::string::npos);
  CHECK(svg.find(">training.precision<") != std::string::npos);  // the x axis is the varied key
  const std::vector<planner::SweepPoint> grown = planner::sweep(quickstart, {}, {planner::parse_axis("plan.dp=1,2")});
  CHECK(grown[1].scaling);
  const std::string dp = planner::sweep_svg(grown, {planner::parse_axis("plan.dp=1,2")}, "dp");
  CHECK(dp.find("class=\"ideal\"") != std::string::npos);
  CHECK(dp.find(">plan.dp<") != std::string::npos);  // 1 to 2: a linear axis
}

TEST_CASE("the grid is every combination, the last axis fastest, each point predicted as loaded", "[sweep]") {
  const std::vector<planner::SweepPoint> pts = planner::sweep(
      quickstart, {}, {planner::parse_axis("plan.dp=1,2,4"), planner::parse_axis("training.precision=fp32,bf16")});
  REQUIRE(pts.size() == 6);
  CHECK(pts[0].values == std::vector<std::string>{"1", "fp32"});
  CHECK(pts[1].values == std::vector<std::string>{"1", "bf16"});
  CHECK(pts[5].values == std::vector<std::string>{"4", "bf16"});
  for (const planner::SweepPoint& p : pts) {
    REQUIRE(p.error.empty());
    // Weak scaling: 8 samples per replica (16 over dp 2); 2 CPU ranks per node.
    const int dp = std::stoi(p.values[0]);
    const scenario::Scenario s = scenario::load(quickstart, p.overrides);
    CHECK(s.training.global_batch == 8 * dp);
    CHECK(s.cluster.nodes == (dp + 1) / 2);
    CHECK(p.gpus == dp);
    const report::StepFigures f = report::step_figures(s, sim::predict(s).trace, topology::Cluster(s.cluster));
    CHECK(p.step_time == f.step_time);
    CHECK(p.tokens_per_s == f.tokens_per_s);
  }
  // The ideal line: the smallest point's tokens/s per GPU times the GPUs.
  for (const planner::SweepPoint& p : pts) {
    CHECK(p.ideal == Approx(pts[0].tokens_per_s * p.gpus));
    CHECK(p.efficiency == Approx(p.tokens_per_s / p.ideal));
  }
  CHECK(pts[0].efficiency == 1.0);
}

TEST_CASE("fixed batch and fixed nodes keep the scenario's, a point that fails keeps its message", "[sweep]") {
  planner::SweepOptions o;
  o.per_replica_batch = false;
  o.grow_nodes = false;
  const std::vector<planner::SweepPoint> pts =
      planner::sweep(quickstart, {}, {planner::parse_axis("plan.dp=1,2,4")}, o);
  REQUIRE(pts.size() == 3);
  CHECK(pts[0].error.empty());
  CHECK(pts[1].error.empty());
  // dp 4 on the scenario's 2 ranks: the loader's message, naming the key.
  CHECK_THAT(pts[2].error, Catch::Contains("plan.dp") && Catch::Contains("the cluster has 2"));
  CHECK(pts[2].gpus == 0);
  const std::string svg = planner::sweep_svg(pts, {planner::parse_axis("plan.dp=1,2,4")}, "quickstart <dp>");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("quickstart &lt;dp&gt;") != std::string::npos);
  std::size_t circles = 0;
  for (std::size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++circles;
  CHECK(circles == 2);  // one per simulated point
}

namespace {
// The points of each polyline of `cls` in an SVG, as (x, y) pairs.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg, const std::string& cls) {
  std::vector<std::vector<std::pair<double, double>>> out;
  const std::string tag = "<polyline class=\"" + cls + "\"";
  for (std::size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, at + 1)) {
    const std::size_t from = svg.find("points=\"", at) + 8;
    std::istringstream in(svg.substr(from, svg.find('"', from) - from));
    std::vector<std::pair<double, double>> line;
    double x = 0, y = 0;
    char comma = 0;
    while (in >> x >> comma >> y) line.emplace_back(x, y);
    out.push_back(line);
  }
  return out;
}
}  // namespace

TEST_CASE("a 2-D sweep plots a line per series against the first axis, on a log axis the ideal straight",
          "[sweep]") {
  const std::vector<planner::SweepAxis> axes{planner::parse_axis("plan.dp=1,2,4,8"),
                                             planner::parse_axis("plan.tp=1,2")};
  const std::vector<planner::SweepPoint> pts = planner::sweep(quickstart, {}, axes);
  const std::string svg = planner::sweep_svg(pts, axes, "dp x tp");
  const auto series = polylines(svg, "series");
  REQUIRE(series.size() == 2);  // tp 1 and tp 2, in the legend
  CHECK(svg.find(">plan.tp=1<") != std::string::npos);
  CHECK(svg.find(">plan.tp=2<") != std::string::npos);
  CHECK(svg.find(">plan.dp (log scale)<") != std::string::npos);  // 1 to 8
  for (const auto& line : series) {
    REQUIRE(line.size() == 4);
    // dp 1, 2, 4, 8 evenly spaced on the log axis.
    CHECK(line[1].first - line[0].first == Approx(line[2].first - line[1].first));
    CHECK(line[2].first - line[1].first == Approx(line[3].first - line[2].first));
  }
  // The ideal tokens/s doubles with dp: on log-log axes its points lie on one straight line.
  const auto ideal = polylines(svg, "ideal");
  REQUIRE(ideal.size() == 2);
  for (const auto& line : ideal) {
    REQUIRE(line.size() == 4);
    const double slope = (line[1].second - line[0].second) / (line[1].first - line[0].first);
    CHECK((line[3].second - line[2].second) / (line[3].first - line[2].first) == Approx(slope).margin(0.01));
  }
}
