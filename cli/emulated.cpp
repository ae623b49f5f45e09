#include "cli/emulated.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"

namespace parasim::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* subnet = "10.213";

std::string ns_name(int node) { return fmt::format("psim-n{}", node); }
std::string node_name(int node) { return fmt::format("n{}", node); }

// Runs argv (no shell); returns its exit status (127: not found) and what it printed.
int run(const std::vector<std::string>& argv, std::string* output = nullptr) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    std::vector<char*> c;
    for (const std::string& a : argv) c.push_back(const_cast<char*>(a.c_str()));
    c.push_back(nullptr);
    ::execvp(c[0], c.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n = 0; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs a step of bringing the cluster up; throws naming it when it fails.
void step(const std::vector<std::string>& argv) {
  std::string out;
  if (const int rc = run(argv, &out); rc != 0) {
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    throw std::runtime_error(fmt::format("`{}` failed (status {}): {}", cmd, rc, out));
  }
}

// Whether the kernel has netem (a kernel without it, as some VMs', keeps the links' own
// latency): tried on the loopback of a namespace of its own.
bool netem_available() {
  const std::string probe = "psim-netem-probe";
  if (run({"ip", "netns", "add", probe}) != 0) return false;
  const bool ok = run({"ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"}) == 0;
  run({"ip", "netns", "del", probe});
  return ok;
}

// Delay then rate on a NIC's egress: netem holding each packet half the link's latency,
// under it a token bucket at the NIC's rate. Its burst, what may leave at the veth's own
// speed after a pause, is small (100 us of the rate, at least two full frames), so that a
// message of any size takes about its size over the rate, as on a NIC.
void shape(const std::string& ns, const std::string& dev, const EmulatedCluster& c) {
  std::vector<std::string> pre = ns.empty() ? std::vector<std::string>{} : std::vector<std::string>{"ip", "netns", "exec", ns};
  auto tc = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = pre;
    argv.emplace_back("tc");
    argv.insert(argv.end(), args.begin(), args.end());
    step(argv);
  };
  const auto bits = fmt::format("{}bit", std::llround(c.rate * 8.0));
  const auto burst = fmt::format("{}", std::max<long long>(2 * 1514, std::llround(c.rate * 1e-4)));
  if (c.latency > 0.0) {
    tc({"qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem", "delay",
        fmt::format("{}us", std::llround(c.latency * 0.5e6)), "limit", "100000"});
    tc({"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "tbf", "rate", bits, "burst", burst, "latency", "100ms"});
  } else {
    tc({"qdisc", "replace", "dev", dev, "root", "tbf", "rate", bits, "burst", burst, "latency", "100ms"});
  }
}

// Every node's namespace exists (the state alone may outlive them).
bool nodes_present(const EmulatedCluster& c) {
  std::string out;
  if (run({"ip", "netns", "list"}, &out) != 0) return false;
  for (int i = 0; i < c.nodes; ++i) {
    if (out.find(ns_name(i) + " ") == std::string::npos && out.find(ns_name(i) + "\n") == std::string::npos) return false;
  }
  return true;
}

nlohmann::json to_json(const EmulatedCluster& c) {
  return {{"scenario", c.scenario}, {"nodes", c.nodes},   {"ranks_per_node", c.ranks_per_node},
          {"nics", c.nics},         {"rate", c.rate},     {"latency", c.latency}, {"cores", c.cores}};
}

// The cores this process may run on, shared out among `nodes` nodes.
std::vector<std::string> node_cores(int nodes) {
  std::vector<int> mine;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) mine.push_back(c);
    }
  }
  if (mine.empty()) mine.push_back(0);
  const auto n = static_cast<int>(mine.size());
  std::vector<std::string> out;
  for (int i = 0; i < nodes; ++i) {
    std::string list;
    if (n < nodes) {
      list = std::to_string(mine[static_cast<std::size_t>(i % n)]);
    } else {
      const int per = n / nodes;
      for (int k = i * per; k < (i + 1) * per; ++k) {
        if (!list.empty()) list.push_back(',');
        list += std::to_string(mine[static_cast<std::size_t>(k)]);
      }
    }
    out.push_back(list);
  }
  return out;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  if (!f) throw std::runtime_error(fmt::format("cannot write {}", p.string()));
}

}  // namespace

std::string EmulatedCluster::address(int node, int nic) const { return fmt::format("{}.{}.{}", subnet, nic, node + 1); }

// The file that marks a folder as an emulated cluster's state (cluster_up writes it first).
constexpr const char* state_marker = ".parasim-cluster";

std::string state_dir() {
  const char* dir = std::getenv("PARASIM_CLUSTER_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/run/parasim-cluster";
}

EmulatedCluster emulated_for(const scenario::Scenario& s, double rate, double latency, double max_rate) {
  EmulatedCluster c;
  c.scenario = s.name;
  c.nodes = s.cluster.nodes;
  c.ranks_per_node = s.cluster.gpus_per_node;
  c.nics = std::max(1, s.cluster.inter.nics_per_node);
  c.rate = rate > 0.0 ? rate : std::min(s.cluster.inter.nic_bandwidth, max_rate);
  c.latency = latency >= 0.0 ? latency : s.cluster.inter.latency;
  if (c.nodes < 2 || c.nodes > 64) {
    throw UsageError(fmt::format("an emulated cluster has 2 to 64 nodes; the scenario's cluster has {}", c.nodes));
  }
  if (c.nics > 8) throw UsageError(fmt::format("an emulated node has at most 8 NICs; the scenario's have {}", c.nics));
  c.cores = node_cores(c.nodes);
  return c;
}

std::string emulation_unavailable() {
  if (::geteuid() != 0) return "emulating a cluster needs root (network namespaces, veth pairs and tc)";
  std::string out;
  if (run({"ip", "-V"}, &out) == 127) return "emulating a cluster needs iproute2's `ip` (apt-get install iproute2)";
  if (run({"tc", "-V"}, &out) == 127) return "emulating a cluster needs iproute2's `tc` (apt-get install iproute2)";
  const std::string probe = "psim-probe";
  if (run({"ip", "netns", "add", probe}, &out) != 0) {
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return "this machine cannot make network namespaces (`ip netns add` failed: " + out + ")";
  }
  // What a cluster is made of, tried inside the probe namespace (gone with it).
  std::string missing;
  const std::vector<std::pair<std::vector<std::string>, const char*>> parts{
      {{"ip", "-n", probe, "link", "add", "psim-pa", "type", "veth", "peer", "name", "psim-pb"}, "veth pairs (CONFIG_VETH)"},
      {{"ip", "-n", probe, "link", "add", "psim-pbr", "type", "bridge"}, "bridges (CONFIG_BRIDGE)"},
      {{"ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "psim-pa", "root", "tbf", "rate", "1gbit", "burst",
        "32kb", "latency", "10ms"},
       "tc's token bucket (CONFIG_NET_SCH_TBF)"}};
  for (const auto& [argv, what] : parts) {
    if (missing.empty() && run(argv, &out) != 0) missing = what;
  }
  run({"ip", "netns", "del", probe});
  return missing.empty() ? "" : fmt::format("this machine's kernel has no {}, which an emulated cluster needs", missing);
}

std::optional<EmulatedCluster> cluster_state() {
  std::ifstream f(fs::path(state_dir()) / "cluster.json");
  if (!f) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(f);
    EmulatedCluster c;
    c.scenario = j.at("scenario").get<std::string>();
    c.nodes = j.at("nodes").get<int>();
    c.ranks_per_node = j.at("ranks_per_node").get<int>();
    c.nics = j.at("nics").get<int>();
    c.rate = j.at("rate").get<double>();
    c.latency = j.at("latency").get<double>();
    c.cores = j.at("cores").get<std::vector<std::string>>();
    return c;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a half-written state: `down` clears it
  }
}

std::vector<std::string> cluster_down() {
  std::vector<std::string> removed;
  std::string out;
  run({"ip", "netns", "list"}, &out);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind("psim-", 0) != 0) continue;
    if (run({"ip", "netns", "del", ns}) == 0) removed.push_back("namespace " + ns);
  }
  run({"ip", "-o", "link", "show"}, &out);
  lines = std::istringstream(out);
  for (std::string line; std::getline(lines, line);) {
    // "12: psim-r0: <...": bridges, and switch ends whose node end went with its namespace.
    const std::size_t a = line.find(": ");
    if (a == std::string::npos) continue;
    std::string name = line.substr(a + 2, line.find(':', a + 2) - a - 2);
    name = name.substr(0, name.find('@'));
    if (name.rfind("psim", 0) != 0) continue;
    if (run({"ip", "link", "del", name}) == 0) removed.push_back("link " + name);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/etc/netns", ec)) {
    if (e.path().filename().string().rfind("psim-", 0) == 0 && fs::remove_all(e.path(), ec) > 0) {
      removed.push_back("hosts file " + (e.path() / "hosts").string());
    }
  }
  // The state folder: only the files an emulated cluster writes there, and only where its
  // marker (or a readable state) says it is one; the folder itself when that empties it.
  // PARASIM_CLUSTER_DIR may name any folder (a home folder too): nothing else is touched.
  const fs::path dir = state_dir();
  if (fs::exists(dir / state_marker, ec) || cluster_state()) {
    for (const char* name : {"cluster.json", "hosts", "agent", state_marker}) {
      if (fs::remove(dir / name, ec)) removed.push_back("state " + (dir / name).string());
    }
    if (fs::is_empty(dir, ec) && fs::remove(dir, ec)) removed.push_back("state folder " + dir.string());
  }
  return removed;
}

bool cluster_up(EmulatedCluster& c) {
  if (const std::string why = emulation_unavailable(); !why.empty()) throw UsageError(why);
  if (c.latency > 0.0 && !netem_available()) c.latency = 0.0;
  if (const auto up = cluster_state(); up && *up == c && nodes_present(c)) return false;
  cluster_down();
  try {
    for (int k = 0; k < c.nics; ++k) {
      const std::string br = fmt::format("psim-r{}", k);
      step({"ip", "link", "add", br, "type", "bridge"});
      step({"ip", "addr", "add", fmt::format("{}.{}.254/24", subnet, k), "dev", br});
      step({"ip", "link", "set", br, "up"});
    }
    std::string hosts = "127.0.0.1 localhost\n";
    for (int i = 0; i < c.nodes; ++i) hosts += fmt::format("{} {}\n", c.address(i, 0), node_name(i));
    for (int i = 0; i < c.nodes; ++i) {
      const std::string ns = ns_name(i);
      step({"ip", "netns", "add", ns});
      step({"ip", "-n", ns, "link", "set", "lo", "up"});
      for (int k = 0; k < c.nics; ++k) {
        const std::string node_end = fmt::format("psim{}r{}", i, k);
        const std::string switch_end = node_end + "s";
        const std::string nic = fmt::format("eth{}", k);
        step({"ip", "link", "add", node_end, "type", "veth", "peer", "name", switch_end});
        step({"ip", "link", "set", node_end, "netns", ns});
        step({"ip", "-n", ns, "link", "set", node_end, "name", nic});
        step({"ip", "-n", ns, "addr", "add", c.address(i, k) + "/24", "dev", nic});
        step({"ip", "-n", ns, "link", "set", nic, "up"});
        step({"ip", "link", "set", switch_end, "master", fmt::format("psim-r{}", k)});
        step({"ip", "link", "set", switch_end, "up"});
        shape(ns, nic, c);     // the NIC sending
        shape("", switch_end, c);  // and receiving
      }
      const fs::path etc = fs::path("/etc/netns") / ns;
      fs::create_directories(etc);
      write_file(etc / "hosts", hosts);
    }
    const fs::path dir = state_dir();
    fs::create_directories(dir);
    // First, so that `down` knows the folder for a cluster's even when the rest is half written.
    write_file(dir / state_marker, "an emulated cluster's state (parasim cluster up): hosts, agent, cluster.json\n");
    std::string hostfile;
    for (int i = 0; i < c.nodes; ++i) hostfile += fmt::format("{} slots={}\n", node_name(i), c.ranks_per_node);
    write_file(dir / "hosts", hostfile);
    // ssh's place for mpirun: run the command line in the node's namespace, on its cores.
    std::string nodes;
    for (int i = 0; i < c.nodes; ++i) {
      nodes += fmt::format("  {}) cores={} ;;\n", node_name(i), c.cores.at(static_cast<std::size_t>(i)));
    }
    write_file(dir / "agent",
               "#!/bin/sh\n"
               "# parasim's launch agent for the emulated cluster (mpirun's plm_rsh_agent): runs the\n"
               "# command line mpirun gives for node NAME inside that node's network namespace, under\n"
               "# the node's host name (Open MPI names its session files and shared-memory segments\n"
               "# after it), on the node's cores.\n"
               "node=$1\n"
               "shift\n"
               "case \"$node\" in\n" +
                   nodes +
                   "  *) echo \"parasim agent: no emulated node named '$node'\" >&2; exit 255 ;;\n"
                   "esac\n"
                   "exec ip netns exec \"psim-$node\" unshare --uts taskset -c \"$cores\" /bin/sh -c \"hostname $node && $*\"\n");
    fs::permissions(dir / "agent", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);
    write_file(dir / "cluster.json", to_json(c).dump(2) + "\n");  // last: the cluster is up
  } catch (...) {
    cluster_down();
    throw;
  }
  return true;
}

std::string emulated_mpirun_args(const EmulatedCluster& c) {
  const std::string dir = state_dir();
  // routed direct: each node's daemon reports to mpirun itself rather than through a tree
  // of the others (whose wire-up over the emulated links occasionally failed).
  // A node with more ranks than cores: a rank waiting in MPI yields its core to the one
  // computing beside it rather than spinning (Open MPI does so by itself only where it
  // knows the host is oversubscribed, which it cannot see through the namespaces).
  const std::string& cores = c.cores.empty() ? std::string("0") : c.cores.front();
  const auto node_cores = static_cast<int>(std::count(cores.begin(), cores.end(), ',')) + 1;
  return fmt::format("--hostfile {0}/hosts --mca plm_rsh_agent {0}/agent --mca oob_tcp_if_include {1}.0.0/16 "
                     "--mca btl_tcp_if_include {1}.0.0/16 --mca btl self,vader,tcp --mca routed direct "
                     "--map-by ppr:{2}:node{3}",
                     dir, subnet, c.ranks_per_node, c.ranks_per_node > node_cores ? " --mca mpi_yield_when_idle 1" : "");
}

std::vector<std::string> emulated_overrides(const EmulatedCluster& c) {
  return {fmt::format("cluster.nodes={}", c.nodes), fmt::format("cluster.gpus_per_node={}", c.ranks_per_node),
          fmt::format("cluster.inter_node.nics_per_node={}", c.nics),
          fmt::format("cluster.inter_node.nic_bandwidth={:.9g}Gbps", c.rate * 8e-9),
          fmt::format("cluster.inter_node.latency={:.9g}us", c.latency * 1e6)};
}

EmulatedCluster emulated_cluster_up() {
  const std::optional<EmulatedCluster> c = cluster_state();
  if (!c) throw UsageError("--emulated: no emulated cluster is up; start one with `parasim cluster up SCENARIO` (as root)");
  return *c;
}

}  // namespace parasim::cli
