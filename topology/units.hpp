// Physical quantities as people write them in scenarios: "400Gbps", "50 GB/s", "2us",
// "80GiB", "25MB", "989 TFLOPS". Every parser returns the value in SI base units
// (bytes, bytes per second, seconds, FLOP per second) or an explanation of what was
// expected. A bare number is rejected wherever its unit would be ambiguous (bits or bytes,
// micro- or milliseconds); the caller attaches file, line and key to the explanation.
//
// Prefixes: K, M, G, T, P are decimal (1e3 ...); Ki, Mi, Gi, Ti, Pi are binary (2^10 ...).
// Bandwidth: b (bits) or B (bytes) per second, written bps / Gbps / Gb/s or B/s / GB/s /
// GBps / GiB/s. Time: ns, us, µs, ms, s. FLOP rate: FLOPS or FLOP/s with a prefix.
#pragma once

#include <string>
#include <string_view>
#include <span>

namespace parasim::units {

// Either a value or the reason the text is not one.
struct Parsed {
  double value = 0.0;
  std::string error;  // empty on success
  [[nodiscard]] bool ok() const { return error.empty(); }
};

Parsed parse_bytes(std::string_view text);       // "80GiB", "25 MB", "512B"
Parsed parse_bandwidth(std::string_view text);   // bytes per second
Parsed parse_duration(std::string_view text);    // seconds; also min, h (hours), d (days)
Parsed parse_flop_rate(std::string_view text);   // FLOP per second
Parsed parse_power(std::string_view text);       // watts: "700W", "0.5 kW"
Parsed parse_count(std::string_view text);       // plain number, "1.5e9", "175B", "7M"
Parsed parse_fraction(std::string_view text);    // "0.8" or "80%", in [0, 1]

// Human-readable renderings used by reports ("450 GB/s", "2 us", "80 GiB").
std::string format_bytes(double bytes);          // binary prefixes
std::string format_bandwidth(double bytes_per_s);  // decimal GB/s
std::string format_duration(double seconds);
// A long time as people say it: "38 min", "3.1 h", "52.4 d", "9.85 years" (from 1,000 days;
// seconds below a minute).
std::string format_span(double seconds);
std::string format_flop_rate(double flop_per_s);
std::string format_count(double n);              // 175.0B, 7.0M

}  // namespace parasim::units
