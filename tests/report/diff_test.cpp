// parasim diff's comparison (report/diff.hpp): the changed inputs, the figures, and the
// step's parts, whose changes add up to the step's.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "report/diff.hpp"
#include "scenario/load.hpp"
#include "sim/simulate.hpp"
#include "topology/cluster.hpp"

using namespace parasim;

namespace {

struct Predicted {
  scenario::Scenario s;
  report::StepFigures f;
  workload::MemoryReport m;
};

Predicted predicted(const std::vector<std::string>& sets) {
  Predicted p{scenario::load(PARASIM_SOURCE_DIR "/scenarios/hybrid-32-gpus.yaml", sets), {}, {}};
  p.f = report::step_figures(p.s, sim::predict(p.s).trace, topology::Cluster(p.s.cluster));
  p.m = workload::memory_per_rank(p.s);
  return p;
}

}  // namespace

TEST_CASE("the keys whose values differ between two documents", "[report][diff]") {
  const auto a = nlohmann::ordered_json::parse(R"({"a": 1, "b": {"c": 2, "d": [1, 2]}, "e": "x", "g": [1]})");
  const auto b = nlohmann::ordered_json::parse(R"({"a": 1, "b": {"c": 3, "d": [1, 5]}, "f": true, "g": [1, 2]})");
  const std::vector<report::InputChange> c = report::changed_keys(a, b);
  REQUIRE(c.size() == 5);
  CHECK(c[0].key == "b.c");
  CHECK(c[0].a == "2");
  CHECK(c[0].b == "3");
  CHECK(c[1].key == "b.d[1]");
  CHECK(c[2].key == "e");
  CHECK(c[2].b == "-");
  CHECK(c[3].key == "g");  // arrays of different length compared whole
  CHECK(c[3].b == "[1,2]");
  CHECK(c[4].key == "f");
  CHECK(c[4].a == "-");
  CHECK(report::changed_keys(a, a).empty());
}

TEST_CASE("a diff's inputs, figures and the step's parts", "[report][diff]") {
  const Predicted a = predicted({});
  const Predicted b = predicted({"plan.pp=4", "plan.dp=1"});
  const report::Diff d = report::diff({&a.s, &a.f, &a.m, 0.0}, {&b.s, &b.f, &b.m, 0.0});
  std::vector<std::string> keys;
  for (const report::InputChange& c : d.inputs) keys.push_back(c.key);
  CHECK(std::find(keys.begin(), keys.end(), "plan.pp") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "plan.dp") != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), "name") == keys.end());  // names and sources are not inputs
  REQUIRE_FALSE(d.figures.empty());
  CHECK(d.figures[0].id == "step_time");
  CHECK(d.figures[0].a == a.f.step_time);
  CHECK(d.figures[0].b == b.f.step_time);
  // The parts' changes add up to the step's, the largest first.
  double sum = 0.0;
  for (const report::FigureChange& p : d.parts) sum += p.delta();
  CHECK(sum == Approx(b.f.step_time - a.f.step_time).margin(1e-12));
  for (std::size_t i = 0; i + 1 < d.parts.size(); ++i) {
    CHECK(std::abs(d.parts[i].delta()) >= std::abs(d.parts[i + 1].delta()));
  }
  // dp 1: no gradient all-reduce left to expose, the largest mover.
  CHECK(d.parts.front().id == "dp_exposed");
  CHECK(d.parts.front().b == 0.0);
  // The same scenario twice: nothing changed.
  const report::Diff same = report::diff({&a.s, &a.f, &a.m, 0.0}, {&a.s, &a.f, &a.m, 0.0});
  CHECK(same.inputs.empty());
  for (const report::FigureChange& f : same.figures) CHECK(f.delta() == 0.0);
  const std::string text = report::describe_diff(same, "a", "b");
  CHECK(text.find("inputs: the same") != std::string::npos);
  const nlohmann::ordered_json j = report::diff_json(d);
  CHECK(j.at("figures").at(0).at("id") == "step_time");
  CHECK(j.at("parts").size() == d.parts.size());
}
