// gzip in memory (zlib): what writes a trace named *.gz and what reads one back.
#pragma once

#include <string>
#include <string_view>

namespace parasim::report {

// The gzip stream of `data` (RFC 1952), at zlib's fastest level (a trace compresses 10x at it).
std::string gzip(std::string_view data);
// The data of a gzip stream; throws std::runtime_error on a damaged or truncated one.
std::string gunzip(std::string_view data);
// Whether `data` starts as a gzip stream does (its magic bytes).
bool is_gzip(std::string_view data);
// Whether a file name asks for gzip: it ends in ".gz".
bool gzip_name(std::string_view path);

}  // namespace parasim::report
