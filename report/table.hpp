// Plain-text tables for the terminal: columns sized to their widest cell, numbers right
// aligned, an optional title and a rule under the header.
#pragma once

#include <string>
#include <vector>

namespace parasim::report {

class Table {
 public:
  enum class Align { left, right };

  explicit Table(std::vector<std::string> header, std::vector<Align> align = {});
  void add_row(std::vector<std::string> cells);
  [[nodiscard]] std::string render(const std::string& indent = "") const;
  [[nodiscard]] std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> header_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace parasim::report
