// The memory this host gives a process: MemAvailable from /proc/meminfo, or less where
// the process's memory cgroup (a container, a CI runner) leaves less. For the CPU ranks'
// memory guard (cli/run.cpp) and the simulator's op limit (program/program.hpp).
#pragma once

namespace parasim::topology {

// In bytes; 0 where unknown.
double host_available_memory();

}  // namespace parasim::topology
