// parasim cluster up | down | status: an emulated multi-node cluster on this machine
// (cli/emulated.hpp), for `run`, `validate` and `calibrate --emulated`.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/emulated.hpp"
#include "cli/json.hpp"
#include "topology/units.hpp"

namespace parasim::cli {

namespace {

struct ClusterArgs {
  ScenarioArgs scenario;
  std::string rate, latency;
  std::string max_rate = "1Gbps";
  JsonOption json;
};

double parse_or_throw(const std::string& text, bool bandwidth, const char* option) {
  const units::Parsed p = bandwidth ? units::parse_bandwidth(text) : units::parse_duration(text);
  if (!p.ok()) throw UsageError(fmt::format("{} {}: {}", option, text, p.error));
  return p.value;
}

std::string describe(const EmulatedCluster& c) {
  namespace u = units;
  return fmt::format("{} nodes x {} rank{} ({}), {} NIC{} per node at {} each way, {} NIC to NIC", c.nodes,
                     c.ranks_per_node, c.ranks_per_node == 1 ? "" : "s", c.scenario, c.nics, c.nics == 1 ? "" : "s",
                     u::format_bandwidth(c.rate),
                     c.latency > 0.0 ? u::format_duration(c.latency) + " added" : std::string("no latency added"));
}

// What tc's token bucket shapes faithfully on a veth: from 1 Mbit/s (below, a frame takes
// over 10 ms) to 100 Gbit/s (past any veth's own speed); latency up to 1 s.
constexpr double min_rate = 1e6 / 8.0;
constexpr double max_rate_limit = 100e9 / 8.0;

double rate_or_throw(const std::string& text, const char* option) {
  const double v = parse_or_throw(text, true, option);
  if (v < min_rate || v > max_rate_limit) {
    throw UsageError(fmt::format("{} {}: expected a rate from {} to {} (what tc shapes on a veth)", option, text,
                                 units::format_bandwidth(min_rate), units::format_bandwidth(max_rate_limit)));
  }
  return v;
}

// Holds the machine's emulated-cluster lock (its namespaces are the machine's) while a
// cluster is made or taken down: a second `cluster up` or `down` waits for the first
// instead of finding half a cluster (false "no veth" errors, no cluster left up).
class ClusterLock {
 public:
  ClusterLock() {
    const char* dir = std::filesystem::is_directory("/run/lock") ? "/run/lock" : "/tmp";
    path_ = fmt::format("{}/parasim-cluster.lock", dir);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) throw std::runtime_error(fmt::format("cannot open the cluster lock {}: {}", path_, std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    std::fprintf(stderr, "waiting for another parasim cluster up or down to finish (%s)\n", path_.c_str());
    for (int waited = 0; ::flock(fd_, LOCK_EX | LOCK_NB) != 0; ++waited) {
      if (waited >= 1200) {
        ::close(fd_);
        throw std::runtime_error(fmt::format("another parasim cluster up or down held {} for 2 minutes", path_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ClusterLock() { ::close(fd_); }
  ClusterLock(const ClusterLock&) = delete;
  ClusterLock& operator=(const ClusterLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

void up(const ClusterArgs& a) {
  const scenario::Scenario s = a.scenario.load();
  // Every input checked before anything is touched: a bad rate used to take the working
  // cluster down, then fail in tc.
  const double rate = a.rate.empty() ? 0.0 : rate_or_throw(a.rate, "--rate");
  const double latency = a.latency.empty() ? -1.0 : parse_or_throw(a.latency, false, "--latency");
  if (latency > 1.0) throw UsageError(fmt::format("--latency {}: expected at most 1 s", a.latency));
  const double max_rate = rate_or_throw(a.max_rate, "--max-rate");
  EmulatedCluster c = emulated_for(s, rate, latency, max_rate);
  if (c.rate < min_rate) {
    throw UsageError(fmt::format("the scenario's NICs run at {}, below the {} tc shapes on a veth: give --rate",
                                 units::format_bandwidth(c.rate), units::format_bandwidth(min_rate)));
  }
  const double asked = c.latency;
  const ClusterLock lock;
  if (c.rate < s.cluster.inter.nic_bandwidth) {
    fmt::print("note: the scenario's {} NICs run at {} here (--max-rate); `run`, `validate` and `calibrate "
               "--emulated` predict with the emulated rate\n",
               units::format_bandwidth(s.cluster.inter.nic_bandwidth), units::format_bandwidth(c.rate));
  }
  const bool made = cluster_up(c);
  if (asked > 0.0 && c.latency == 0.0) {
    fmt::print("note: this kernel has no netem (CONFIG_NET_SCH_NETEM): the links keep their own latency rather than "
               "{}; `parasim calibrate --emulated` measures it\n",
               units::format_duration(asked));
  }
  fmt::print("emulated cluster {}: {}\n", made ? "up" : "already up", describe(c));
  fmt::print("  nodes n0 .. n{} in network namespaces psim-n0 .. psim-n{}; NIC k of node i is eth<k> at {}.<k>.<i+1>\n",
             c.nodes - 1, c.nodes - 1, c.address(0, 0).substr(0, c.address(0, 0).find(".0.")));
  std::string cores;
  for (std::size_t i = 0; i < c.cores.size(); ++i) {
    cores += fmt::format("{}n{} on {} {}", i == 0 ? "" : ", ", i, c.cores[i].find(',') == std::string::npos ? "core" : "cores", c.cores[i]);
  }
  fmt::print("  {} (this machine's cores shared out)\n", cores);
  fmt::print("  hostfile {}/hosts, launch agent {}/agent\n", state_dir(), state_dir());
  fmt::print("run on it:  parasim run {} --emulated     take it down:  parasim cluster down\n", a.scenario.path);
}

void down() {
  const ClusterLock lock;
  const std::vector<std::string> removed = cluster_down();
  if (removed.empty()) {
    fmt::print("no emulated cluster was up\n");
    return;
  }
  fmt::print("emulated cluster down: removed {} thing{}\n", removed.size(), removed.size() == 1 ? "" : "s");
  for (const std::string& r : removed) fmt::print("  {}\n", r);
}

void status(const ClusterArgs& a) {
  const std::optional<EmulatedCluster> c = cluster_state();
  if (a.json.wanted()) {
    nlohmann::ordered_json j = {{"up", c.has_value()}};
    if (c) {
      j.update({{"scenario", c->scenario}, {"nodes", c->nodes}, {"ranks_per_node", c->ranks_per_node},
                {"nics", c->nics}, {"rate", c->rate}, {"latency", c->latency}, {"cores", c->cores},
                {"mpirun_args", emulated_mpirun_args(*c)}});
    }
    // The schema and the program's version first, as every JSON parasim writes.
    write_output(a.json.path, stamped("cluster", j).dump(2) + "\n");
    return;
  }
  if (!c) {
    fmt::print("no emulated cluster is up\n");
    return;
  }
  fmt::print("emulated cluster up: {}\n  mpirun {}\n", describe(*c), emulated_mpirun_args(*c));
}

}  // namespace

void add_cluster(CLI::App& app) {
  auto a = std::make_shared<ClusterArgs>();
  CLI::App* cmd = app.add_subcommand("cluster", "An emulated multi-node cluster on this machine (network namespaces and "
                                                 "shaped links), for run, validate and calibrate --emulated");
  cmd->require_subcommand(1);
  CLI::App* u = cmd->add_subcommand("up", "Bring up the scenario's nodes and NICs, shaped to its rate and latency");
  a->scenario.add_to(*u);
  u->add_option("--rate", a->rate, "Each NIC's rate, each way (default: the scenario's, at most --max-rate)");
  u->add_option("--max-rate", a->max_rate, "The most this machine is asked to carry per NIC")->capture_default_str();
  u->add_option("--latency", a->latency, "NIC to NIC latency (default: the scenario's)");
  u->callback([a] { up(*a); });
  cmd->add_subcommand("down", "Take down the emulated cluster (also what a crash left)")->callback([] { down(); });
  CLI::App* st = cmd->add_subcommand("status", "Say whether an emulated cluster is up, and its shape");
  a->json.add_to(*st, "Whether a cluster is up, its shape and the mpirun arguments that start ranks on it");
  st->callback([a] { status(*a); });
}

}  // namespace parasim::cli
