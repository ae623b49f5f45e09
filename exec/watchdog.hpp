// Every phase of a run watched, so that a rank that stops (SIGSTOP, a hung driver, a
// deadlock) ends the whole job promptly with a message naming it (docs/reliability.md).
//
// Inside each rank: a thread writes a heartbeat file (PARASIM_JOB_DIR/rank-N: pid, phase,
// step) every 200 ms, and ends the rank (exit 1) when the rank has made no progress for the
// stall timeout in any phase: start-up, clock alignment, step, between steps, final gather.
// A stopped rank's threads stop with it, so its heartbeat goes stale.
//
// In the launcher (parasim itself, having started mpirun): watch_job reads the heartbeats,
// and a rank whose heartbeat is stale (or never came) for half the stall timeout is named
// as the one that stopped; mpirun and every rank are then killed. A rank whose process is
// gone while mpirun still runs (killed, crashed) is named with the phase it was in when
// mpirun ends the job.
//
// Parent death: the launcher marks its job folder (PARASIM_JOB_DIR/launcher) and the ranks'
// environment (PARASIM_LAUNCHER) with its identity, its pid and start time; a rank whose
// launcher is gone (SIGKILLed: it could not end mpirun) ends itself within a second, and
// the next launch removes job folders whose launcher is gone.
#pragma once

#include <sys/types.h>

#include <string>

namespace parasim::exec::watchdog {

// Rank side. start() is a no-op unless PARASIM_JOB_DIR is set; the rank number comes from
// the launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID).
void start(double stall_seconds);
// The phase the rank is in ("start-up", "clock alignment", "step", "between steps",
// "final gather"), and the step; each call is progress.
void phase(const char* name, int step = -1);
// Progress inside a phase (the step loop calls it as ops complete).
void progress();
void stop();

// Launcher side: waits for `child` (mpirun), watching the heartbeats in `dir` of `ranks`
// ranks. Returns the child's wait status; when a rank stopped, prints which and why,
// kills the child's process group and every rank, and returns a status of exit 1; when a
// rank died and mpirun ended with a status of its own (not a rank's 0, 1 or 2), prints
// which rank and in which phase, and returns a status of exit 1.
int watch_job(pid_t child, const std::string& dir, int ranks, double stall_seconds);

// A process's identity, "PID START" (its start time in clock ticks since boot, from
// /proc/PID/stat), so that a pid reused by another process is not taken for it; empty when
// there is no such process.
std::string process_identity(pid_t pid);
// Whether the process `identity` names still runs.
bool alive(const std::string& identity);
// Exports PARASIM_LAUNCHER for the ranks and marks `dir` (if any) as this launcher's job
// folder.
void mark_launcher(const std::string& dir);
// Removes the job folders (parasim-job-*) under `parent` that this user's launchers left
// when they were killed: only a folder whose launcher file names a process that is gone,
// and in it only the files a job writes. Returns how many it removed.
int remove_stale_jobs(const std::string& parent);

}  // namespace parasim::exec::watchdog
