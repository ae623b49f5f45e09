#include <catch2/catch.hpp>

#include "topology/units.hpp"

using namespace parasim::units;
using Catch::Matchers::Contains;

TEST_CASE("bandwidths in bits and bytes per second", "[units]") {
  // 400 Gb/s = 400e9 / 8 bytes/s = 50e9 bytes/s.
  CHECK(parse_bandwidth("400Gbps").value == Approx(50e9));
  CHECK(parse_bandwidth("400 Gb/s").value == Approx(50e9));
  CHECK(parse_bandwidth("50 GB/s").value == Approx(50e9));
  CHECK(parse_bandwidth("50GBps").value == Approx(50e9));
  CHECK(parse_bandwidth("1 GiB/s").value == Approx(1073741824.0));
  CHECK(parse_bandwidth("3.35 TB/s").value == Approx(3.35e12));
  CHECK(parse_bandwidth("100 Mbps").value == Approx(12.5e6));
}

TEST_CASE("a bandwidth without a unit is ambiguous and rejected", "[units]") {
  const Parsed p = parse_bandwidth("400");
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(p.error, Contains("needs a unit") && Contains("400Gbps"));
  CHECK_THAT(parse_bandwidth("400 Gbits").error, Contains("unknown bandwidth unit 'Gbits'"));
}

TEST_CASE("sizes use decimal and binary prefixes", "[units]") {
  CHECK(parse_bytes("80GiB").value == 80.0 * 1024 * 1024 * 1024);
  CHECK(parse_bytes("80 GB").value == 80e9);
  CHECK(parse_bytes("25MB").value == 25e6);
  CHECK(parse_bytes("25MiB").value == 25.0 * 1024 * 1024);
  CHECK(parse_bytes("512B").value == 512.0);
  CHECK_THAT(parse_bytes("80").error, Contains("needs a unit"));
  CHECK_THAT(parse_bytes("80 GFLOPS").error, Contains("unknown size unit"));
}

TEST_CASE("durations", "[units]") {
  CHECK(parse_duration("2us").value == Approx(2e-6));
  CHECK(parse_duration("2 \xC2\xB5s").value == Approx(2e-6));
  CHECK(parse_duration("1.5ms").value == Approx(1.5e-3));
  CHECK(parse_duration("10ns").value == Approx(1e-8));
  CHECK(parse_duration("3 s").value == Approx(3.0));
  CHECK(parse_duration("0").value == 0.0);  // zero needs no unit
  CHECK_THAT(parse_duration("5").error, Contains("needs a unit"));
  // Long spans (failures, checkpoint intervals, runs).
  CHECK(parse_duration("30min").value == Approx(1800.0));
  CHECK(parse_duration("5 hours").value == Approx(18000.0));
  CHECK(parse_duration("3.1h").value == Approx(11160.0));
  CHECK(parse_duration("54 days").value == Approx(54 * 86400.0));
  CHECK(parse_duration("2d").value == Approx(172800.0));
  CHECK_THAT(parse_duration("5 weeks").error, Contains("unknown time unit"));
  CHECK(format_span(30) == "30 s");
  CHECK(format_span(1800) == "30 min");
  CHECK(format_span(11160) == "3.1 h");
  CHECK(format_span(54 * 86400.0) == "54 d");
  CHECK(format_span(86333 * 3600.0) == "9.85 years");
}

TEST_CASE("FLOP rates, counts and fractions", "[units]") {
  CHECK(parse_flop_rate("989.4 TFLOPS").value == Approx(989.4e12));
  CHECK(parse_flop_rate("96GFLOP/s").value == Approx(96e9));
  CHECK_THAT(parse_flop_rate("989").error, Contains("needs a unit"));
  CHECK(parse_count("175B").value == Approx(175e9));
  CHECK(parse_count("1.5e3").value == Approx(1500.0));
  CHECK(parse_count("4096").value == 4096.0);
  CHECK_THAT(parse_count("four").error, Contains("expected a number"));
  CHECK(parse_fraction("80%").value == Approx(0.8));
  CHECK(parse_fraction("0.25").value == Approx(0.25));
  CHECK_FALSE(parse_fraction("120%").ok());
}

TEST_CASE("negative and non-numeric quantities are rejected", "[units]") {
  CHECK_THAT(parse_bandwidth("-5 GB/s").error, Contains("non-negative"));
  CHECK_THAT(parse_bytes("GiB").error, Contains("expected a size"));
  CHECK_FALSE(parse_duration("").ok());
}

TEST_CASE("formatting picks a readable prefix", "[units]") {
  CHECK(format_bandwidth(450e9) == "450 GB/s");
  CHECK(format_bandwidth(12.5e9) == "12.5 GB/s");
  CHECK(format_bytes(80.0 * 1024 * 1024 * 1024) == "80 GiB");
  CHECK(format_duration(2e-6) == "2 us");
  CHECK(format_duration(1.5e-3) == "1.5 ms");
  CHECK(format_count(174.6e9) == "175B");
  CHECK(format_count(6.74e9) == "6.7B");
  CHECK(format_flop_rate(989.4e12) == "989 TFLOP/s");
}
