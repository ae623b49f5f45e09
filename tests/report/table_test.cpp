#include <catch2/catch.hpp>

#include "report/table.hpp"

using parasim::report::Table;

TEST_CASE("a table sizes columns to their widest cell", "[report][table]") {
  Table t({"link", "count", "bandwidth"}, {Table::Align::left, Table::Align::right, Table::Align::right});
  t.add_row({"nvlink", "16", "450 GB/s"});
  t.add_row({"network", "4", "50 GB/s"});
  CHECK(t.render() ==
        "link     count  bandwidth\n"
        "-------------------------\n"
        "nvlink      16   450 GB/s\n"
        "network      4    50 GB/s\n");
}

TEST_CASE("multi-byte characters count as one column", "[report][table]") {
  Table t({"a", "b"});
  t.add_row({"\xC2\xB5s", "x"});
  CHECK(t.render() == "a   b\n-----\n\xC2\xB5s  x\n");
}

TEST_CASE("a row of the wrong width is refused", "[report][table]") {
  Table t({"a", "b"});
  CHECK_THROWS_AS(t.add_row({"only one"}), std::invalid_argument);
}
