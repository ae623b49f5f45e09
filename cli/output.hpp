// Output files, written safely. A command checks every output path before it starts
// work, then writes its outputs as a set: each regular file goes to an unpredictable
// temporary created exclusively in the target's folder and all are renamed into place only
// when every one was written, so a failure, or a signal, leaves neither a partial file
// nor a partial set. A special target (/dev/null, a FIFO, a terminal) is written in place,
// never replaced.
#pragma once

#include <string>
#include <vector>

namespace parasim::cli {

// Throws UsageError when `path` cannot be an output: empty, a directory, in a folder that
// does not exist or cannot be written. `option` names it in the message ("--trace"). "-"
// (standard output) is always valid.
void check_output_path(const std::string& path, const std::string& option);

class OutputSet {
 public:
  // A path ending in .gz is written gzip-compressed (unless `content` already is).
  void add(std::string path, std::string content);
  // Writes every file, or none (throws std::runtime_error naming the file and the reason).
  void commit();

 private:
  struct File {
    std::string path;
    std::string content;
  };
  std::vector<File> files_;
};

// Removes the temporaries still open when SIGINT, SIGTERM, SIGHUP or SIGPIPE arrives, then
// dies of the signal. main() installs it once.
void install_output_signal_cleanup();

// Flushes standard output; false (with errno set) when any write to it failed, such as
// on a full disk or a closed pipe.
bool flush_standard_output();

}  // namespace parasim::cli
