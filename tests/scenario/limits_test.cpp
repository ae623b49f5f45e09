// Hostile and careless input: each case was once a crash, a hang, a runaway or a wrong
// verdict. Every one must now end in a ScenarioError that names the file, the key and the
// limit (docs/reliability.md), and leave nothing half-read.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "helpers.hpp"
#include "scenario/limits.hpp"
#include "scenario/load.hpp"

using namespace parasim::scenario;
using Catch::Matchers::Contains;
using parasim::scenario::test::good;
using parasim::scenario::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("test case edits text that is not there: " + from);
  return text.replace(at, from.size(), to);
}


// The error loading `text` (with overrides), or a failed test if it loads.
ScenarioError error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    (void)load_text(text, "bad.yaml", overrides);
  } catch (const ScenarioError& e) {
    return e;
  }
  FAIL("accepted");
  throw std::logic_error("unreachable");
}

ScenarioError error_loading(const std::string& path) {
  try {
    (void)load(path);
  } catch (const ScenarioError& e) {
    return e;
  }
  FAIL("accepted: " << path);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("sizes past the documented limits are refused at their key", "[load][limits]") {
  struct Case {
    std::string name, from, to, key;
    int line;
    std::string says;
  };
  const std::vector<Case> cases{
      {"hidden 6e8 (once an int overflow: negative parameters that fit)", "  hidden: 2048", "  hidden: 6e8", "model.hidden",
       17, "an integer from 1 to 1048576"},
      {"a sequence of 16M tokens", "  seq_len: 2048", "  seq_len: 16777216", "model.seq_len", 20, "from 1 to 4194304"},
      {"67M GPUs", "  nodes: 2\n  gpus_per_node: 8", "  nodes: 65536\n  gpus_per_node: 1024", "cluster.nodes", 3,
       "passes the limit of 65536"},
      {"global batch 2^27", "  global_batch: 64", "  global_batch: 134217728", "training.global_batch", 22,
       "from 1 to 16777216"},
      {"millions of micro-batches", "  global_batch: 64", "  global_batch: 16777216", "training.global_batch", 22,
       "micro-batches per pipeline per step"},
      {"1e308 TB/s overflows to inf", "    bandwidth: 450 GB/s", "    bandwidth: 1e308 TB/s", "cluster.intra_node.bandwidth",
       8, "too large to represent"},
      {"a bandwidth of 1 byte a second", "    bandwidth: 450 GB/s", "    bandwidth: 1 B/s", "cluster.intra_node.bandwidth", 8,
       "from 1 KB/s to 1 EB/s"},
      {"a latency of 1e308 minutes", "    latency: 2us", "    latency: 1e308min", "cluster.intra_node.latency", 9,
       "too large to represent"},
      {"a latency of a day", "    latency: 2us", "    latency: 86400s", "cluster.intra_node.latency", 9, "at most 1 min"},
      {"a step past the simulated clock's range", "  hidden: 2048\n  heads: 16\n  vocab: 51200\n  seq_len: 2048",
       "  hidden: 1048576\n  heads: 16\n  vocab: 51200\n  seq_len: 4194304", "model.hidden", 17,
       "past what the simulator can represent"},
      {"a scenario name that climbs out of its folder", "name: base", "name: /../../../escaped", "name", 1,
       "without '/'"},
      {"a name of non-UTF-8 bytes", "name: base", "name: \"\xff\xfe\"", "name", 1, "expected UTF-8 text"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const ScenarioError e = error_of(replace(good, c.from, c.to));
      INFO(e.what());
      CHECK(e.key() == c.key);
      CHECK(e.where().file == "bad.yaml");
      CHECK(e.where().line == c.line);
      CHECK_THAT(e.what(), Contains(c.says));
    }
  }
}

TEST_CASE("a device peak of 1e-300 FLOPS is refused, not divided by", "[load][limits]") {
  const ScenarioError e = error_of(good, {"cluster.device.peak.bf16=1e-300 FLOPS"});
  CHECK(e.key() == "cluster.device.peak.bf16");
  CHECK_THAT(e.what(), Contains("from 1 MFLOPS to 1 EFLOPS"));
}

TEST_CASE("YAML that would grow or hide input is refused", "[load][limits]") {
  SECTION("an alias bomb of 513 bytes stops at the value limit") {
    std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
    for (char c = 'b'; c <= 'g'; ++c) {
      const char prev = static_cast<char>(c - 1);
      bomb += fmt::format("{0}: &{0} [*{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}, *{1}]\n", c, prev);
    }
    const ScenarioError e = error_of(bomb);
    CHECK_THAT(e.what(), Contains(fmt::format("more than {} values", limits::yaml_nodes)));
  }
  SECTION("an alias inside its own anchor is a cycle, refused before the stack runs out") {
    const ScenarioError e = error_of(good + "description: &d [x, *d]\n");
    CHECK_THAT(e.what(), Contains(fmt::format("nested more than {} levels deep", limits::yaml_depth)));
  }
  SECTION("lists nested 100 deep") {
    const ScenarioError e = error_of(good + "description: " + std::string(100, '[') + std::string(100, ']') + "\n");
    CHECK(e.where().line == 29);
    CHECK_THAT(e.what(), Contains("levels deep"));
  }
  SECTION("lists nested 4,000 deep stop at the YAML reader's own guard, named so") {
    const ScenarioError e = error_of(good + "description: " + std::string(4000, '[') + std::string(4000, ']') + "\n");
    CHECK_THAT(e.what(), Contains("levels deep (the YAML reader's limit)"));
    CHECK_THAT(e.what(), !Contains("bad file"));
  }
  SECTION("a merge key is named as one, not as an unknown key") {
    const ScenarioError e = error_of(good + "hardware: &h {}\nrun:\n  <<: *h\n");
    CHECK_THAT(e.what(), Contains("a YAML merge key ('<<: *anchor') is not read here"));
    CHECK_THAT(e.what(), !Contains("did you mean"));
  }
  SECTION("text past 4 MiB") {
    const ScenarioError e = error_of(good + "description: \"" + std::string(5 << 20, 'x') + "\"\n");
    CHECK_THAT(e.what(), Contains("past the limit"));
  }
  SECTION("a second document is not ignored") {
    const ScenarioError e = error_of(good + "---\nname: other\n");
    CHECK(e.where().line == 29);  // the --- line
    CHECK_THAT(e.what(), Contains("a second YAML document"));
  }
  SECTION("content after the end marker '...' is a second document") {
    const ScenarioError e = error_of(good + "...\nname: other\n");
    CHECK(e.where().line == 30);  // the first line after the '...' line
    CHECK_THAT(e.what(), Contains("after the end marker '...'"));
    const ScenarioError first = error_of("...\n" + good);  // an empty first document
    CHECK(first.where().line == 2);
    CHECK_THAT(first.what(), Contains("a second YAML document"));
  }
  SECTION("directives, an opening '---' and a closing '...' frame the one document") {
    CHECK_NOTHROW(load_text("%YAML 1.2\n---\n" + good + "...\n# done\n", "framed.yaml"));
    CHECK_NOTHROW(load_text("# a scenario\n---\n" + good, "opened.yaml"));
  }
  SECTION("--set extends= is refused, not ignored") {
    const ScenarioError e = error_of(good, {"extends=/etc/passwd"});
    CHECK(e.key() == "extends");
    CHECK_THAT(e.what(), Contains("cannot be set with --set"));
  }
}

TEST_CASE("extends: reads only scenario files, each once, to a bounded depth", "[load][extends][limits]") {
  const TempDir dir;
  SECTION("a file that is not a scenario is named, and nothing of it is shown") {
    dir.write("secret", "root:$6$saltsalt$hashhash:19000:0:99999:7:::\n");
    const std::string top = dir.write("top.yaml", "extends: secret\n" + good);
    const ScenarioError e = error_loading(top);
    CHECK(e.key() == "extends");
    CHECK(e.where().line == 1);
    CHECK_THAT(e.what(), Contains("'secret' is not a scenario file"));
    CHECK_THAT(e.what(), !Contains("root") && !Contains("hash"));
  }
  SECTION("a chain deeper than the limit") {
    dir.write("base0.yaml", good);
    for (int i = 1; i <= limits::extends_depth + 2; ++i) {
      dir.write(fmt::format("base{}.yaml", i), fmt::format("extends: base{}.yaml\n", i - 1));
    }
    const ScenarioError e = error_loading((dir.path / fmt::format("base{}.yaml", limits::extends_depth + 2)).string());
    CHECK_THAT(e.what(), Contains(fmt::format("more than {} files deep", limits::extends_depth)));
  }
  SECTION("a diamond of 15 levels, each file extending the one below twice, reads each file once") {
    // Without reading each once this is 2^15 parses of the bottom file.
    dir.write("d0.yaml", good);
    for (int i = 1; i <= 15; ++i) {
      dir.write(fmt::format("d{}.yaml", i), fmt::format("extends: [d{0}.yaml, d{0}.yaml]\n", i - 1));
    }
    const Scenario s = load((dir.path / "d15.yaml").string());
    CHECK(s.plan.tp == 2);
  }
  SECTION("a FIFO or a device is refused without opening it") {
    const std::string fifo = (dir.path / "pipe.yaml").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(error_loading(fifo).what(), Contains("got a directory, device, FIFO or socket"));
    CHECK_THAT(error_of(good + "hardware:\n  profile: /dev/zero\n").what(), Contains("not a regular file"));
    const std::string top = dir.write("top.yaml", good + "hardware:\n  profile: pipe.yaml\n");
    CHECK_THAT(error_loading(top).what(), Contains("not a regular file"));
  }
}
