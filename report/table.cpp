#include "report/table.hpp"

#include <algorithm>
#include <stdexcept>

namespace parasim::report {
namespace {

// Display width of UTF-8 text: count the bytes that start a code point.
std::size_t width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

Table::Table(std::vector<std::string> header, std::vector<Align> align)
    : header_(std::move(header)), align_(std::move(align)) {
  align_.resize(header_.size(), Align::left);
}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != header_.size()) throw std::invalid_argument("table row has the wrong number of cells");
  rows_.push_back(std::move(cells));
}

std::string Table::render(const std::string& indent) const {
  std::vector<std::size_t> w(header_.size());
  for (std::size_t c = 0; c < header_.size(); ++c) {
    w[c] = width(header_[c]);
    for (const auto& r : rows_) w[c] = std::max(w[c], width(r[c]));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    out += indent;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(w[c] - width(cells[c]), ' ');
      out += align_[c] == Align::right ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
      if (c + 1 < cells.size()) out += "  ";
    }
    out += '\n';
  };
  line(header_);
  std::size_t total = 0;
  for (std::size_t x : w) total += x + 2;
  out += indent + std::string(total > 2 ? total - 2 : 0, '-') + '\n';
  for (const auto& r : rows_) line(r);
  return out;
}

}  // namespace parasim::report
