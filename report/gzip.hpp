// gzip in memory (zlib): what writes a trace named *.gz and what reads one back.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace parasim::report {

// The gzip stream of `data` (RFC 1952), at zlib's fastest level (a trace compresses 10x at it).
std::string gzip(std::string_view data);
// gzip() a piece at a time: add() compresses each piece as it comes (into the bytes
// finish() returns, with the stream's trailer). The same stream as gzip() of the pieces
// joined, to the byte only where the pieces split alike; gunzip() reads either.
class GzipWriter {
 public:
  GzipWriter();
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;
  void add(std::string_view data);
  std::string finish();

 private:
  struct Stream;
  std::unique_ptr<Stream> z_;
  std::string out_;
  void run(std::string_view data, int flush);
};

// The data of a gzip stream; throws std::runtime_error on a damaged or truncated one, or
// one that unpacks past `limit` bytes (a gzip bomb: a few MiB of zeros unpack to GiBs).
std::string gunzip(std::string_view data, std::size_t limit = std::string().max_size());
// Whether `data` starts as a gzip stream does (its magic bytes).
bool is_gzip(std::string_view data);
// Whether a file name asks for gzip: it ends in ".gz".
bool gzip_name(std::string_view path);

}  // namespace parasim::report
